"""The accounts file, RocketMQ's ``plain_acl.yml``: its model, parser and writer (text in, text out).

::

    globalWhiteRemoteAddresses:      # address patterns; a match skips every check
      - 10.10.103.*
    accounts:
      - accessKey: RocketMQ          # longer than 6 characters, unique
        secretKey: 12345678          # longer than 6 characters
        whiteRemoteAddress:          # one pattern; a match skips signature and permissions
        admin: false                 # true: admin request codes, and every resource
        defaultTopicPerm: DENY       # for topics not listed below (absent = DENY)
        defaultGroupPerm: SUB        # for groups not listed below (absent = DENY)
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]
    dataVersion:                     # written by the ACL admin requests
      - counter: 3
        timestamp: 1700000000000

The file is read with YAML's base schema: every scalar stays the text written, so
``secretKey: 012345678`` is the nine characters ``012345678`` (RocketMQ binds scalars to Java
strings the same way). Unknown keys are errors, as in RocketMQ's bean binding, and the message
names the nearest known key. The admin requests' edits (:func:`upsert_account`,
:func:`remove_account`, :func:`replace_global_white`) are pure: document in, document out.
This module never touches a file.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from orbitmq.acl.address import parse_address_pattern
from orbitmq.acl.permission import is_permission_word
from orbitmq.errors import ConfigError

__all__ = [
    "KEY_LENGTH_MIN",
    "Account",
    "AccountUpdate",
    "AclDocument",
    "DataVersion",
    "dump_document",
    "parse_document",
    "parse_resource_perm",
    "remove_account",
    "replace_global_white",
    "upsert_account",
]

KEY_LENGTH_MIN = 7
"""Access and secret keys must be longer than 6 characters (RocketMQ's rule)."""

_TOP_KEYS = ("globalWhiteRemoteAddresses", "accounts", "dataVersion")
_ACCOUNT_KEYS = (
    "accessKey",
    "secretKey",
    "whiteRemoteAddress",
    "admin",
    "defaultTopicPerm",
    "defaultGroupPerm",
    "topicPerms",
    "groupPerms",
)
_TRUE = frozenset({"true", "yes", "on"})
_FALSE = frozenset({"false", "no", "off", ""})


@dataclass(frozen=True, slots=True)
class Account:
    """One account as written in the file (words kept as written, so edits write them back)."""

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: tuple[str, ...] = ()
    group_perms: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AccountUpdate:
    """UPDATE_AND_CREATE_ACL_CONFIG's fields; ``None`` keeps the account's current value."""

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: tuple[str, ...] | None = None
    group_perms: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class DataVersion:
    """The file's edit counter, bumped by every admin edit."""

    counter: int = 0
    timestamp: int = 0

    def next(self, now_ms: int) -> DataVersion:
        return DataVersion(self.counter + 1, now_ms)

    def to_json(self) -> str:
        """RocketMQ's ``DataVersion.toJson()``."""
        return f'{{"counter":{self.counter},"stateVersion":0,"timestamp":{self.timestamp}}}'


@dataclass(frozen=True, slots=True)
class AclDocument:
    """One accounts file."""

    global_white_remote_addresses: tuple[str, ...] = ()
    accounts: tuple[Account, ...] = ()
    data_version: DataVersion | None = None

    def account(self, access_key: str) -> Account | None:
        """The account with ``access_key`` (the last one, if the file repeats it)."""
        found = None
        for account in self.accounts:
            if account.access_key == access_key:
                found = account
        return found


# -- parsing ---------------------------------------------------------------------------------


def parse_document(text: str, source: str) -> AclDocument:
    """Parse the text of one accounts file; an empty file is an empty document.

    Raises:
        ConfigError: not YAML, an unknown key, a key too short, a malformed ``name=PERM`` entry
            or address pattern; the message names ``source`` and the account.
    """
    try:
        # BaseLoader: every scalar is the string written (no implicit ints, bools or dates).
        tree = yaml.load(text, Loader=yaml.BaseLoader)  # noqa: S506 - BaseLoader builds no objects
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    if tree is None or tree == "":
        return AclDocument()
    top = _mapping(tree, f"{source}: the top level")
    _reject_unknown(top, _TOP_KEYS, f"{source}:")
    white = tuple(_strings(top.get("globalWhiteRemoteAddresses"), f"{source}: globalWhiteRemoteAddresses"))
    for pattern in white:
        _check_pattern(pattern, f"{source}: globalWhiteRemoteAddresses")
    raw_accounts = _sequence(top.get("accounts"), f"{source}: accounts")
    accounts = tuple(
        _account(item, f"{source}: account #{index + 1}") for index, item in enumerate(raw_accounts)
    )
    return AclDocument(white, accounts, _data_version(top.get("dataVersion"), source))


def _account(item: Any, where: str) -> Account:
    raw = _mapping(item, where)
    access_key = _scalar(raw.get("accessKey"), f"{where} accessKey")
    where = f"{where} ({access_key!r})" if access_key else where
    _reject_unknown(raw, _ACCOUNT_KEYS, f"{where}:")
    account = Account(
        access_key=access_key or "",
        secret_key=_scalar(raw.get("secretKey"), f"{where} secretKey") or "",
        white_remote_address=_scalar(raw.get("whiteRemoteAddress"), f"{where} whiteRemoteAddress"),
        admin=_boolean(raw.get("admin"), f"{where} admin"),
        default_topic_perm=_scalar(raw.get("defaultTopicPerm"), f"{where} defaultTopicPerm"),
        default_group_perm=_scalar(raw.get("defaultGroupPerm"), f"{where} defaultGroupPerm"),
        topic_perms=tuple(_strings(raw.get("topicPerms"), f"{where} topicPerms")),
        group_perms=tuple(_strings(raw.get("groupPerms"), f"{where} groupPerms")),
    )
    _check_account(account, where)
    return account


def _check_account(account: Account, where: str) -> None:
    if len(account.access_key) < KEY_LENGTH_MIN or len(account.secret_key) < KEY_LENGTH_MIN:
        # Never quote the secret: this text reaches logs and admin clients.
        raise ConfigError(f"{where}: accessKey and secretKey must both be longer than 6 characters")
    _check_pattern(account.white_remote_address, f"{where} whiteRemoteAddress")
    for entry in account.topic_perms:
        parse_resource_perm(entry, f"{where} topicPerms")
    for entry in account.group_perms:
        parse_resource_perm(entry, f"{where} groupPerms")


def _check_pattern(pattern: str | None, where: str) -> None:
    try:
        parse_address_pattern(pattern)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def parse_resource_perm(entry: str, where: str) -> tuple[str, str]:
    """``"topicA=PUB|SUB"`` -> ``("topicA", "PUB|SUB")``.

    Raises:
        ConfigError: the entry is not exactly one ``name=WORD`` pair.
    """
    items = [item.strip() for item in entry.split("=") if item]
    if len(items) != 2 or not items[0]:
        raise ConfigError(f"{where}: {entry!r} is not 'name=PERM' (for example topicA=SUB)")
    return items[0], items[1]


def _data_version(raw: Any, source: str) -> DataVersion | None:
    if raw is None or raw == "":
        return None
    items = _sequence(raw, f"{source}: dataVersion")
    if not items:
        return None
    first = _mapping(items[0], f"{source}: dataVersion")
    try:
        return DataVersion(int(first.get("counter", 0)), int(first.get("timestamp", 0)))
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: dataVersion counter and timestamp must be integers") from None


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a mapping of key: value")
    return value


def _sequence(value: Any, where: str) -> Sequence[Any]:
    if value is None or value == "":
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list")
    return value


def _scalar(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a single value, not a list or mapping")
    return value.strip() or None


def _strings(value: Any, where: str) -> list[str]:
    return [text for text in (_scalar(item, where) for item in _sequence(value, where)) if text]


def _boolean(value: Any, where: str) -> bool:
    text = (_scalar(value, where) or "").lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{where}: {value!r} is not true or false")


def _reject_unknown(raw: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    for key in raw:
        if key not in known:
            nearest = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {nearest[0]!r}?" if nearest else ""
            raise ConfigError(f"{where} unknown key {key!r}{hint}")


# -- writing -----------------------------------------------------------------------------------


def dump_document(document: AclDocument) -> str:
    """The YAML text of ``document``, in the layout RocketMQ writes (absent values omitted)."""
    tree: dict[str, Any] = {}
    if document.global_white_remote_addresses:
        tree["globalWhiteRemoteAddresses"] = list(document.global_white_remote_addresses)
    tree["accounts"] = [_account_tree(account) for account in document.accounts]
    if document.data_version is not None:
        tree["dataVersion"] = [
            {"counter": document.data_version.counter, "timestamp": document.data_version.timestamp}
        ]
    return yaml.safe_dump(tree, sort_keys=False, default_flow_style=False, allow_unicode=True)


def _account_tree(account: Account) -> dict[str, Any]:
    tree: dict[str, Any] = {"accessKey": account.access_key, "secretKey": account.secret_key}
    if account.white_remote_address:
        tree["whiteRemoteAddress"] = account.white_remote_address
    tree["admin"] = account.admin
    if account.default_topic_perm:
        tree["defaultTopicPerm"] = account.default_topic_perm
    if account.default_group_perm:
        tree["defaultGroupPerm"] = account.default_group_perm
    if account.topic_perms:
        tree["topicPerms"] = list(account.topic_perms)
    if account.group_perms:
        tree["groupPerms"] = list(account.group_perms)
    return tree


# -- admin edits -------------------------------------------------------------------------------


def _bumped(document: AclDocument, now_ms: int) -> DataVersion:
    return (document.data_version or DataVersion()).next(now_ms)


def check_update(update: AccountUpdate) -> None:
    """Reject what UPDATE_AND_CREATE_ACL_CONFIG must not write.

    Raises:
        ConfigError: short keys, a bad address pattern, a malformed ``name=PERM`` entry or a
            word other than DENY, PUB, SUB, PUB|SUB, SUB|PUB.
    """
    where = f"account {update.access_key!r}"
    if len(update.access_key) < KEY_LENGTH_MIN or len(update.secret_key) < KEY_LENGTH_MIN:
        raise ConfigError(f"{where}: accessKey and secretKey must both be longer than 6 characters")
    _check_pattern(update.white_remote_address, f"{where} whiteRemoteAddress")
    for name, word in (
        ("defaultTopicPerm", update.default_topic_perm),
        ("defaultGroupPerm", update.default_group_perm),
    ):
        if word and not is_permission_word(word):
            raise ConfigError(f"{where} {name}: {word!r} is not DENY, PUB, SUB or PUB|SUB")
    for name, entries in (("topicPerms", update.topic_perms), ("groupPerms", update.group_perms)):
        for entry in entries or ():
            _, word = parse_resource_perm(entry, f"{where} {name}")
            if not is_permission_word(word):
                raise ConfigError(f"{where} {name}: {entry!r}: {word!r} is not DENY, PUB, SUB or PUB|SUB")


def upsert_account(document: AclDocument, update: AccountUpdate, now_ms: int) -> AclDocument:
    """Create the account or update the listed fields of the existing one; bump the version.

    Raises:
        ConfigError: as :func:`check_update`.
    """
    check_update(update)
    current = document.account(update.access_key)
    if current is None:
        merged = Account(
            access_key=update.access_key,
            secret_key=update.secret_key,
            white_remote_address=update.white_remote_address,
            admin=update.admin,
            default_topic_perm=update.default_topic_perm,
            default_group_perm=update.default_group_perm,
            topic_perms=update.topic_perms or (),
            group_perms=update.group_perms or (),
        )
        accounts = (*document.accounts, merged)
    else:
        merged = replace(
            current,
            secret_key=update.secret_key,
            white_remote_address=(
                update.white_remote_address
                if update.white_remote_address is not None
                else current.white_remote_address
            ),
            admin=update.admin,
            default_topic_perm=update.default_topic_perm or current.default_topic_perm,
            default_group_perm=update.default_group_perm or current.default_group_perm,
            topic_perms=update.topic_perms if update.topic_perms is not None else current.topic_perms,
            group_perms=update.group_perms if update.group_perms is not None else current.group_perms,
        )
        accounts = tuple(
            account for account in document.accounts if account.access_key != update.access_key
        ) + (merged,)
    return replace(document, accounts=accounts, data_version=_bumped(document, now_ms))


def remove_account(document: AclDocument, access_key: str, now_ms: int) -> AclDocument | None:
    """The document without ``access_key`` (version bumped), or None when it has no such account."""
    if document.account(access_key) is None:
        return None
    accounts = tuple(account for account in document.accounts if account.access_key != access_key)
    return replace(document, accounts=accounts, data_version=_bumped(document, now_ms))


def replace_global_white(document: AclDocument, patterns: Iterable[str], now_ms: int) -> AclDocument:
    """The document with ``globalWhiteRemoteAddresses`` replaced (version bumped).

    Raises:
        ConfigError: a pattern does not parse.
    """
    white = tuple(pattern.strip() for pattern in patterns if pattern.strip())
    for pattern in white:
        _check_pattern(pattern, "globalWhiteRemoteAddresses")
    return replace(document, global_white_remote_addresses=white, data_version=_bumped(document, now_ms))
