"""RocketMQ-style configuration: ``key=value`` files mapped onto frozen dataclasses.

Operators keep their existing ``namesrv.conf`` / ``broker.conf``: each RocketMQ camelCase key
(``listenPort``, ``brokerClusterName``, ...) maps to one snake_case field of a frozen config
dataclass through the field's metadata::

    listen_port: int = field(default=9876, metadata={"key": "listenPort"})
    # optional: metadata={"key": "mapedFileSizeCommitLog", "aliases": ("mappedFileSizeCommitLog",)}

Loading is two steps, so the caller decides precedence (defaults < file < CLI overrides, by
merging dicts before the second step):

1. :func:`load_properties` reads a Java-properties subset into ``dict[str, str]``.
2. :func:`build_config` / :func:`build_configs` coerce the values by field type and build the
   dataclass(es). A key no dataclass declares is an error naming the nearest known key, unless
   the caller lists it as a RocketMQ key OrbitMQ does not implement, which only logs a warning.

This module sits in the lowest layer: it knows nothing of brokers or name servers, and it never
reads the environment.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import logging
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from orbitmq.errors import ConfigError

__all__ = ["LOG_LEVELS", "build_config", "build_configs", "config_keys", "load_properties"]

# What every command's ``--log-level`` accepts (any case), checked before anything starts.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

logger = logging.getLogger(__name__)

T = TypeVar("T")

_TRUE = frozenset({"true", "1"})
_FALSE = frozenset({"false", "0"})


# -- properties files ------------------------------------------------------------------------


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a Java-properties file (the subset RocketMQ's ``*.conf`` files use).

    Accepted lines: ``key=value`` or ``key: value`` (the first ``=`` or ``:`` separates),
    comments starting with ``#`` or ``!``, and blank lines. Whitespace around keys and values
    is trimmed. A later duplicate key wins, as in ``java.util.Properties``.

    Raises:
        ConfigError: the file cannot be read, or a line is neither blank, a comment nor
            ``key=value``; the message names ``file:line``.
    """
    file_path = Path(path)
    try:
        text = file_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {file_path}: {exc}") from exc
    values: dict[str, str] = {}
    for line_number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or line[0] in "#!":
            continue
        separator = _separator_index(line)
        key = line[:separator].strip() if separator >= 0 else ""
        if not key:
            raise ConfigError(f"{file_path}:{line_number}: expected 'key=value', got {raw_line.strip()!r}")
        values[key] = line[separator + 1 :].strip()
    return values


def _separator_index(line: str) -> int:
    candidates = [index for index in (line.find("="), line.find(":")) if index >= 0]
    return min(candidates) if candidates else -1


# -- dataclass mapping -----------------------------------------------------------------------


def config_keys(cls: type) -> dict[str, str]:
    """Every key (aliases included) a config dataclass accepts, mapped to its field name."""
    keys: dict[str, str] = {}
    for config_field in _config_fields(cls):
        for key in _field_keys(config_field):
            keys[key] = config_field.name
    return keys


def build_config(
    cls: type[T],
    values: Mapping[str, object],
    *,
    known_unimplemented: typing.AbstractSet[str] = frozenset(),
) -> T:
    """Build one config dataclass from RocketMQ-keyed values.

    Args:
        cls: a dataclass whose fields carry ``metadata={"key": ...}``.
        values: key -> value; strings are coerced by field type, already-typed values
            (``int``, ``bool``, ``Path``, an ``Enum`` member ...) are accepted as they are.
        known_unimplemented: RocketMQ keys OrbitMQ ignores; each present one logs a warning.

    Raises:
        ConfigError: an unknown key (naming the nearest known key), a key given twice
            through an alias, or a value that does not fit its field's type.
    """
    (config,) = build_configs([cls], values, known_unimplemented=known_unimplemented)
    return typing.cast(T, config)


def build_configs(
    classes: Sequence[type],
    values: Mapping[str, object],
    known_unimplemented: typing.AbstractSet[str] = frozenset(),
) -> tuple[Any, ...]:
    """Build several config dataclasses from one file's values (``broker.conf`` feeds two).

    A key declared by more than one of the classes sets the field in each of them.
    Returns the instances in the order of ``classes``. Raises as :func:`build_config`.
    """
    keys_by_class = [config_keys(cls) for cls in classes]
    known = {key for keys in keys_by_class for key in keys}
    _check_unknown(values, known, known_unimplemented)
    return tuple(_instantiate(cls, keys, values) for cls, keys in zip(classes, keys_by_class, strict=True))


