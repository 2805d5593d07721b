"""Fast decoding of pull bodies: the consumer's hot path.

A pull body is a run of stored-message records (layout in ``orbitmq.protocol.message_codec``).
:func:`orbitmq.protocol.message_codec.decode_stored_messages` is the reference decoder; this
module decodes the common case, a record with IPv4 hosts, with one ``unpack_from`` of the
88 fixed bytes into a :class:`PulledMessageExt`, reusing the topic string that repeats across a
body. Any other record (IPv6 hosts, a blank, anything that fails a check here) is handed to the
reference decoder, which raises the precise RemoteProtocolError; the result is equal either way.

Theory of operation. Per message, decoding every field costs more than most listeners spend on
it: a 100-byte message spent about 2.5 µs here, two thirds of it building the property dict,
the host strings and a 17-keyword dataclass. A :class:`PulledMessageExt` is a
:class:`MessageExt` that keeps the record's unpacked fixed fields as one tuple and its property
string undecoded; ``topic``, ``body`` and ``queue_offset`` (what the consumer itself reads) are
set at once, every other field is computed from that tuple on first read and then kept like an
ordinary field (and may be assigned like one). Every check the eager decoder made is still made
at decode time: the record's lengths, and that topic and properties are UTF-8. The message holds
no reference to the pull body.

A body whose sysFlag says compressed but that does not inflate (or would inflate past
``INFLATED_MAX_BYTES``) does not fail the pull: that message comes back with its stored bytes
and ``decode_error`` set, and the records after it are decoded as usual. The producer chose
the flag; one such message must not cost the consumer the good ones around it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import fields
from functools import lru_cache
from typing import Any

from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageExt, SysFlag
from orbitmq.protocol.message_codec import MAX_TOPIC_BYTES, MESSAGE_MAGIC_CODE, decode_stored_message
from orbitmq.protocol.properties import decode_properties

# TOTALSIZE .. BODYLEN of a record whose born and store hosts are IPv4 (88 bytes).
_FIXED_V4 = struct.Struct(">iiiiiqqiq4siq4siiqi")
_FIXED_BYTES = _FIXED_V4.size
_SHORT = struct.Struct(">h")
_HOST_V6_FLAGS = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6
_FIELD_NAMES = tuple(field.name for field in fields(MessageExt))
INFLATED_MAX_BYTES = 64 * 1024 * 1024
"""Largest body a consumer inflates; a larger one is delivered undecoded (``decode_error``)."""


@lru_cache(maxsize=256)
def _host_string(address: bytes) -> str:
    return f"{address[0]}.{address[1]}.{address[2]}.{address[3]}"


def _lazy(name: str, compute: Callable[[PulledMessageExt], object]) -> Any:
    """A field read from the record's fixed part on first access, then kept in its own slot."""
    slot = getattr(MessageExt, name)  # the dataclass slot (member descriptor) of ``name``
    slot_get, slot_set = slot.__get__, slot.__set__

    def get(message: PulledMessageExt) -> object:
        try:
            return slot_get(message)
        except AttributeError:
            value = compute(message)
            slot_set(message, value)
            return value

    return property(get, slot_set, doc=f"``{name}``, decoded on first read")


class PulledMessageExt(MessageExt):
    """A :class:`MessageExt` decoded from a pull body; fields other than ``topic``, ``body`` and
    ``queue_offset`` are decoded when first read (see the module docstring).

    Equal to a :class:`MessageExt` with the same field values, as the reference decoder's.
    """

    __slots__ = ("_fixed", "_properties_text")

    _fixed: tuple[Any, ...]
    _properties_text: str

    store_size = _lazy("store_size", lambda m: m._fixed[0])
    body_crc = _lazy("body_crc", lambda m: m._fixed[2])
    queue_id = _lazy("queue_id", lambda m: m._fixed[3])
    flag = _lazy("flag", lambda m: m._fixed[4])
    commit_log_offset = _lazy("commit_log_offset", lambda m: m._fixed[6])
    sys_flag = _lazy("sys_flag", lambda m: m._fixed[7])
    born_timestamp = _lazy("born_timestamp", lambda m: m._fixed[8])
    born_host = _lazy("born_host", lambda m: (_host_string(m._fixed[9]), m._fixed[10]))
    store_timestamp = _lazy("store_timestamp", lambda m: m._fixed[11])
    store_host = _lazy("store_host", lambda m: (_host_string(m._fixed[12]), m._fixed[13]))
    reconsume_times = _lazy("reconsume_times", lambda m: m._fixed[14])
    prepared_transaction_offset = _lazy("prepared_transaction_offset", lambda m: m._fixed[15])
    properties = _lazy("properties", lambda m: decode_properties(m._properties_text))
    decode_error = _lazy("decode_error", lambda m: None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageExt):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _FIELD_NAMES)

    __hash__ = None  # type: ignore[assignment]  # mutable, like MessageExt


_new_message = object.__new__


def decode_records(body: bytes) -> list[MessageExt]:
    """Every record of a pull body, bodies inflated when compressed (sysFlag bit 0).

    Raises:
        RemoteProtocolError: a record is malformed or truncated.
    """
    messages: list[MessageExt] = []
    append = messages.append
    unpack = _FIXED_V4.unpack_from
    unpack_short = _SHORT.unpack_from
    topic_bytes = bytes(MAX_TOPIC_BYTES + 1)  # longer than any topic: the first record decodes its own
    topic = ""
    message_type = PulledMessageExt
    new = _new_message
    length = len(body)
    position = 0
    while position < length:
        if position + _FIXED_BYTES > length:
            message, position = decode_stored_message(body, position)
            append(_inflated(message))
            continue
        fixed = unpack(body, position)
        end = position + fixed[0]
        topic_at = position + _FIXED_BYTES + fixed[16]
        # One bounds check covers magic, host widths, body length and the topic length byte;
        # the properties length must then land exactly on the record's end.
        if (
            fixed[1] != MESSAGE_MAGIC_CODE
            or fixed[7] & _HOST_V6_FLAGS
            or fixed[16] < 0
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
        # A body's records mostly share one topic: compare in place before slicing it out.
        if topic_len != len(topic_bytes) or not body.startswith(topic_bytes, topic_at + 1):
            topic_bytes = body[topic_at + 1 : topic_at + 1 + topic_len]
            topic = _utf8(topic_bytes, "topic", position)
        message = new(message_type)
        message._fixed = fixed
        try:
            message._properties_text = body[properties_at:end].decode()
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError(f"properties of the record at {position} are not UTF-8") from exc
        message.topic = topic
        message.queue_offset = fixed[5]
        if fixed[7] & SysFlag.COMPRESSED:
            message.body, message.decode_error = inflate(body[position + _FIXED_BYTES : topic_at])
        else:
            message.body = body[position + _FIXED_BYTES : topic_at]
        append(message)
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


def _utf8(data: bytes, what: str, position: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(f"{what} of the record at {position} is not UTF-8") from exc
