"""Validation: names, system topics, sizes and queue ids map to RocketMQ's codes with named remarks."""

from __future__ import annotations

import pytest

from orbitmq.broker.validation import (
    check_admin_topic,
    check_group_name,
    check_message_size,
    check_queue_id,
    check_send_topic,
    check_topic_name,
)
from orbitmq.protocol.codes import ResponseCode


@pytest.mark.parametrize("topic", ["TopicA", "%RETRY%CG", "a|b", "x-y_z", "A" * 127])
def test_validation_accepts_legal_topic_names(topic: str) -> None:
    assert check_topic_name(topic) is None


@pytest.mark.parametrize("topic", ["", "   ", "bad topic", "bad/topic", "é", "A" * 128])
def test_validation_rejects_illegal_topic_names_with_system_error(topic: str) -> None:
    rejection = check_topic_name(topic)
    assert rejection is not None
    assert rejection.code is ResponseCode.SYSTEM_ERROR
    assert "topic" in rejection.remark


def test_validation_remark_names_the_illegal_topic() -> None:
    rejection = check_topic_name("bad topic")
    assert rejection is not None and "bad topic" in rejection.remark


@pytest.mark.parametrize(
    "topic", ["SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC"]
)
def test_validation_refuses_sends_to_system_topics(topic: str) -> None:
    rejection = check_send_topic(topic)
    assert rejection is not None
    assert rejection.code is ResponseCode.NO_PERMISSION
    assert topic in rejection.remark


@pytest.mark.parametrize("topic", ["TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_anything"])
def test_validation_refuses_reserved_names_on_create(topic: str) -> None:
    rejection = check_admin_topic(topic)
    assert rejection is not None
    assert rejection.code is ResponseCode.SYSTEM_ERROR
    assert topic in rejection.remark


def test_validation_group_name_rules() -> None:
    assert check_group_name("CG_1") is None
    rejection = check_group_name("bad group")
    assert rejection is not None and "bad group" in rejection.remark


def test_validation_body_over_max_is_message_illegal() -> None:
    assert check_message_size("T", 100, 10, 100) is None
    rejection = check_message_size("T", 101, 10, 100)
    assert rejection is not None
    assert rejection.code is ResponseCode.MESSAGE_ILLEGAL
    assert "101" in rejection.remark and "T" in rejection.remark


def test_validation_properties_over_32767_bytes_is_message_illegal() -> None:
    assert check_message_size("T", 1, 32767, 100) is None
    rejection = check_message_size("T", 1, 32768, 100)
    assert rejection is not None and rejection.code is ResponseCode.MESSAGE_ILLEGAL


def test_validation_queue_id_out_of_range_is_system_error() -> None:
    assert check_queue_id("T", 3, 4) is None
    assert check_queue_id("T", -1, 4) is None
    rejection = check_queue_id("T", 4, 4)
    assert rejection is not None
    assert rejection.code is ResponseCode.SYSTEM_ERROR
    assert "queueId[4] is illegal" in rejection.remark
