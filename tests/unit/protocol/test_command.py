"""RemotingCommand encoding and decode_command.

Method: golden bytes for a SEND_MESSAGE request as the C++ client shapes it; a real
C++ header decoded verbatim; Hypothesis round-trips through FrameDecoder for both header
serializations; arbitrary bytes and arbitrary JSON headers may only raise
RemoteProtocolError.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.errors import LocalProtocolError, RemoteProtocolError
from orbitmq.protocol.codes import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.frame import FrameDecoder
from orbitmq.protocol.headers import PullMessageResponseHeader, SendMessageRequestHeader

_settings = settings(max_examples=60, deadline=None)

CPP_ROUTE_HEADER = (
    b'{"code":105,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"x","topic":"TopicA"},'
    b'"flag":0,"language":"CPP","opaque":0,"remark":"","version":63}\n'
)


def _json_frame(header: bytes, body: bytes = b"") -> bytes:
    """A frame (without its length prefix) around a JSON header."""
    return struct.pack(">i", len(header)) + header + body


def build_send_message_request() -> RemotingCommand:
    """SEND_MESSAGE as the C++ client 1.2.3 fills it (ext names sorted, as jsoncpp writes them)."""
    header = SendMessageRequestHeader(
        producer_group="PG1",
        topic="TopicA",
        queue_id=0,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        sys_flag=0,
        born_timestamp=1795000000000,
        flag=0,
        properties="TAGS\x01tagA\x02UNIQ_KEY\x010100007F000035E300004D1CE46D0100\x02WAIT\x01true\x02",
        reconsume_times=0,
        unit_mode=False,
        batch=False,
    )
    ext = header.to_ext() | {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "", "unitMode": "0"}
    ext["batch"] = "0"
    command = RemotingCommand(
        code=RequestCode.SEND_MESSAGE,
        opaque=7,
        remark="",
        ext_fields=dict(sorted(ext.items())),
        body=b"hello orbitmq",
        language="CPP",
        version=63,
    )
    return command


def test_command_send_message_request_matches_golden(golden_hex: Callable[[str], bytes]) -> None:
    assert build_send_message_request().encode() == golden_hex("send_message_request.hex")


def test_command_golden_send_message_request_decodes_back(golden_hex: Callable[[str], bytes]) -> None:
    frames = FrameDecoder().feed(golden_hex("send_message_request.hex"))
    assert len(frames) == 1
    command = decode_command(frames[0])
    assert command == build_send_message_request()
    header = SendMessageRequestHeader.from_ext(command.ext_fields)
    assert (header.topic, header.queue_id, header.batch) == ("TopicA", 0, False)


def test_command_decodes_cpp_route_request_header() -> None:
    command = decode_command(_json_frame(CPP_ROUTE_HEADER))
    assert command.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert command.language == "CPP"
    assert command.version == 63
    assert command.opaque == 0
    assert command.remark == ""
    assert command.ext_fields == {
        "AccessKey": "",
        "OnsChannel": "ALIYUN",
        "Signature": "x",
        "topic": "TopicA",
    }
    assert command.serialize_type == SerializeType.JSON
    assert command.body == b""
    assert not command.is_response and not command.is_oneway


def test_command_trailing_frame_bytes_become_the_body() -> None:
    command = decode_command(_json_frame(CPP_ROUTE_HEADER, b"\x00trailing\xff"))
    assert command.body == b"\x00trailing\xff"
    assert command.ext_fields["topic"] == "TopicA"


def test_command_cpp_header_fed_byte_by_byte_through_frame_decoder() -> None:
    stream = struct.pack(">i", 4 + len(CPP_ROUTE_HEADER)) + _json_frame(CPP_ROUTE_HEADER)
    decoder = FrameDecoder()
    frames: list[bytes] = []
    for index in range(len(stream)):
        frames += decoder.feed(stream[index : index + 1])
    assert [decode_command(frame).code for frame in frames] == [105]


def test_command_normalises_numeric_boolean_and_null_ext_values() -> None:
    header = b'{"code":10,"extFields":{"queueId":3,"unitMode":true,"x":null,"f":2.0},"opaque":1}'
    command = decode_command(_json_frame(header))
    assert command.ext_fields == {"queueId": "3", "unitMode": "true", "x": "", "f": "2"}


def test_command_json_header_writes_every_ext_value_as_string() -> None:
    command = RemotingCommand(code=0, ext_fields={"queueOffset": "12", "queueId": "1"})
    frame = command.encode()
    header_len = struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF
    parsed = orjson.loads(frame[8 : 8 + header_len])
    assert parsed["extFields"] == {"queueOffset": "12", "queueId": "1"}
    assert parsed["language"] == "PYTHON"


def test_command_response_keeps_opaque_and_serialization() -> None:
    request = RemotingCommand(code=11, opaque=99, serialize_type=SerializeType.ROCKETMQ)
    response = request.response(0, ext_fields={"minOffset": "0"})
    assert (response.opaque, response.flag, response.serialize_type) == (
        99,
        FLAG_RESPONSE,
        SerializeType.ROCKETMQ,
    )
    assert response.is_response
    assert response.ext_fields == {"minOffset": "0"}


def test_command_request_sets_oneway_flag() -> None:
    request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": "T"}, oneway=True)
    assert request.flag == FLAG_ONEWAY
    assert request.is_oneway


def test_command_encode_header_then_body_equals_encode() -> None:
    command = RemotingCommand(code=11, opaque=3, body=b"x" * 100, ext_fields={"a": "b"})
    assert command.encode_header() + command.body == command.encode()
    assert command.encode_header(body_len=100) == command.encode_header()


def test_command_binary_header_rejects_out_of_range_code() -> None:
    command = RemotingCommand(code=1 << 20, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(LocalProtocolError):
        command.encode()


@pytest.mark.parametrize(
    ("frame", "fragment"),
    [
        (b"\x00\x00", "no header word"),
        (b"\x00\x00\x00\x10{}", "exceeds"),
        (b"\x02\x00\x00\x00", "serialization type"),
        (_json_frame(b"[1]"), "not an object"),
        (_json_frame(b'{"opaque":1}'), "code"),
        (_json_frame(b"{nope"), "not valid JSON"),
        (_json_frame(b'{"code":"x"}'), "code"),
        (_json_frame(b'{"code":1,"extFields":[1]}'), "extFields"),
        (_json_frame(b'{"code":1,"extFields":{"a":[1]}}'), "'a'"),
        (b"\x01\x00\x00\x03abc", "shorter than 21"),
    ],
)
def test_command_malformed_frames_raise_remote_protocol_error(frame: bytes, fragment: str) -> None:
    with pytest.raises(RemoteProtocolError, match=fragment):
        decode_command(frame)


_text = st.text(max_size=20)
_languages = st.sampled_from([member.name for member in LanguageCode])
_int32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
_int16 = st.integers(min_value=-(2**15), max_value=2**15 - 1)


@st.composite
def commands(draw: st.DrawFn, serialize_type: SerializeType) -> RemotingCommand:
    binary = serialize_type == SerializeType.ROCKETMQ
    small = _int16 if binary else _int32
    return RemotingCommand(
        code=draw(small),
        opaque=draw(_int32),
        flag=draw(_int32),
        # The binary layout cannot tell an empty remark from none.
        remark=draw(st.none() | st.text(min_size=1 if binary else 0, max_size=30)),
        ext_fields=draw(st.dictionaries(_text, _text, max_size=6)),
        body=draw(st.binary(max_size=64)),
        language=draw(_languages),
        version=draw(small),
        serialize_type=serialize_type,
    )


@_settings
@given(command=st.sampled_from(list(SerializeType)).flatmap(commands))
def test_command_roundtrips_through_frame_decoder(command: RemotingCommand) -> None:
    frames = FrameDecoder().feed(command.encode())
    assert len(frames) == 1
    assert decode_command(frames[0]) == command


@_settings
@given(data=st.binary(max_size=120))
def test_command_arbitrary_bytes_raise_only_remote_protocol_error(data: bytes) -> None:
    try:
        for frame in FrameDecoder(max_frame_bytes=4096).feed(data):
            command = decode_command(frame)
            assert command.serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ)
    except RemoteProtocolError:
        pass


@_settings
@given(serialize_code=st.integers(0, 2), header=st.binary(max_size=80), body=st.binary(max_size=8))
def test_command_arbitrary_header_bytes_raise_only_remote_protocol_error(
    serialize_code: int, header: bytes, body: bytes
) -> None:
    frame = struct.pack(">i", (serialize_code << 24) | len(header)) + header + body
    try:
        command = decode_command(frame)
    except RemoteProtocolError:
        return
    assert command.body == body


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | _text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_text, children, max_size=3),
    max_leaves=8,
)
_header_keys = st.sampled_from(["code", "opaque", "flag", "version", "language", "remark", "extFields"])


@_settings
@given(header=st.dictionaries(_header_keys, _json_values, max_size=7))
def test_command_arbitrary_json_header_raises_only_remote_protocol_error(header: dict[str, object]) -> None:
    try:
        command = decode_command(_json_frame(orjson.dumps(header)))
    except RemoteProtocolError:
        return
    assert all(isinstance(value, str) for value in command.ext_fields.values())


# -- PULL_MESSAGE response golden ----------------------------------------------------------------


def stored_record_bytes() -> bytes:
    """One stored message laid out by hand per remoting-protocol §3.1 (IPv4 hosts)."""
    body = b"hello orbitmq"
    topic = b"TopicA"
    properties = b"TAGS\x01tagA\x02UNIQ_KEY\x017F0000010D2E00000000000000000000\x02CLUSTER\x01DefaultCluster"
    total_size = 88 + len(body) + 1 + len(topic) + 2 + len(properties)
    return (
        struct.pack(">iiiii", total_size, -626843481, zlib.crc32(body) & 0x7FFFFFFF, 3, 0)
        + struct.pack(">qqi", 41, 4096, 0)  # queue offset, commit-log offset, sysFlag
        + struct.pack(">q", 1795000000000)
        + bytes([127, 0, 0, 1])
        + struct.pack(">i", 50000)  # born host
        + struct.pack(">q", 1795000000007)
        + bytes([127, 0, 0, 1])
        + struct.pack(">i", 10911)  # store host
        + struct.pack(">iq", 0, 0)  # reconsume times, prepared transaction offset
        + struct.pack(">i", len(body))
        + body
        + struct.pack(">b", len(topic))
        + topic
        + struct.pack(">h", len(properties))
        + properties
    )


def build_pull_message_response() -> RemotingCommand:
    """A SUCCESS answer to a PULL_MESSAGE with opaque 42, carrying one record."""
    request = RemotingCommand(code=RequestCode.PULL_MESSAGE, opaque=42)
    header = PullMessageResponseHeader(
        next_begin_offset=42, min_offset=0, max_offset=42, suggest_which_broker_id=0
    )
    return request.response(ResponseCode.SUCCESS, ext_fields=header.to_ext(), body=stored_record_bytes())


def test_command_pull_message_response_matches_golden(golden_hex: Callable[[str], bytes]) -> None:
    assert build_pull_message_response().encode() == golden_hex("pull_message_response.hex")


def test_command_golden_pull_message_response_decodes_back(golden_hex: Callable[[str], bytes]) -> None:
    data = golden_hex("pull_message_response.hex")
    decoder = FrameDecoder()
    frames = decoder.feed(data + data[:10])
    assert decoder.buffered_bytes == 10
    command = decode_command(frames[0])
    assert command.is_response and command.opaque == 42
    header = PullMessageResponseHeader.from_ext(command.ext_fields)
    assert (header.next_begin_offset, header.max_offset) == (42, 42)
    assert struct.unpack_from(">i", command.body)[0] == len(command.body)
    assert command.body.endswith(b"CLUSTER\x01DefaultCluster")


def test_command_pull_record_agrees_with_message_codec() -> None:
    """The hand-assembled record and the stored-message codec describe the same bytes."""
    codec = pytest.importorskip("orbitmq.protocol.message_codec")
    (message,) = codec.decode_stored_messages(stored_record_bytes())
    assert (message.topic, message.queue_id, message.queue_offset) == ("TopicA", 3, 41)
    assert (message.commit_log_offset, message.store_host) == (4096, ("127.0.0.1", 10911))
    assert message.properties["UNIQ_KEY"] == "7F0000010D2E00000000000000000000"
    assert codec.encode_stored_message(message) == stored_record_bytes()
