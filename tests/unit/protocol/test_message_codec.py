"""Stored-message codec: golden bytes, round trips, and "only RemoteProtocolError" on bad input.

Method: a fixed record is compared with tests/fixtures/stored_message.hex; fields are also
read back at their documented byte positions, independently of the decoder. Decoding is
tested on the whole buffer, on every truncation (byte-by-byte growth) and with trailing
bytes, and Hypothesis checks round trips and that arbitrary bytes never escape as
struct.error / IndexError / UnicodeDecodeError.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.errors import LocalProtocolError, RemoteProtocolError
from orbitmq.model.message import MessageExt, SysFlag
from orbitmq.protocol.message_codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    PHYSICALOFFSET_POSITION,
    QUEUEOFFSET_POSITION,
    STORED_FIXED_BYTES_IPV4,
    STORETIMESTAMP_POSITION,
    decode_stored_message,
    decode_stored_messages,
    encode_stored_message,
    pack_blank_into,
    stored_message_size,
)


def _golden_message() -> MessageExt:
    return MessageExt(
        topic="TopicTest",
        body=b"Hello OrbitMQ",
        properties={"TAGS": "TagA", "KEYS": "order-1", "UNIQ_KEY": "7F000001000000000000000000000001"},
        queue_id=3,
        queue_offset=42,
        commit_log_offset=4096,
        born_timestamp=1700000000000,
        born_host=("127.0.0.1", 51234),
        store_timestamp=1700000000123,
        store_host=("192.168.0.10", 10911),
    )


def test_message_codec_constants_match_rocketmq() -> None:
    assert struct.unpack(">i", bytes.fromhex("daa320a7"))[0] == MESSAGE_MAGIC_CODE
    assert struct.unpack(">i", bytes.fromhex("cbd43194"))[0] == BLANK_MAGIC_CODE
    assert (
        STORED_FIXED_BYTES_IPV4,
        QUEUEOFFSET_POSITION,
        PHYSICALOFFSET_POSITION,
        STORETIMESTAMP_POSITION,
    ) == (
        88,
        20,
        28,
        56,
    )


def test_message_codec_encodes_golden_record(golden_hex: Callable[[str], bytes]) -> None:
    data = encode_stored_message(_golden_message())
    assert data == golden_hex("stored_message.hex")


def test_message_codec_fields_sit_at_documented_positions() -> None:
    message = _golden_message()
    data = encode_stored_message(message)
    assert struct.unpack_from(">i", data, 0)[0] == len(data) == stored_message_size(13, 9, 64)
    assert struct.unpack_from(">i", data, 8)[0] == zlib.crc32(b"Hello OrbitMQ") & 0x7FFFFFFF
    assert struct.unpack_from(">q", data, QUEUEOFFSET_POSITION)[0] == 42
    assert struct.unpack_from(">q", data, PHYSICALOFFSET_POSITION)[0] == 4096
    assert struct.unpack_from(">q", data, STORETIMESTAMP_POSITION)[0] == 1700000000123
    assert data[64:72] == bytes([192, 168, 0, 10]) + (10911).to_bytes(4, "big")
    assert data[88:101] == b"Hello OrbitMQ"


def test_message_codec_round_trips_golden_record() -> None:
    message = _golden_message()
    decoded, end = decode_stored_message(encode_stored_message(message))
    assert end == decoded.store_size == 177
    assert (decoded.topic, decoded.body, decoded.properties) == (
        message.topic,
        message.body,
        message.properties,
    )
    assert (decoded.queue_id, decoded.queue_offset, decoded.commit_log_offset) == (3, 42, 4096)
    assert decoded.born_host == ("127.0.0.1", 51234)
    assert decoded.store_host == ("192.168.0.10", 10911)
    assert decoded.offset_msg_id == "C0A8000A00002A9F0000000000001000"


def test_message_codec_decodes_with_trailing_bytes_left_unconsumed() -> None:
    data = encode_stored_message(_golden_message())
    decoded, end = decode_stored_message(data + b"\x00\x01\x02")
    assert end == len(data)
    assert decoded.body == b"Hello OrbitMQ"


def test_message_codec_rejects_every_truncation() -> None:
    data = encode_stored_message(_golden_message())
    for length in range(len(data)):
        with pytest.raises(RemoteProtocolError):
            decode_stored_message(data[:length])


def test_message_codec_decodes_many_and_skips_body_on_request() -> None:
    first = _golden_message()
    second = _golden_message()
    second.body = b"second"
    second.queue_offset = 43
    data = encode_stored_message(first) + encode_stored_message(second)
    messages = decode_stored_messages(data)
    assert [m.queue_offset for m in messages] == [42, 43]
    assert [m.body for m in decode_stored_messages(data, decode_body=False)] == [b"", b""]


def test_message_codec_decompresses_only_when_asked() -> None:
    message = _golden_message()
    message.body = zlib.compress(b"a" * 5000)
    message.sys_flag = SysFlag.COMPRESSED
    data = encode_stored_message(message)
    assert decode_stored_message(data)[0].body == message.body
    assert decode_stored_message(data, decompress=True)[0].body == b"a" * 5000


def test_message_codec_handles_ipv6_hosts() -> None:
    message = _golden_message()
    message.born_host = ("::1", 7)
    message.store_host = ("fe80::2", 10911)
    data = encode_stored_message(message)
    assert len(data) == 177 + 24
    decoded, _ = decode_stored_message(data)
    assert decoded.sys_flag & (SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6) == 0x30
    assert (decoded.born_host, decoded.store_host) == (("::1", 7), ("fe80::2", 10911))
    assert decoded.body == message.body


def test_message_codec_refuses_what_the_format_cannot_carry() -> None:
    message = _golden_message()
    message.topic = "t" * 128
    with pytest.raises(LocalProtocolError):
        encode_stored_message(message)
    message = _golden_message()
    message.store_host = ("broker.example", 1)
    with pytest.raises(LocalProtocolError):
        encode_stored_message(message)


def test_message_codec_rejects_bad_magic_and_bad_utf8() -> None:
    data = bytearray(encode_stored_message(_golden_message()))
    bad_magic = bytearray(data)
    struct.pack_into(">i", bad_magic, 4, BLANK_MAGIC_CODE)
    with pytest.raises(RemoteProtocolError):
        decode_stored_message(bad_magic)
    bad_topic = bytearray(data)
    bad_topic[102] = 0xFF  # first byte of the topic
    with pytest.raises(RemoteProtocolError):
        decode_stored_message(bad_topic)


def test_message_codec_packs_blank_header() -> None:
    buffer = bytearray(16)
    pack_blank_into(buffer, 4, 12)
    assert struct.unpack_from(">ii", buffer, 4) == (12, BLANK_MAGIC_CODE)


_text = st.text(alphabet=st.characters(exclude_characters="\x01\x02", exclude_categories=["Cs"]), max_size=20)


@settings(max_examples=60, deadline=None)
@given(
    topic=st.text(alphabet="abcXYZ_%-0123", min_size=1, max_size=40),
    body=st.binary(max_size=300),
    properties=st.dictionaries(_text.filter(bool), _text, max_size=4),
    queue_offset=st.integers(0, 2**62),
    commit_log_offset=st.integers(0, 2**62),
    sys_flag=st.sampled_from([0, 1, 2, 4, 8, 12]),
)
def test_message_codec_round_trip_property(
    topic: str,
    body: bytes,
    properties: dict[str, str],
    queue_offset: int,
    commit_log_offset: int,
    sys_flag: int,
) -> None:
    message = MessageExt(
        topic=topic,
        body=body,
        properties=properties,
        queue_offset=queue_offset,
        commit_log_offset=commit_log_offset,
        sys_flag=sys_flag,
    )
    decoded, end = decode_stored_message(encode_stored_message(message))
    assert (decoded.topic, decoded.body, decoded.properties, decoded.sys_flag) == (
        topic,
        body,
        properties,
        sys_flag,
    )
    assert (decoded.queue_offset, decoded.commit_log_offset) == (queue_offset, commit_log_offset)
    assert end == decoded.store_size


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300), flip=st.integers(0, 176))
def test_message_codec_only_raises_remote_protocol_error(data: bytes, flip: int) -> None:
    for candidate in (data, _flipped(encode_stored_message(_golden_message()), flip)):
        try:
            decode_stored_messages(candidate)
        except RemoteProtocolError:
            pass


def _flipped(data: bytes, position: int) -> bytes:
    mutable = bytearray(data)
    mutable[position] ^= 0xFF
    return bytes(mutable)
