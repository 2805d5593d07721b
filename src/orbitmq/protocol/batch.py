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
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from orbitmq.errors import LocalProtocolError, RemoteProtocolError
from orbitmq.protocol.properties import (
    MAX_PROPERTIES_BYTES,
    PROPERTY_SEPARATOR,
    decode_properties_canonical,
    encode_properties,
)

_HEAD = struct.Struct(">iiiii")  # total_size, magic_code, body_crc, flag, body_len
_PROPERTIES_LEN = struct.Struct(">h")
_HEAD_BYTES = _HEAD.size
_PROPERTIES_LEN_BYTES = _PROPERTIES_LEN.size
_FIXED_BYTES = _HEAD_BYTES + _PROPERTIES_LEN_BYTES
_PROPERTY_SEPARATOR_BYTE = ord(PROPERTY_SEPARATOR)


class BatchItem(NamedTuple):
    """One message of a batch."""

    flag: int
    body: bytes
    properties: dict[str, str]


class BatchColumns(NamedTuple):
    """A batch body split into columns, one entry per message (the broker's send path).

    ``encoded[i]`` is message i's property string as UTF-8 bytes when it is canonical, else
    None (see :func:`decode_batch_columns`).
    """

    flags: list[int]
    bodies: list[bytes]
    properties: list[dict[str, str]]
    encoded: list[bytes | None]


def decode_batch(data: bytes | bytearray | memoryview) -> list[BatchItem]:
    """Split a batch body into its messages.

    Raises:
        RemoteProtocolError: a record is truncated, its sizes are inconsistent, or its
            properties are not UTF-8; the message names the record's index and byte position.
    """
    columns = decode_batch_columns(data)
    return [
        BatchItem(flag, body, properties)
        for flag, body, properties in zip(columns.flags, columns.bodies, columns.properties, strict=True)
    ]


def decode_batch_columns(data: bytes | bytearray | memoryview) -> BatchColumns:
    """:func:`decode_batch` as columns, with each property string's bytes when canonical.

    The bytes are those :func:`~orbitmq.protocol.properties.encode_properties` would give for
    the decoded mapping (the C++ client's trailing separator dropped), so the broker can store
    them without encoding the mapping again; None when the string is not canonical (see
    :func:`~orbitmq.protocol.properties.decode_properties_canonical`). Each record's head is
    unpacked once and only its body and property string are copied out.

    Raises:
        RemoteProtocolError: as :func:`decode_batch`.
    """
    # Slices of bytes are one copy each, cheaper than memoryview slices copied out again.
    buffer = data if isinstance(data, bytes) else bytes(data)
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
    return BatchColumns(flags, bodies, properties_column, encoded)


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
