"""The batch send body (remoting-protocol §3.4): several producer messages in one request body.

A batch body is a plain concatenation of inner records; none carries a topic or queue,
because all of them go where the request header says. Layout of one inner record
(big-endian)::

    offset  size  field
    0       4     total_size   int, = 22 + body_len + properties_len
    4       4     magic_code   int, 0 from clients (ignored)
    8       4     body_crc     int, 0 from clients (ignored)
    12      4     flag         int, user flag
    16      4     body_len     int
    20      B     body
    20+B    2     properties_len  short (signed, so at most 32767)
    22+B    P     properties   UTF-8 property string (see ``properties.py``)

The C++ client sends batches as SEND_MESSAGE with ``batch:"1"`` and ends each property
string with a trailing 0x02; both decode here. A record whose sizes disagree with each
other or with the bytes present raises ``RemoteProtocolError`` naming its index.

The broker's send path splits a body with :func:`decode_batch_columns`. Most batches are
*plain*: every property string ASCII, canonical, and made of UNIQ_KEY, TAGS and KEYS only
(what OrbitMQ's producer and the C++ client send for messages with a tag and keys). Such a
body is split without a property mapping per message, by :func:`scan_plain_batch`, compiled in
``_batch_scan.c`` when it built (see ``orbitmq/native.py``); any other body, or a malformed one,
takes the general path, which decodes every mapping and words the errors.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from itertools import repeat
from typing import NamedTuple, cast

from orbitmq import native
from orbitmq.errors import LocalProtocolError, RemoteProtocolError
from orbitmq.model.message import MessageConst
from orbitmq.protocol.properties import (
    MAX_PROPERTIES_BYTES,
    PROPERTY_SEPARATOR,
    decode_properties,
    decode_properties_canonical,
    encode_properties,
)

_HEAD = struct.Struct(">iiiii")  # total_size, magic_code, body_crc, flag, body_len
_PROPERTIES_LEN = struct.Struct(">h")
_HEAD_BYTES = _HEAD.size
_PROPERTIES_LEN_BYTES = _PROPERTIES_LEN.size
_FIXED_BYTES = _HEAD_BYTES + _PROPERTIES_LEN_BYTES
_PROPERTY_SEPARATOR_BYTE = ord(PROPERTY_SEPARATOR)

# The only keys a plain message carries (see the module docstring), in the order of
# BatchColumns' unique_keys, tags and keys columns.
PLAIN_KEYS: tuple[str, str, str] = (
    MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageConst.TAGS,
    MessageConst.KEYS,
)
_PLAIN_KEY_BYTES = tuple(key.encode("ascii") for key in PLAIN_KEYS)

# (flags, bodies, property strings, one column of values per key) of a plain batch.
PlainBatch = tuple[list[int], list[bytes], list[bytes], tuple[list[str | None], ...]]


class BatchItem(NamedTuple):
    """One message of a batch."""

    flag: int
    body: bytes
    properties: dict[str, str]


class BatchColumns(NamedTuple):
    """A batch body split into columns, one entry per message (the broker's send path).

    ``encoded[i]`` is message i's property string as UTF-8 bytes when it is canonical, else
    None. ``properties`` is None for a plain batch (see the module docstring): every string is
    canonical and its only keys are UNIQ_KEY, TAGS and KEYS, whose values ``unique_keys``,
    ``tags`` and ``keys`` hold (None where a message lacks one) for every batch.
    """

    flags: list[int]
    bodies: list[bytes]
    properties: list[dict[str, str]] | None
    encoded: list[bytes | None]
    unique_keys: list[str | None]
    tags: list[str | None]
    keys: list[str | None]

    def property_maps(self) -> list[dict[str, str]]:
        """Each message's property mapping (decoded now for a plain batch)."""
        if self.properties is not None:
            return self.properties
        # A plain batch's strings are all canonical ASCII: none is None.
        return [decode_properties(text.decode("ascii")) for text in cast(list[bytes], self.encoded)]


def decode_batch(data: bytes | bytearray | memoryview) -> list[BatchItem]:
    """Split a batch body into its messages.

    Raises:
        RemoteProtocolError: a record is truncated, its sizes are inconsistent, or its
            properties are not UTF-8; the message names the record's index and byte position.
    """
    columns = _decode_general(data if isinstance(data, bytes) else bytes(data))
    return [
        BatchItem(flag, body, properties)
        for flag, body, properties in zip(columns.flags, columns.bodies, columns.property_maps(), strict=True)
    ]


def decode_batch_columns(data: bytes | bytearray | memoryview) -> BatchColumns:
    """:func:`decode_batch` as columns, with each property string's bytes when canonical.

    The bytes are those :func:`~orbitmq.protocol.properties.encode_properties` would give for
    the decoded mapping (the C++ client's trailing separator dropped), so the broker can store
    them without encoding the mapping again; None when the string is not canonical (see
    :func:`~orbitmq.protocol.properties.decode_properties_canonical`). A plain batch comes
    back without mappings (``properties`` None) when the compiled scan is in use.

    Raises:
        RemoteProtocolError: as :func:`decode_batch`.
    """
    # Slices of bytes are one copy each, cheaper than memoryview slices copied out again.
    buffer = data if isinstance(data, bytes) else bytes(data)
    if _native_scan is not None:
        plain = _native_scan(buffer, _PLAIN_KEY_BYTES)
        if plain is not None:
            flags, bodies, encoded, (unique_keys, tags, keys) = plain
            return BatchColumns(
                flags, bodies, None, cast(list[bytes | None], encoded), unique_keys, tags, keys
            )
    return _decode_general(buffer)


def scan_plain_batch(data: bytes, keys: tuple[bytes, ...] = _PLAIN_KEY_BYTES) -> PlainBatch | None:
    """A plain batch's columns, or None when ``data`` is not plain or not well formed.

    Plain here: every property string ASCII, canonical, and of the ``keys`` only. Gives what
    the compiled ``_batch_scan.scan_plain_batch`` gives (the pure-Python twin; tests run both).
    """
    try:
        columns = _decode_general(data)
    except RemoteProtocolError:
        return None
    names = [key.decode("ascii") for key in keys]
    allowed = frozenset(names)
    properties_column = columns.property_maps()
    encoded: list[bytes] = []
    for properties, text in zip(properties_column, columns.encoded, strict=True):
        if text is None or not text.isascii() or not allowed.issuperset(properties):
            return None
        encoded.append(text)
    values = tuple(list(map(dict.get, properties_column, repeat(name))) for name in names)
    return columns.flags, columns.bodies, encoded, values


_scan_module = native.load("orbitmq.protocol._batch_scan")
_native_scan: Callable[[bytes, tuple[bytes, ...]], PlainBatch | None] | None = (
    _scan_module.scan_plain_batch if _scan_module is not None else None
)


def _decode_general(buffer: bytes) -> BatchColumns:
    """The batch body split by the general path: every mapping decoded, errors worded."""
    size = len(buffer)
    flags: list[int] = []
    bodies: list[bytes] = []
    properties_column: list[dict[str, str]] = []
    encoded: list[bytes | None] = []
    add_flag, add_body, add_properties, add_encoded = (
        flags.append,
        bodies.append,
        properties_column.append,
        encoded.append,
    )
    position = 0
    unpack_head = _HEAD.unpack_from
    unpack_properties_len = _PROPERTIES_LEN.unpack_from
    while position < size:
        remaining = size - position
        if remaining < _FIXED_BYTES:
            raise RemoteProtocolError(
                f"batch message #{len(flags)} at byte {position}: {remaining} bytes, fewer than {_FIXED_BYTES}"
            )
        total_size, _magic, _crc, flag, body_len = unpack_head(buffer, position)
        if body_len < 0 or body_len > remaining - _FIXED_BYTES:
            raise RemoteProtocolError(
                f"batch message #{len(flags)} at byte {position}: bad body length {body_len}"
            )
        body_start = position + _HEAD_BYTES
        properties_at = body_start + body_len
        (properties_len,) = unpack_properties_len(buffer, properties_at)
        expected_total = _FIXED_BYTES + body_len + properties_len
        if properties_len < 0 or expected_total > remaining:
            raise RemoteProtocolError(
                f"batch message #{len(flags)} at byte {position}: bad properties length {properties_len}"
            )
        if total_size != expected_total:
            raise RemoteProtocolError(
                f"batch message #{len(flags)} at byte {position}: total size {total_size} != {expected_total}"
            )
        properties_start = properties_at + _PROPERTIES_LEN_BYTES
        raw = buffer[properties_start : properties_start + properties_len]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError(
                f"batch message #{len(flags)} at byte {position}: message properties are not valid UTF-8"
            ) from exc
        properties, canonical = decode_properties_canonical(text)
        add_flag(flag)
        add_body(buffer[body_start:properties_at])
        add_properties(properties)
        if not canonical:
            add_encoded(None)
        elif raw and raw[-1] == _PROPERTY_SEPARATOR_BYTE:
            add_encoded(raw[:-1])
        else:
            add_encoded(raw)
        position += total_size
    unique_key, tags_key, keys_key = PLAIN_KEYS
    return BatchColumns(
        flags,
        bodies,
        properties_column,
        encoded,
        list(map(dict.get, properties_column, repeat(unique_key))),
        list(map(dict.get, properties_column, repeat(tags_key))),
        list(map(dict.get, properties_column, repeat(keys_key))),
    )


def batch_item_size(body: bytes, properties: bytes) -> int:
    """The bytes one inner record of ``body`` and encoded ``properties`` takes in a batch body."""
    return _FIXED_BYTES + len(body) + len(properties)


def encode_batch_item(flag: int, body: bytes, properties: Mapping[str, str]) -> bytes:
    """One inner record of a batch body.

    Raises:
        LocalProtocolError: the properties exceed 32767 bytes or contain a separator, or the
            flag does not fit an int.
    """
    return encode_batch(((flag, body, properties),))


class BatchBodyBuilder:
    """A batch body built item by item, its parts joined once (a producer's batch send).

    ``size`` is the body's length so far, ``count`` its items.
    """

    __slots__ = ("_parts", "size", "count")

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self.size = 0
        self.count = 0

    def add(self, flag: int, body: bytes, properties: bytes) -> None:
        """Append one message: its user ``flag``, ``body`` and UTF-8 property string.

        Raises:
            LocalProtocolError: the properties exceed 32767 bytes, or the flag does not fit
                an int (nothing is appended).
        """
        properties_len = len(properties)
        if properties_len > MAX_PROPERTIES_BYTES:
            raise LocalProtocolError(
                f"batch message properties of {properties_len} bytes exceed {MAX_PROPERTIES_BYTES}"
            )
        total_size = _FIXED_BYTES + len(body) + properties_len
        try:
            head = _HEAD.pack(total_size, 0, 0, flag, len(body))
        except struct.error as exc:
            raise LocalProtocolError(f"batch message flag {flag} or size {total_size} out of range") from exc
        self._parts += (head, body, _PROPERTIES_LEN.pack(properties_len) + properties)
        self.size += total_size
        self.count += 1

    def body(self) -> bytes:
        """The batch body of every message added, in order."""
        return b"".join(self._parts)


def encode_batch(items: Iterable[BatchItem | tuple[int, bytes, Mapping[str, str]]]) -> bytes:
    """A batch body holding ``items`` in order (Java's layout: no trailing property separator).

    Raises:
        LocalProtocolError: as :func:`encode_batch_item`.
    """
    builder = BatchBodyBuilder()
    add = builder.add
    for flag, body, properties in items:
        add(flag, body, encode_properties(properties).encode("utf-8"))
    return builder.body()
