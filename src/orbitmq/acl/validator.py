"""The access check: every accounts file compiled into one :class:`AclTable`, asked per request.

Validation order (RocketMQ's ``PlainPermissionManager.validate``, 5.3), each failing step
giving RocketMQ's text:

1. the peer address matches a ``globalWhiteRemoteAddresses`` pattern: allowed;
2. no ``AccessKey`` ext field: "No accessKey is configured"; a key no file defines:
   "No acl config for <ak>";
3. the peer matches the account's ``whiteRemoteAddress``: allowed;
4. the signature differs: "Check signature failed for accessKey=<ak>";
5. the request needs only PUB on ``RMQ_SYS_TRACE_TOPIC`` (a trace producer): allowed;
6. an ``admin: true`` account: allowed; an admin code otherwise: "Need admin permission for
   request code=<n>, but accessKey=<ak> is not";
7. each resource the request touches: the account's listed permission, else its default for
   groups (``%RETRY%`` resources) or topics: "No permission for topic:<t>" / "No default
   permission for group:<g>" when it is not granted.

The name server asks :meth:`AclTable.check_namesrv`: requests outside ``NAMESRV_ADMIN_CODES``
pass untouched; those inside go through steps 1-4 and then need an admin account. The gRPC
proxy asks :meth:`AclTable.check_grpc` with the resources of one gRPC call: the same steps,
with the gRPC signature (``acl.grpc_auth``) at step 4.

Several files: the first file (in the order given) that defines an access key owns it; a
later definition is ignored with a warning, as in RocketMQ. Within one file the last
definition wins. A table is immutable; a reload builds a new one and swaps it in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from orbitmq.acl.accounts import Account, AclDocument, parse_resource_perm
from orbitmq.acl.address import AddressPattern, parse_address_pattern
from orbitmq.acl.grpc_auth import GrpcCredentials, grpc_signature, grpc_signatures_equal
from orbitmq.acl.permission import PUB, check_permission, is_permission_word, parse_permission
from orbitmq.acl.resources import (
    ADMIN_CODES,
    NAMESRV_ADMIN_CODES,
    RETRY_PREFIX,
    TRACE_TOPIC,
    ResourceError,
    required_resources,
)
from orbitmq.acl.signature import ACCESS_KEY, SIGNATURE, SignatureKey, signatures_equal
from orbitmq.protocol.command import RemotingCommand

__all__ = ["AclTable", "CompiledAccount", "GrpcRefusal"]


@dataclass(frozen=True, slots=True)
class CompiledAccount:
    """An account ready for checks: patterns parsed, words turned into bits."""

    access_key: str
    secret_key: str = field(repr=False)
    secret_key_bytes: bytes = field(repr=False)
    signature_key: SignatureKey = field(repr=False, compare=False)
    white: AddressPattern
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    resources: Mapping[str, int]
    source: str


def _compile(account: Account, source: str, warnings: list[str]) -> CompiledAccount:
    where = f"{source}: account {account.access_key!r}"
    resources: dict[str, int] = {}
    for entries, prefix, what in (
        (account.topic_perms, "", "topicPerms"),
        (account.group_perms, RETRY_PREFIX, "groupPerms"),
    ):
        for entry in entries:
            name, word = parse_resource_perm(entry, f"{where} {what}")
            if not is_permission_word(word):
                warnings.append(f"{where} {what}: {entry!r}: unknown permission {word!r}, treated as DENY")
            resources[prefix + name] = parse_permission(word)
    for what, default_word in (
        ("defaultTopicPerm", account.default_topic_perm),
        ("defaultGroupPerm", account.default_group_perm),
    ):
        if default_word is not None and not is_permission_word(default_word):
            warnings.append(f"{where} {what}: unknown permission {default_word!r}, treated as DENY")
    return CompiledAccount(
        access_key=account.access_key,
        secret_key=account.secret_key,
        secret_key_bytes=account.secret_key.encode("utf-8"),
        signature_key=SignatureKey(account.secret_key.encode("utf-8")),
        white=parse_address_pattern(account.white_remote_address),
        admin=account.admin,
        default_topic_perm=parse_permission(account.default_topic_perm),
        default_group_perm=parse_permission(account.default_group_perm),
        resources=resources,
        source=source,
    )


def _describe(resource: str) -> str:
    if resource.startswith(RETRY_PREFIX):
        return f"group:{resource[len(RETRY_PREFIX) :]}"
    return f"topic:{resource}"


class AclTable:
    """Every account and global white-list pattern of a set of accounts files.

    Args:
        documents: ``(source, document)`` pairs, highest priority first.
        inner_accounts: accounts known only in memory (a standalone broker's key for its own
            name server); they never appear in files or listings.
    """

    def __init__(
        self, documents: Sequence[tuple[str, AclDocument]], inner_accounts: Iterable[Account] = ()
    ) -> None:
        warnings: list[str] = []
        accounts: dict[str, CompiledAccount] = {}
        white: list[AddressPattern] = []
        for source, document in documents:
            white.extend(parse_address_pattern(text) for text in document.global_white_remote_addresses)
            seen_here: set[str] = set()
            for account in document.accounts:
                owner = accounts.get(account.access_key)
                if owner is not None and owner.source != source:
                    warnings.append(
                        f"{source}: accessKey {account.access_key!r} is already defined in "
                        f"{owner.source}; this definition is ignored"
                    )
                    continue
                if account.access_key in seen_here:
                    warnings.append(
                        f"{source}: accessKey {account.access_key!r} is defined twice; the last wins"
                    )
                seen_here.add(account.access_key)
                accounts[account.access_key] = _compile(account, source, warnings)
        for account in inner_accounts:
            accounts.setdefault(account.access_key, _compile(account, "(inner)", warnings))
        self.documents = tuple(documents)
        self.warnings = tuple(warnings)
        self.global_white = tuple(white)
        self._accounts = accounts

    def __len__(self) -> int:
        return len(self._accounts)

    def source_of(self, access_key: str) -> str | None:
        """The file that owns ``access_key`` (None if no file defines it)."""
        account = self._accounts.get(access_key)
        return account.source if account is not None and account.source != "(inner)" else None

    def check_broker(self, request: RemotingCommand, peer_host: str) -> str | None:
        """None when the broker may serve ``request`` from ``peer_host``, else RocketMQ's refusal."""
        return self._check(request, peer_host, admin_codes=ADMIN_CODES, resources=True)

    def check_namesrv(self, request: RemotingCommand, peer_host: str) -> str | None:
        """None when the name server may serve ``request``; only its admin codes are checked."""
        if request.code not in NAMESRV_ADMIN_CODES:
            return None
        return self._check(request, peer_host, admin_codes=NAMESRV_ADMIN_CODES, resources=False)

    def _check(
        self, request: RemotingCommand, peer_host: str, *, admin_codes: frozenset[int], resources: bool
    ) -> str | None:
        for pattern in self.global_white:
            if pattern.matches(peer_host):
                return None
        ext = request.ext_fields
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            return "No accessKey is configured"
        account = self._accounts.get(access_key)
        if account is None:
            return f"No acl config for {access_key}"
        if account.white.matches(peer_host):
            return None
        expected = account.signature_key.signature(ext, request.body, request.version)
        if not signatures_equal(expected, ext.get(SIGNATURE)):
            return f"Check signature failed for accessKey={access_key}"
        if not resources:
            if account.admin:
                return None
            return f"Need admin permission for request code={request.code}, but accessKey={access_key} is not"
        try:
            needed = required_resources(request.code, ext, request.body)
        except ResourceError as exc:
            return str(exc)
        return self._authorize(account, needed, request.code if request.code in admin_codes else None)

    def check_grpc(
        self, credentials: GrpcCredentials, peer_host: str, needed: Mapping[str, int]
    ) -> GrpcRefusal | None:
        """None when a 5.x gRPC client may make a call touching ``needed``, else the refusal.

        The same order as a remoting request (steps 1-7); the signature is the gRPC one
        (``acl.grpc_auth``). gRPC calls have no admin codes.
        """
        for pattern in self.global_white:
            if pattern.matches(peer_host):
                return None
        access_key = credentials.access_key
        if not access_key:
            return GrpcRefusal(True, "No accessKey is configured")
        account = self._accounts.get(access_key)
        if account is None:
            return GrpcRefusal(True, f"No acl config for {access_key}")
        if account.white.matches(peer_host):
            return None
        expected = grpc_signature(account.secret_key_bytes, credentials.date_time)
        if not credentials.signature or not grpc_signatures_equal(expected, credentials.signature):
            return GrpcRefusal(True, f"Check signature failed for accessKey={access_key}")
        reason = self._authorize(account, needed, None)
        return GrpcRefusal(False, reason) if reason is not None else None

    @staticmethod
    def _authorize(account: CompiledAccount, needed: Mapping[str, int], admin_code: int | None) -> str | None:
        """Steps 5-7 for an authenticated account; ``admin_code``: the request's code if admin-only."""
        if needed.get(TRACE_TOPIC) == PUB:
            return None
        if account.admin:
            return None
        if admin_code is not None:
            return (
                f"Need admin permission for request code={admin_code}, "
                f"but accessKey={account.access_key} is not"
            )
        for resource, permission in needed.items():
            owned = account.resources.get(resource)
            if owned is not None:
                if not check_permission(permission, owned):
                    return f"No permission for {_describe(resource)}"
                continue
            default = (
                account.default_group_perm
                if resource.startswith(RETRY_PREFIX)
                else account.default_topic_perm
            )
            if not check_permission(permission, default):
                return f"No default permission for {_describe(resource)}"
        return None


class GrpcRefusal(NamedTuple):
    """Why a gRPC call is refused: ``unauthenticated`` (who is calling is not proven) or not
    permitted (the account lacks a permission)."""

    unauthenticated: bool
    reason: str
