"""Sans-IO parts of a send: validation, UNIQ_KEY and compression, batch splitting, the V2
request header, and response parsing into SendResult / faults."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.client._send import (
    SendStatus,
    batch_send_results,
    build_send_request,
    parse_send_response,
    prepare_batches,
    prepare_message,
    validate_message,
)
from orbitmq.errors import MessageValidationError, NoPermissionError, TopicNotExistError
from orbitmq.model.message import Message, MessageQueue, SysFlag
from orbitmq.protocol.batch import decode_batch, encode_batch
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import SendMessageRequestHeader
from orbitmq.protocol.message_id import UniqKeyGenerator
from orbitmq.protocol.properties import decode_properties

MAX_BYTES = 4 * 1024 * 1024
QUEUE = MessageQueue("T", "broker-a", 2)


@pytest.mark.parametrize("topic", ["", "  ", "a b", "x" * 128, "SCHEDULE_TOPIC_XXXX", "t/1"])
def test_validate_message_rejects_bad_topic(topic: str) -> None:
    with pytest.raises(MessageValidationError):
        validate_message(Message(topic, b"x"), MAX_BYTES)


def test_validate_message_rejects_empty_body() -> None:
    with pytest.raises(MessageValidationError, match="empty body"):
        validate_message(Message("T", b""), MAX_BYTES)


def test_validate_message_rejects_oversized_body() -> None:
    validate_message(Message("T", b"x" * 100), 100)
    with pytest.raises(MessageValidationError, match="101 bytes to topic T"):
        validate_message(Message("T", b"x" * 101), 100)


def test_prepare_message_sets_uniq_key_and_wait() -> None:
    message = Message("T", b"hello", properties={"TAGS": "a"})
    prepared = prepare_message(message, UniqKeyGenerator("10.0.0.1"), compress_over_bytes=4096)
    properties = decode_properties(prepared.properties)
    assert properties["UNIQ_KEY"] == prepared.uniq_key == message.uniq_key
    assert len(prepared.uniq_key) == 32
    assert properties["WAIT"] == "true" and properties["TAGS"] == "a"
    assert prepared.body == b"hello" and prepared.sys_flag == 0


def test_prepare_message_keeps_existing_uniq_key() -> None:
    message = Message("T", b"x", properties={"UNIQ_KEY": "MYKEY"})
    assert prepare_message(message, UniqKeyGenerator(), compress_over_bytes=4096).uniq_key == "MYKEY"


def test_prepare_message_compresses_large_body() -> None:
    body = b"abc" * 2000
    message = Message("T", body)
    prepared = prepare_message(message, UniqKeyGenerator(), compress_over_bytes=4096)
    assert prepared.sys_flag & SysFlag.COMPRESSED
    assert zlib.decompress(prepared.body) == body
    assert message.body == body


def test_prepare_message_leaves_body_at_threshold_uncompressed() -> None:
    prepared = prepare_message(Message("T", b"a" * 4096), UniqKeyGenerator(), compress_over_bytes=4096)
    assert prepared.sys_flag == 0 and prepared.body == b"a" * 4096


def test_prepare_batches_encodes_all_messages_with_keys() -> None:
    messages = [Message("T", f"m{i}".encode(), flag=i, properties={"KEYS": f"k{i}"}) for i in range(5)]
    batches = prepare_batches(messages, UniqKeyGenerator(), MAX_BYTES)
    assert len(batches) == 1
    items = decode_batch(batches[0].body)
    assert [item.body for item in items] == [f"m{i}".encode() for i in range(5)]
    assert [item.flag for item in items] == list(range(5))
    assert [item.properties["UNIQ_KEY"] for item in items] == batches[0].uniq_keys
    assert len(set(batches[0].uniq_keys)) == 5


def test_prepare_batches_splits_to_stay_under_request_limit() -> None:
    messages = [Message("T", b"x" * 1000) for _ in range(10)]
    batches = prepare_batches(messages, UniqKeyGenerator(), 3500)
    assert [len(batch.uniq_keys) for batch in batches] == [3, 3, 3, 1]
    assert all(len(batch.body) <= 3500 for batch in batches)
    assert sum(len(decode_batch(batch.body)) for batch in batches) == 10


_PROPERTY_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), max_size=12
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.binary(min_size=1, max_size=300),
            st.integers(-(2**31), 2**31 - 1),
            st.dictionaries(_PROPERTY_TEXT, _PROPERTY_TEXT, max_size=3),
            st.booleans(),
        ),
        min_size=1,
        max_size=30,
    ),
    st.integers(400, 4000),
)
def test_prepare_batches_equals_the_reference_encoding(
    drawn: list[tuple[bytes, int, dict[str, str], bool]], max_request_bytes: int
) -> None:
    """Every body is encode_batch of its messages (stamped properties), split where the limit says."""
    messages = []
    for index, (body, flag, properties, keyed) in enumerate(drawn):
        if keyed:
            properties = {**properties, "UNIQ_KEY": f"preset-{index}"}
        properties.pop("DELAY", None)
        messages.append(Message("T", body, flag=flag, properties=properties))
    sizes = [len(body) + 22 for body, *_ in drawn]
    if max(sizes) + 200 > max_request_bytes:  # a message alone over the limit is refused elsewhere
        max_request_bytes = max(sizes) + 200
    before = [dict(message.properties) for message in messages]
    batches = prepare_batches(messages, UniqKeyGenerator(), max_request_bytes)
    keys = [key for batch in batches for key in batch.uniq_keys]
    assert keys == [message.properties["UNIQ_KEY"] for message in messages]
    assert len(set(keys)) == len(keys)
    for message, properties, key in zip(messages, before, keys, strict=True):
        assert message.properties == {**properties, "UNIQ_KEY": properties.get("UNIQ_KEY") or key}
    position = 0
    for number, batch in enumerate(batches):
        members = messages[position : position + len(batch.uniq_keys)]
        position += len(members)
        assert batch.body == encode_batch([(m.flag, m.body, m.properties) for m in members])
        assert len(batch.body) <= max_request_bytes
        if number + 1 < len(batches):  # split only where the next message would not fit
            following = messages[position]
            following_bytes = encode_batch([(following.flag, following.body, following.properties)])
            assert len(batch.body) + len(following_bytes) > max_request_bytes
    assert position == len(messages)


def test_prepare_batches_refuses_a_message_it_cannot_encode() -> None:
    with pytest.raises(
        MessageValidationError, match="batch message 1 to topic T: property .* contains a separator"
    ):
        prepare_batches(
            [Message("T", b"x"), Message("T", b"y", properties={"a\x01": "v"})], UniqKeyGenerator(), MAX_BYTES
        )
    with pytest.raises(MessageValidationError, match="batch message 0 to topic T: batch message flag"):
        prepare_batches([Message("T", b"x", flag=1 << 40)], UniqKeyGenerator(), MAX_BYTES)
    with pytest.raises(MessageValidationError, match="batch message 2 to topic T has a body of 101 bytes"):
        prepare_batches(
            [Message("T", b"x"), Message("T", b"y"), Message("T", b"z" * 101)], UniqKeyGenerator(), 100
        )


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([], "at least one"),
        ([Message("T", b"a"), Message("U", b"b")], "one topic"),
        ([Message("T", b"")], "empty body"),
        ([Message("T", b"a", properties={"DELAY": "3"})], "delay level"),
        ([Message("%RETRY%g", b"a")], "retry topic"),
    ],
)
def test_prepare_batches_rejects_invalid_batch(messages: list[Message], match: str) -> None:
    with pytest.raises(MessageValidationError, match=match):
        prepare_batches(messages, UniqKeyGenerator(), MAX_BYTES)


def test_build_send_request_uses_v2_header() -> None:
    request = build_send_request("pg", QUEUE, body=b"b", flag=3, sys_flag=1, properties="TAGS\x01a")
    assert request.code == RequestCode.SEND_MESSAGE_V2
    header = SendMessageRequestHeader.from_v2_ext(request.ext_fields)
    assert (header.producer_group, header.topic, header.queue_id) == ("pg", "T", 2)
    assert (header.flag, header.sys_flag, header.batch) == (3, 1, False)
    assert header.default_topic == "TBW102" and header.default_topic_queue_nums == 4
    assert header.born_timestamp > 0 and request.ext_fields["b"] == "T"


def test_build_send_request_batch_uses_code_320() -> None:
    request = build_send_request("pg", QUEUE, body=b"b", batch=True)
    assert request.code == RequestCode.SEND_BATCH_MESSAGE
    header = SendMessageRequestHeader.from_v2_ext(request.ext_fields)
    assert header.batch and decode_properties(header.properties or "") == {"WAIT": "true"}


def _response(code: int, **ext: str) -> RemotingCommand:
    return RemotingCommand(code=code, ext_fields=dict(ext), remark="why")


def test_parse_send_response_maps_status_and_fields() -> None:
    response = _response(ResponseCode.FLUSH_DISK_TIMEOUT, msgId="AB", queueId="2", queueOffset="41")
    result = parse_send_response(response, QUEUE, "UK")
    assert result.status is SendStatus.FLUSH_DISK_TIMEOUT
    assert (result.msg_id, result.offset_msg_id, result.queue_offset) == ("UK", "AB", 41)
    assert result.message_queue == QUEUE


@pytest.mark.parametrize(
    ("code", "error"),
    [(ResponseCode.TOPIC_NOT_EXIST, TopicNotExistError), (ResponseCode.NO_PERMISSION, NoPermissionError)],
)
def test_parse_send_response_raises_error_class_for_code(code: int, error: type[Exception]) -> None:
    with pytest.raises(error, match="broker-a queue T:2"):
        parse_send_response(_response(code), QUEUE, "UK")


def test_batch_send_results_give_one_result_per_message() -> None:
    response = _response(ResponseCode.SUCCESS, msgId="A1,A2,A3", queueId="2", queueOffset="10")
    results = batch_send_results(parse_send_response(response, QUEUE, "k1,k2,k3"), ["k1", "k2", "k3"])
    assert [(r.msg_id, r.offset_msg_id, r.queue_offset) for r in results] == [
        ("k1", "A1", 10),
        ("k2", "A2", 11),
        ("k3", "A3", 12),
    ]
