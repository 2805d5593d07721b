"""The stored-message record (remoting-protocol §3.1), sans-IO.

The same bytes are a CommitLog record on disk and a message inside a PULL_MESSAGE,
VIEW_MESSAGE_BY_ID or QUERY_MESSAGE body, so a pull is served by slicing the log with no
re-encoding. All integers are big-endian and signed.

Layout (IPv4 hosts; each IPv6 host adds 12 bytes and shifts every later field)::

    pos  size   field
    0    4      TOTALSIZE            whole record length in bytes
    4    4      MAGICCODE            0xDAA320A7 message, 0xCBD43194 end-of-file blank
    8    4      BODYCRC              zlib.crc32(stored body) & 0x7FFFFFFF
    12   4      QUEUEID
    16   4      FLAG                 user flag
    20   8      QUEUEOFFSET          logical position in the consume queue
    28   8      PHYSICALOFFSET       commit-log offset of this record
    36   4      SYSFLAG              §3.2 bits (0x10 born host v6, 0x20 store host v6)
    40   8      BORNTIMESTAMP        ms
    48   8      BORNHOST             4-byte IPv4 + port int (16 + 4 when IPv6)
    56   8      STORETIMESTAMP       ms
    64   8      STOREHOST            as BORNHOST
    72   4      RECONSUMETIMES
    76   8      PREPARED TRANSACTION OFFSET
    84   4+n    BODYLEN + body       compressed with zlib when SYSFLAG bit 0 is set
    88+n 1+t    TOPICLEN (signed byte, <= 127) + topic, UTF-8
    ..   2+p    PROPERTIESLEN (signed short, <= 32767) + property string, UTF-8

An end-of-file blank is only TOTALSIZE (the bytes left in the segment) and MAGICCODE.

Encoding refuses what the format cannot carry (LocalProtocolError); decoding turns every
malformed input into RemoteProtocolError, never struct.error or IndexError.
"""

from __future__ import annotations

import ipaddress
import mmap
import struct
import zlib
from functools import lru_cache

from orbitmq.errors import LocalProtocolError, RemoteProtocolError
from orbitmq.model.message import MessageExt, SysFlag
from orbitmq.protocol.properties import (
    MAX_PROPERTIES_BYTES,
    decode_properties_bytes,
    encode_properties,
)

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7 as a signed int
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194 as a signed int
STORED_FIXED_BYTES_IPV4 = 88
MAX_TOPIC_BYTES = 127

# Byte positions (IPv4 layout) that the commit log patches or reads in place.
TOTALSIZE_POSITION = 0
MAGICCODE_POSITION = 4
BODYCRC_POSITION = 8
QUEUEID_POSITION = 12
QUEUEOFFSET_POSITION = 20
PHYSICALOFFSET_POSITION = 28
SYSFLAG_POSITION = 36
BORNTIMESTAMP_POSITION = 40
STORETIMESTAMP_POSITION = 56

_IPV6_EXTRA_BYTES = 12
_HOST_V6_FLAGS = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6

# The fixed part as one struct per host-width combination: the hot path packs all 88
# (or more) fixed bytes with a single pack_into, then copies body and tail.
_FIXED_FORMAT = ">iiiiiqqiq{born}siq{store}siiqi"
_FIXED_STRUCTS = {
    (born, store): struct.Struct(_FIXED_FORMAT.format(born=born, store=store))
    for born in (4, 16)
    for store in (4, 16)
}
_FIXED_IPV4 = _FIXED_STRUCTS[(4, 4)]
_HEAD = struct.Struct(">iiiiiqqi")  # TOTALSIZE .. SYSFLAG (40 bytes)
_BLANK = struct.Struct(">ii")
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_HOST_PORT_V4 = struct.Struct(">4si")
_HOST_PORT_V6 = struct.Struct(">16si")
_SHORT = struct.Struct(">h")

BLANK_RECORD_MIN_BYTES = _BLANK.size

# Where the hot path packs records: a bytearray, or the mapped segment itself.
WritableBuffer = bytearray | memoryview | mmap.mmap


def stored_message_size(body_len: int, topic_len: int, properties_len: int, sys_flag: int = 0) -> int:
    """The record length for these field lengths (bytes), IPv6 host flags included."""
    extra = 0
    if sys_flag & SysFlag.BORNHOST_V6:
        extra += _IPV6_EXTRA_BYTES
    if sys_flag & SysFlag.STOREHOST_V6:
        extra += _IPV6_EXTRA_BYTES
    return STORED_FIXED_BYTES_IPV4 + extra + body_len + 1 + topic_len + 2 + properties_len