def _check_unknown(
    values: Mapping[str, object], known: set[str], known_unimplemented: typing.AbstractSet[str]
) -> None:
    for key in values:
        if key in known:
            continue
        if key in known_unimplemented:
            logger.warning("config key %r is a RocketMQ setting OrbitMQ does not implement; ignored", key)
            continue
        nearest = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {nearest[0]!r}?" if nearest else ""
        raise ConfigError(f"unknown config key {key!r}{hint}")


def _instantiate(cls: type, keys: dict[str, str], values: Mapping[str, object]) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, object] = {}
    given_as: dict[str, str] = {}
    for key, raw in values.items():
        field_name = keys.get(key)
        if field_name is None:
            continue
        if field_name in given_as:
            raise ConfigError(
                f"config keys {given_as[field_name]!r} and {key!r} both set field {field_name!r}"
            )
        given_as[field_name] = key
        kwargs[field_name] = coerce_value(key, raw, hints[field_name])
    return cls(**kwargs)


def _config_fields(cls: type) -> list[dataclasses.Field[Any]]:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    return [f for f in dataclasses.fields(cls) if "key" in f.metadata]


def _field_keys(config_field: dataclasses.Field[Any]) -> list[str]:
    return [str(config_field.metadata["key"]), *config_field.metadata.get("aliases", ())]


# -- coercion --------------------------------------------------------------------------------


def coerce_value(key: str, raw: object, target: Any) -> object:
    """Convert ``raw`` to the type ``target`` (a type hint) for config key ``key``.

    Supported: ``int``, ``float``, ``bool`` (true/false/1/0), ``str``, ``Path``, ``Enum``
    subclasses (by member name, case-insensitive), ``X | None`` (an empty string is ``None``)
    and ``tuple[X, ...]`` (items separated by ``;`` or ``,``, as in ``namesrvAddr``).

    Raises:
        ConfigError: naming the key, the value and the expected type.
    """
    origin = typing.get_origin(target)
    if origin in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(target) if arg is not type(None)]
        if raw is None or raw == "":
            return None
        if len(members) != 1:
            raise TypeError(f"config key {key!r}: unsupported union type {target!r}")
        return coerce_value(key, raw, members[0])
    if origin is tuple:
        return _coerce_tuple(key, raw, target)
    if isinstance(target, type):
        return _coerce_scalar(key, raw, target)
    raise TypeError(f"config key {key!r}: unsupported field type {target!r}")


def _coerce_tuple(key: str, raw: object, target: Any) -> tuple[object, ...]:
    args = typing.get_args(target)
    if len(args) != 2 or args[1] is not Ellipsis:
        raise TypeError(f"config key {key!r}: only tuple[X, ...] is supported, not {target!r}")
    if isinstance(raw, (tuple, list)):
        items: list[object] = list(raw)
    elif isinstance(raw, str):
        items = [item.strip() for item in raw.replace(",", ";").split(";") if item.strip()]
    else:
        raise _bad_value(key, raw, "a ';'-separated list")
    return tuple(coerce_value(key, item, args[0]) for item in items)


def _coerce_scalar(key: str, raw: object, target: type) -> object:
    if target is bool:
        return _coerce_bool(key, raw)
    if isinstance(raw, target) and not (isinstance(raw, bool) and target is not bool):
        return raw
    if issubclass(target, enum.Enum):
        return _coerce_enum(key, raw, target)
    if not isinstance(raw, str):
        if target is float and isinstance(raw, int) and not isinstance(raw, bool):
            return float(raw)
        raise _bad_value(key, raw, target.__name__)
    if target is str:
        return raw
    if target is int:
        try:
            return int(raw.strip())
        except ValueError:
            raise _bad_value(key, raw, "int") from None
    if target is float:
        try:
            return float(raw.strip())
        except ValueError:
            raise _bad_value(key, raw, "float") from None
    if issubclass(target, Path):
        return target(raw)
    raise TypeError(f"config key {key!r}: unsupported field type {target.__name__}")


def _coerce_bool(key: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise _bad_value(key, raw, "bool (true/false/1/0)")


def _coerce_enum(key: str, raw: object, target: type[enum.Enum]) -> enum.Enum:
    if isinstance(raw, str):
        wanted = raw.strip().upper()
        for member in target:
            if member.name.upper() == wanted:
                return member
    names = "/".join(member.name for member in target)
    raise _bad_value(key, raw, f"{target.__name__} ({names})")


def _bad_value(key: str, raw: object, expected: str) -> ConfigError:
    return ConfigError(f"config key {key!r}: value {raw!r} is not a valid {expected}")
