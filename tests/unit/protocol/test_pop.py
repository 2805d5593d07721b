"""POP headers and the receipt handle (POP_CK): RocketMQ's field names and layout."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageExt
from orbitmq.protocol.message_codec import decode_stored_message, encode_stored_message, with_reconsume_times
from orbitmq.protocol.pop import (
    AckMessageRequestHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    decode_offset_info,
    encode_offset_info,
    pop_retry_topic,
    popped_topic,
    real_topic,
)


def test_pop_headers_use_rocketmq_wire_names() -> None:
    header = PopMessageRequestHeader("CG", "T", -1, 32, 60_000, 20_000, 123, 1, "TAG", "a||b", True, "att")
    assert header.to_ext() == {
        "consumerGroup": "CG", "topic": "T", "queueId": "-1", "maxMsgNums": "32", "invisibleTime": "60000",
        "pollTime": "20000", "bornTime": "123", "initMode": "1", "expType": "TAG", "exp": "a||b",
        "order": "true", "attemptId": "att",
    }  # fmt: skip
    ack = AckMessageRequestHeader.from_ext(
        {"consumerGroup": "CG", "topic": "T", "queueId": "2", "extraInfo": "x", "offset": "9"}
    )
    assert (ack.queue_id, ack.offset, ack.extra_info) == (2, 9, "x")


def test_pop_extra_info_has_rocketmq_layout_and_an_optional_ninth_field() -> None:
    handle = ExtraInfo(5, 1700000000000, 60000, 0, "0", "broker-a", 3, 7)
    assert handle.encode() == "5 1700000000000 60000 0 0 broker-a 3 7"
    with_offset = ExtraInfo(5, 1700000000000, 60000, 0, "0", "broker-a", 3, 7, 4096)
    assert ExtraInfo.decode(with_offset.encode()) == with_offset
    assert ExtraInfo.decode(handle.encode()).commit_log_offset is None


@pytest.mark.parametrize("text", ["", "1 2 3", "a b c d e broker 1 2", "1 2 3 4 0  5 6", "1 2 3 4 0 b x 6"])
def test_pop_extra_info_refuses_malformed_handles(text: str) -> None:
    with pytest.raises(RemoteProtocolError):
        ExtraInfo.decode(text)


@given(st.text(max_size=80))
def test_pop_extra_info_arbitrary_text_decodes_or_raises_remote_protocol_error(text: str) -> None:
    try:
        ExtraInfo.decode(text)
    except RemoteProtocolError:
        pass


def test_pop_offset_info_round_trips_per_queue() -> None:
    info = {0: [3, 4], 2: [9]}
    assert encode_offset_info(info) == "0 0 3,4;0 2 9"
    assert decode_offset_info(encode_offset_info(info)) == info
    assert decode_offset_info(None) == {}
    with pytest.raises(RemoteProtocolError):
        decode_offset_info("0 1")


@pytest.mark.parametrize("born_host", ["10.0.0.1", "::1"])
def test_with_reconsume_times_patches_only_that_field(born_host: str) -> None:
    message = MessageExt(
        topic="T", body=b"body", properties={"a": "b"}, born_host=(born_host, 5), queue_offset=4
    )
    record = encode_stored_message(message)
    patched, _ = decode_stored_message(with_reconsume_times(record, 6))
    original, _ = decode_stored_message(record)
    assert patched.reconsume_times == 6 and original.reconsume_times == 0
    patched.reconsume_times = 0
    assert patched == original


def test_pop_retry_topic_names_follow_rocketmq_and_map_both_ways() -> None:
    # KeyBuilder.buildPopRetryTopic (v1, RocketMQ 5's default) and ExtraInfoUtil.getRealTopic.
    assert pop_retry_topic("CG", "T") == "%RETRY%CG_T"
    assert real_topic("T", "CG", "0") == "T"
    assert real_topic("T", "CG", "1") == "%RETRY%CG_T"
    assert real_topic("T", "CG", "2") == "%RETRY%CG+T"
    assert real_topic("%RETRY%CG_T", "CG", "1") == "%RETRY%CG_T"  # already the retry topic
    assert popped_topic("%RETRY%CG_T", "CG") == "T"
    assert popped_topic("%RETRY%CG+T", "CG") == "T"
    assert popped_topic("%RETRY%CG_A_T", "CG_A") == "T"  # the group is known: no ambiguity
    assert popped_topic("T", "CG") == "T"
    # Offsets info entries of the retry topic (retry flag "1") are kept apart from the topic's.
    info = ";".join([encode_offset_info({0: [5, 6]}), encode_offset_info({0: [0]}, "1")])
    assert info == "0 0 5,6;1 0 0"
    assert decode_offset_info(info) == {0: [5, 6]}
    assert decode_offset_info(info, "1") == {0: [0]}
