"""The proxy's message type check (Apache's DefaultTopicMessageTypeValidator and route types)."""

from __future__ import annotations

from orbitmq.model.message import MessageConst
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy.topic_types import accepted_message_types, check_topic_message_type, message_type_name


def test_proxy_topic_types_read_a_message_type_from_its_properties() -> None:
    assert message_type_name({}) == "NORMAL"
    assert message_type_name({MessageConst.SHARDING_KEY: "g"}) == "FIFO"
    for key in ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"):
        assert message_type_name({key: "1", MessageConst.SHARDING_KEY: "g"}) == "DELAY"
    assert message_type_name({MessageConst.TRANSACTION_PREPARED: "true", "DELAY": "1"}) == "TRANSACTION"


def test_proxy_topic_types_refuse_a_message_of_another_type_as_apache() -> None:
    assert check_topic_message_type("FIFO", {MessageConst.SHARDING_KEY: "g"}) is None
    assert check_topic_message_type("MIXED", {MessageConst.SHARDING_KEY: "g"}) is None
    refused = check_topic_message_type("FIFO", {})
    assert refused is not None and refused.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert refused.message == (
        "TopicMessageType validate failed, the expected type is FIFO, but actual type is NORMAL"
    )
    # A topic without a type is NORMAL: a FIFO message is refused, as by Apache's proxy.
    assert check_topic_message_type("NORMAL", {MessageConst.SHARDING_KEY: "g"}) is not None
    assert check_topic_message_type("UNSPECIFIED", {}) is not None


def test_proxy_topic_types_route_names_what_a_topic_accepts() -> None:
    assert accepted_message_types("FIFO") == (pb.FIFO,)
    assert accepted_message_types("NORMAL") == (pb.NORMAL,)
    assert set(accepted_message_types("MIXED")) == {pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION}
    assert accepted_message_types("UNSPECIFIED") == (pb.MESSAGE_TYPE_UNSPECIFIED,)