@lru_cache(maxsize=1024)
def host_bytes(host: str) -> bytes:
    """The 4 (IPv4) or 16 (IPv6) address bytes of a numeric host string.

    An IPv4-mapped IPv6 address (``::ffff:10.0.0.1``, how a dual-stack socket reports an IPv4
    peer) is written as IPv4: it is one, and clients that read only IPv4 hosts can decode it.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError as exc:
        raise LocalProtocolError(f"host {host[:64]!r} is not a numeric IPv4/IPv6 address") from exc
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.packed
    return address.packed


def host_flags(born_host: str, store_host: str) -> int:
    """The sysFlag bits the two hosts need (0 for IPv4 hosts)."""
    flags = 0
    if len(host_bytes(born_host)) == 16:
        flags |= SysFlag.BORNHOST_V6
    if len(host_bytes(store_host)) == 16:
        flags |= SysFlag.STOREHOST_V6
    return flags


def encode_tail(topic_bytes: bytes, properties_bytes: bytes) -> bytes:
    """TOPICLEN + topic + PROPERTIESLEN + properties: shared by every record of one batch."""
    if len(topic_bytes) > MAX_TOPIC_BYTES:
        raise LocalProtocolError(f"topic is {len(topic_bytes)} bytes, more than {MAX_TOPIC_BYTES}")
    if len(properties_bytes) > MAX_PROPERTIES_BYTES:
        raise LocalProtocolError(
            f"properties are {len(properties_bytes)} bytes, more than {MAX_PROPERTIES_BYTES}"
        )
    return bytes((len(topic_bytes),)) + topic_bytes + _SHORT.pack(len(properties_bytes)) + properties_bytes


def pack_stored_message_into(
    buffer: WritableBuffer,
    position: int,
    total_size: int,
    body_crc: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    commit_log_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    born_port: int,
    store_timestamp: int,
    store_host: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    tail: bytes,
) -> int:
    """Write one record at ``position`` and return the position after it.

    ``tail`` comes from :func:`encode_tail`; ``born_host``/``store_host`` are address bytes
    (:func:`host_bytes`) whose widths must agree with the IPv6 bits of ``sys_flag``.
    Positional parameters keep the per-message call cheap on the append path.
    """
    fixed = _FIXED_IPV4
    if sys_flag & _HOST_V6_FLAGS:
        fixed = _FIXED_STRUCTS[(len(born_host), len(store_host))]
    fixed.pack_into(
        buffer,
        position,
        total_size,
        MESSAGE_MAGIC_CODE,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        commit_log_offset,
        sys_flag,
        born_timestamp,
        born_host,
        born_port,
        store_timestamp,
        store_host,
        store_port,
        reconsume_times,
        prepared_transaction_offset,
        len(body),
    )
    body_position = position + fixed.size
    tail_position = body_position + len(body)
    buffer[body_position:tail_position] = body
    end_position = tail_position + len(tail)
    buffer[tail_position:end_position] = tail
    return end_position


def fixed_part_struct(born_host_bytes: int, store_host_bytes: int) -> struct.Struct:
    """The struct of a record's fields TOTALSIZE..BODYLEN for these host address widths (4 or 16).

    For callers that pack many records inline; see :func:`pack_stored_message_into`.
    """
    return _FIXED_STRUCTS[(born_host_bytes, store_host_bytes)]


def pack_blank_into(buffer: WritableBuffer, position: int, remaining_bytes: int) -> None:
    """Write the end-of-file blank header: TOTALSIZE = the bytes left, MAGICCODE = blank."""
    _BLANK.pack_into(buffer, position, remaining_bytes, BLANK_MAGIC_CODE)


def body_length_position(sys_flag: int) -> int:
    """Where BODYLEN sits in a record with this sysFlag (84 with IPv4 hosts)."""
    position = STORED_FIXED_BYTES_IPV4 - 4
    if sys_flag & SysFlag.BORNHOST_V6:
        position += _IPV6_EXTRA_BYTES
    if sys_flag & SysFlag.STOREHOST_V6:
        position += _IPV6_EXTRA_BYTES
    return position


# body_length_position by the two host bits (sysFlag 0x10, 0x20), for per-record loops.
_BODY_LENGTH_POSITIONS = tuple(body_length_position(host_bits << 4) for host_bits in range(4))


def with_reconsume_times(record: bytes | memoryview, reconsume_times: int) -> bytes:
    """A copy of ``record`` whose RECONSUMETIMES field is ``reconsume_times``.

    A POP redelivery serves the message from its original queue: the stored record says 0,
    the delivery says how many deliveries came before it (``delivery attempt - 1``).

    Raises:
        RemoteProtocolError: the record is too short to hold the field.
    """
    copy = bytearray(record)
    if len(copy) < STORED_FIXED_BYTES_IPV4:
        raise RemoteProtocolError(f"stored message of {len(copy)} bytes is truncated")
    (sys_flag,) = _INT.unpack_from(copy, SYSFLAG_POSITION)
    # RECONSUMETIMES and PREPARED TRANSACTION OFFSET (12 bytes) sit just before BODYLEN.
    position = body_length_position(sys_flag) - 12
    if position + 4 > len(copy):
        raise RemoteProtocolError(f"stored message of {len(copy)} bytes is truncated")
    _INT.pack_into(copy, position, reconsume_times)
    return bytes(copy)


def body_crc32(body: bytes | memoryview) -> int:
    """BODYCRC as RocketMQ stores it (CRC32 with the sign bit cleared)."""
    return zlib.crc32(body) & 0x7FFFFFFF


def encode_stored_message(msg: MessageExt, properties_bytes: bytes | None = None) -> bytes:
    """The record for ``msg`` (its body CRC and TOTALSIZE are computed, not taken from msg).

    Raises:
        LocalProtocolError: the topic, properties or a host cannot be carried.
    """
    if properties_bytes is None:
        properties_bytes = encode_properties(msg.properties).encode("utf-8")
    topic_bytes = msg.topic.encode("utf-8")
    born_host, born_port = msg.born_host
    store_host, store_port = msg.store_host
    sys_flag = (msg.sys_flag & ~_HOST_V6_FLAGS) | host_flags(born_host, store_host)
    tail = encode_tail(topic_bytes, properties_bytes)
    total_size = stored_message_size(len(msg.body), len(topic_bytes), len(properties_bytes), sys_flag)
    buffer = bytearray(total_size)
    pack_stored_message_into(
        buffer,
        0,
        total_size,
        body_crc32(msg.body),
        msg.queue_id,
        msg.flag,
        msg.queue_offset,
        msg.commit_log_offset,
        sys_flag,
        msg.born_timestamp,
        host_bytes(born_host),
        born_port,
        msg.store_timestamp,
        host_bytes(store_host),
        store_port,
        msg.reconsume_times,
        msg.prepared_transaction_offset,
        msg.body,
        tail,
    )
    return bytes(buffer)


def _host_string(address: bytes) -> str:
    if len(address) == 4:
        return f"{address[0]}.{address[1]}.{address[2]}.{address[3]}"
    return str(ipaddress.IPv6Address(address))


def _read_host(view: memoryview, position: int, ipv6: bool) -> tuple[tuple[str, int], int]:
    layout = _HOST_PORT_V6 if ipv6 else _HOST_PORT_V4
    address, port = layout.unpack_from(view, position)
    return (_host_string(address), port), position + layout.size


def decode_stored_message(
    buffer: bytes | bytearray | memoryview,
    position: int = 0,
    *,
    decode_body: bool = True,
    decompress: bool = False,
) -> tuple[MessageExt, int]:
    """Decode the record at ``position``; return it and the position after it.

    ``decode_body=False`` leaves ``body`` empty (cheaper for scans that need headers only);
    ``decompress=True`` inflates a body whose sysFlag bit 0 is set.

    Raises:
        RemoteProtocolError: the bytes are not one complete, well-formed record.
    """
    view = memoryview(buffer)
    try:
        return _decode(view, position, decode_body, decompress)
    except (struct.error, IndexError, ValueError, zlib.error) as exc:
        raise RemoteProtocolError(f"malformed stored message at position {position}: {exc}") from exc
    finally:
        view.release()


def _decode(view: memoryview, position: int, decode_body: bool, decompress: bool) -> tuple[MessageExt, int]:
    if position < 0 or position + STORED_FIXED_BYTES_IPV4 > len(view):
        raise RemoteProtocolError(f"stored message at position {position} is truncated")
    (total_size, magic, body_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag) = (
        _HEAD.unpack_from(view, position)
    )
    if magic != MESSAGE_MAGIC_CODE:
        raise RemoteProtocolError(f"bad magic code {magic:#x} at position {position}")
    end = position + total_size
    if total_size < STORED_FIXED_BYTES_IPV4 or end > len(view):
        raise RemoteProtocolError(f"bad total size {total_size} at position {position}")
    cursor = position + _HEAD.size
    (born_timestamp,) = _LONG.unpack_from(view, cursor)
    born_host, cursor = _read_host(view, cursor + 8, bool(sys_flag & SysFlag.BORNHOST_V6))
    (store_timestamp,) = _LONG.unpack_from(view, cursor)
    store_host, cursor = _read_host(view, cursor + 8, bool(sys_flag & SysFlag.STOREHOST_V6))
    reconsume_times, prepared_transaction_offset, body_len = struct.unpack_from(">iqi", view, cursor)
    cursor += 16
    if body_len < 0 or cursor + body_len + 3 > end:
        raise RemoteProtocolError(f"bad body length {body_len} at position {position}")
    body = bytes(view[cursor : cursor + body_len]) if decode_body else b""
    cursor += body_len
    topic_len = view[cursor]
    if topic_len > MAX_TOPIC_BYTES or cursor + 1 + topic_len + 2 > end:
        raise RemoteProtocolError(f"bad topic length {topic_len} at position {position}")
    topic = _utf8(view[cursor + 1 : cursor + 1 + topic_len], "topic", position)
    cursor += 1 + topic_len
    (properties_len,) = _SHORT.unpack_from(view, cursor)
    cursor += 2
    if properties_len < 0 or cursor + properties_len != end:
        raise RemoteProtocolError(
            f"properties length {properties_len} disagrees with total size {total_size} at position {position}"
        )
    properties = decode_properties_bytes(view[cursor:end])
    if decode_body and decompress and sys_flag & SysFlag.COMPRESSED:
        body = zlib.decompress(body)
    message = MessageExt(
        topic=topic,
        body=body,
        flag=flag,
        properties=properties,
        queue_id=queue_id,
        queue_offset=queue_offset,
        commit_log_offset=commit_log_offset,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_timestamp=store_timestamp,
        store_host=store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        body_crc=body_crc,
        store_size=total_size,
    )
    return message, end


def _utf8(data: memoryview, what: str, position: int) -> str:
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(
            f"{what} of the stored message at position {position} is not UTF-8"
        ) from exc


def decode_stored_messages(
    buffer: bytes | bytearray | memoryview, *, decode_body: bool = True, decompress: bool = False
) -> list[MessageExt]:
    """Decode a concatenation of records (a pull, view or query response body).

    Raises:
        RemoteProtocolError: any record is malformed or the last one is truncated.
    """
    messages: list[MessageExt] = []
    position = 0
    length = len(buffer)
    while position < length:
        message, position = decode_stored_message(
            buffer, position, decode_body=decode_body, decompress=decompress
        )
        messages.append(message)
    return messages


def stored_message_property_bytes(record: bytes | bytearray | memoryview) -> bytes:
    """The raw property string of one stored record (UTF-8, undecoded); filters read it.

    Raises:
        RemoteProtocolError: the record is truncated before the end of its properties.
    """
    try:
        # The host bits (0x10, 0x20) are in the last byte of the big-endian SYSFLAG.
        position = _BODY_LENGTH_POSITIONS[(record[SYSFLAG_POSITION + 3] >> 4) & 3]
        (body_len,) = _INT.unpack_from(record, position)
        position += 5 + body_len + record[position + 4 + body_len]
        (properties_len,) = _SHORT.unpack_from(record, position)
    except (struct.error, IndexError) as exc:
        raise RemoteProtocolError(f"stored message is truncated before its properties: {exc}") from exc
    end = position + 2 + properties_len
    if body_len < 0 or properties_len < 0 or end > len(record):
        raise RemoteProtocolError("stored message is truncated before the end of its properties")
    return bytes(record[position + 2 : end])


def stored_message_properties(record: bytes) -> dict[str, str]:
    """The properties of one stored record, read without decoding the rest.

    Raises:
        RemoteProtocolError: the record is truncated or its properties are not UTF-8.
    """
    return decode_properties_bytes(stored_message_property_bytes(record))
