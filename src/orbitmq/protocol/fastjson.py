"""fastjson's JSON dialect, as RocketMQ's Java side writes and expects it (sans-IO).

Java serializes admin bodies with fastjson, which differs from JSON in one way that matters:
a map keyed by an object is written with the object itself as the key. Every map keyed by a
``MessageQueue`` looks like this (keys alphabetical, as fastjson sorts fields)::

    {"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":12,...}}}

Java clients (mqadmin, rocketmq-dashboard, rocketmq-exporter) read only that form, so OrbitMQ
writes it (:func:`dumps`, with :class:`ObjectKey` marking such keys), and reads it back with
:func:`loads`, which quotes object keys before handing the text to orjson and returns them as
:class:`ObjectKey` holding the parsed key object. fastjson also writes numeric map keys without
quotes (``{0:"addr"}``); :func:`loads` accepts those too (as strings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from orbitmq.errors import RemoteProtocolError

__all__ = ["ObjectKey", "dumps", "loads"]


class ObjectKey:
    """A map key that is a JSON object (a MessageQueue); ``fields`` are its members."""

    __slots__ = ("fields",)

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self.fields = dict(fields)

    def __hash__(self) -> int:
        return hash(tuple(sorted((key, repr(value)) for key, value in self.fields.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectKey) and self.fields == other.fields

    def __repr__(self) -> str:
        return f"ObjectKey({self.fields!r})"


def _encode(value: Any, out: list[bytes]) -> None:
    if isinstance(value, Mapping):
        out.append(b"{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                out.append(b",")
            if isinstance(key, ObjectKey):
                out.append(orjson.dumps(dict(sorted(key.fields.items()))))
            else:
                out.append(orjson.dumps(str(key)))
            out.append(b":")
            _encode(item, out)
        out.append(b"}")
    elif isinstance(value, list | tuple):
        out.append(b"[")
        for index, item in enumerate(value):
            if index:
                out.append(b",")
            _encode(item, out)
        out.append(b"]")
    else:
        out.append(orjson.dumps(value))


def dumps(value: Any) -> bytes:
    """Encode ``value`` as fastjson would: :class:`ObjectKey` keys become bare objects."""
    out: list[bytes] = []
    _encode(value, out)
    return b"".join(out)


def _quote_object_keys(text: str) -> str:
    """Turn every object-valued (or bare numeric) map key into a string key holding its text.

    A small state machine over the text: it tracks strings (so braces inside them are data)
    and, per open container, whether the next token is an object key.
    """
    out: list[str] = []
    stack: list[bool] = []  # per open container: True for an object
    expect_key = False
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if char == '"':
            end = _string_end(text, index)
            out.append(text[index:end])
            index = end
            expect_key = False
            continue
        if expect_key and char == "{":
            end = _object_end(text, index)
            out.append(orjson.dumps("\x00" + text[index:end]).decode())
            index = end
            expect_key = False
            continue
        if expect_key and (char.isdigit() or char == "-"):
            end = index + 1
            while end < length and text[end].isdigit():
                end += 1
            out.append(f'"{text[index:end]}"')
            index = end
            expect_key = False
            continue
        if char == "{":
            stack.append(True)
            expect_key = True
        elif char == "[":
            stack.append(False)
        elif char in "}]":
            if stack:
                stack.pop()
        elif char == ",":
            expect_key = bool(stack) and stack[-1]
        elif not char.isspace():
            expect_key = False
        out.append(char)
        index += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    index = start + 1
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        if text[index] == '"':
            return index + 1
        index += 1
    raise RemoteProtocolError("fastjson text has an unterminated string")


def _object_end(text: str, start: int) -> int:
    depth = 0
    index = start
    while index < len(text):
        char = text[index]
        if char == '"':
            index = _string_end(text, index)
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    raise RemoteProtocolError("fastjson text has an unterminated object key")


def _restore_keys(value: Any) -> Any:
    if isinstance(value, dict):
        restored: dict[Any, Any] = {}
        for key, item in value.items():
            if key.startswith("\x00"):
                fields = orjson.loads(_quote_object_keys(key[1:]))
                if not isinstance(fields, dict):
                    raise RemoteProtocolError(f"fastjson object key is not an object: {key[1:]!r}")
                restored[ObjectKey(fields)] = _restore_keys(item)
            else:
                restored[key] = _restore_keys(item)
        return restored
    if isinstance(value, list):
        return [_restore_keys(item) for item in value]
    return value


def loads(data: bytes | bytearray | memoryview | str, what: str = "body") -> Any:
    """Parse fastjson text (standard JSON included); object keys come back as :class:`ObjectKey`.

    Raises:
        RemoteProtocolError: the text is not JSON even after quoting its keys; names ``what``.
    """
    raw = bytes(data) if isinstance(data, bytearray | memoryview) else data
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return _restore_keys(orjson.loads(_quote_object_keys(text)))
    except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
        raise RemoteProtocolError(f"{what} is not valid fastjson: {exc}") from exc
