"""Fast decoding of pull bodies: the consumer's hot path.

A pull body is a run of stored-message records (layout in ``orbitmq.protocol.message_codec``).
:func:`orbitmq.protocol.message_codec.decode_stored_messages` is the reference decoder; this
module decodes the common case, a record with IPv4 hosts, with one ``unpack_from`` of the
88 fixed bytes, caching the topic and host strings that repeat across a body. Any other
record (IPv6 hosts, a blank, anything that fails a check here) is handed to the reference
decoder, which raises the precise RemoteProtocolError; the result is the same either way.

A body whose sysFlag says compressed but that does not inflate (or would inflate past
``INFLATED_MAX_BYTES``) does not fail the pull: that message comes back with its stored bytes
and ``decode_error`` set, and the records after it are decoded as usual. The producer chose
the flag; one such message must not cost the consumer the good ones around it.
"""

from __future__ import annotations

import struct
import zlib

from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageExt, SysFlag
from orbitmq.protocol.message_codec import MESSAGE_MAGIC_CODE, decode_stored_message
from orbitmq.protocol.properties import decode_properties

# TOTALSIZE .. BODYLEN of a record whose born and store hosts are IPv4 (88 bytes).
_FIXED_V4 = struct.Struct(">iiiiiqqiq4siq4siiqi")
_FIXED_BYTES = _FIXED_V4.size
_SHORT = struct.Struct(">h")
_HOST_V6_FLAGS = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6
INFLATED_MAX_BYTES = 64 * 1024 * 1024
"""Largest body a consumer inflates; a larger one is delivered undecoded (``decode_error``)."""


def decode_records(body: bytes) -> list[MessageExt]:
    """Every record of a pull body, bodies inflated when compressed (sysFlag bit 0).

    Raises:
        RemoteProtocolError: a record is malformed or truncated.
    """
    messages: list[MessageExt] = []
    append = messages.append
    unpack = _FIXED_V4.unpack_from
    unpack_short = _SHORT.unpack_from
    hosts: dict[bytes, str] = {}
    topics: dict[bytes, str] = {}
    length = len(body)
    position = 0
    while position < length:
        if position + _FIXED_BYTES > length:
            message, position = decode_stored_message(body, position)
            append(_inflated(message))
            continue
        (
            total_size, magic, body_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
            born_timestamp, born_ip, born_port, store_timestamp, store_ip, store_port,
            reconsume_times, prepared_offset, body_len,
        ) = unpack(body, position)  # fmt: skip
        end = position + total_size
        topic_at = position + _FIXED_BYTES + body_len
        # One bounds check covers magic, host widths, body length and the topic length byte;
        # the properties length must then land exactly on the record's end.
        if (
            magic != MESSAGE_MAGIC_CODE
            or sys_flag & _HOST_V6_FLAGS
            or body_len < 0
            or not topic_at + 3 <= end <= length
        ):
            message, position = decode_stored_message(body, position)
            append(_inflated(message))
            continue
        topic_len = body[topic_at]
        properties_at = topic_at + 3 + topic_len
        if properties_at > end or properties_at + unpack_short(body, properties_at - 2)[0] != end:
            message, position = decode_stored_message(body, position)
            append(_inflated(message))
            continue
        topic_bytes = body[topic_at + 1 : topic_at + 1 + topic_len]
        topic = topics.get(topic_bytes)
        if topic is None:
            topic = topics[topic_bytes] = _utf8(topic_bytes, "topic", position)
        payload = body[position + _FIXED_BYTES : topic_at]
        decode_error = None
        if sys_flag & SysFlag.COMPRESSED:
            payload, decode_error = inflate(payload)
        append(
            MessageExt(
                topic=topic,
                body=payload,
                flag=flag,
                properties=decode_properties(_utf8(body[properties_at:end], "properties", position)),
                queue_id=queue_id,
                queue_offset=queue_offset,
                commit_log_offset=commit_log_offset,
                sys_flag=sys_flag,
                born_timestamp=born_timestamp,
                born_host=(hosts.get(born_ip) or _host(hosts, born_ip), born_port),
                store_timestamp=store_timestamp,
                store_host=(hosts.get(store_ip) or _host(hosts, store_ip), store_port),
                reconsume_times=reconsume_times,
                prepared_transaction_offset=prepared_offset,
                body_crc=body_crc,
                store_size=total_size,
                decode_error=decode_error,
            )
        )
        position = end
    return messages


def inflate(payload: bytes) -> tuple[bytes, str | None]:
    """``(inflated body, None)``, or ``(payload unchanged, why)`` when it does not inflate."""
    inflater = zlib.decompressobj()
    try:
        inflated = inflater.decompress(payload, INFLATED_MAX_BYTES)
    except zlib.error as exc:
        return payload, f"compressed body does not inflate: {exc}"
    if inflater.unconsumed_tail:
        return payload, f"compressed body inflates past {INFLATED_MAX_BYTES} bytes"
    if not inflater.eof:
        return payload, "compressed body is truncated"
    return inflated, None


def _inflated(message: MessageExt) -> MessageExt:
    if message.sys_flag & SysFlag.COMPRESSED:
        message.body, message.decode_error = inflate(message.body)
    return message


def _host(cache: dict[bytes, str], address: bytes) -> str:
    text = cache[address] = f"{address[0]}.{address[1]}.{address[2]}.{address[3]}"
    return text


def _utf8(data: bytes, what: str, position: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(f"{what} of the record at {position} is not UTF-8") from exc
