"""The proxy's pure parts: message mapping both ways, request checks, the settings answer."""

from __future__ import annotations

import hashlib

from orbitmq.model.message import MessageExt, SysFlag
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.convert import SendSpec, resource_name, stored_to_grpc, to_resource
from orbitmq.proxy.settings import RETRY_DELAYS_MS, GroupPolicy, answer_settings
from orbitmq.proxy.validation import check_group, check_message, check_topic

NOW_MS = 1_800_000_000_000


def _message(**system: object) -> pb.Message:
    message = pb.Message(topic=pb.Resource(name="Orders"), body=b"payload", user_properties={"k": "v"})
    message.system_properties.message_id = "01ABC"
    message.system_properties.message_type = pb.NORMAL
    for name, value in system.items():
        setattr(message.system_properties, name, value)
    return message


def test_convert_send_maps_system_properties_onto_remoting_properties() -> None:
    message = _message(
        tag="TagA", message_type=pb.FIFO, message_group="g1", born_host="10.1.1.1", trace_context="tc"
    )
    message.system_properties.keys.extend(["k1", "k2"])
    message.system_properties.born_timestamp.FromMilliseconds(NOW_MS)
    spec = SendSpec(message, b"payload")
    assert spec.topic == "Orders" and spec.sys_flag == 0 and spec.born_timestamp_ms == NOW_MS
    assert spec.properties == {
        "k": "v", "UNIQ_KEY": "01ABC", "TAGS": "TagA", "KEYS": "k1 k2", "__SHARDINGKEY": "g1",
        "TRACE_CONTEXT": "tc", "BORN_TIMESTAMP": str(NOW_MS), "__BORNHOST": "10.1.1.1", "PGROUP": "Orders",
    }  # fmt: skip


def test_convert_send_marks_transactions_and_timed_messages() -> None:
    tx = _message(message_type=pb.TRANSACTION)
    tx.system_properties.orphaned_transaction_recovery_duration.FromSeconds(30)
    spec = SendSpec(tx, b"x")
    assert spec.sys_flag == SysFlag.TRANSACTION_PREPARED_TYPE
    assert spec.properties["TRAN_MSG"] == "true" and spec.properties["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "30"
    timed = _message(message_type=pb.DELAY)
    timed.system_properties.delivery_timestamp.FromMilliseconds(NOW_MS + 5000)
    assert SendSpec(timed, b"x").properties["TIMER_DELIVER_MS"] == str(NOW_MS + 5000)


def test_convert_delivery_of_a_4x_message() -> None:
    stored = MessageExt(
        topic="Orders",
        body=b"hello",
        properties={"TAGS": "TagA", "KEYS": "a b", "UNIQ_KEY": "ID1", "seq": "3", "WAIT": "true", "CLUSTER": "c"},
        queue_id=2, queue_offset=9, born_timestamp=NOW_MS, born_host=("10.0.0.9", 4000),
        store_timestamp=NOW_MS + 1, store_host=("10.0.0.1", 10911), reconsume_times=1,
    )  # fmt: skip
    message = stored_to_grpc(stored, "handle")
    system = message.system_properties
    assert dict(message.user_properties) == {"seq": "3"}
    assert (system.tag, list(system.keys), system.message_id) == ("TagA", ["a", "b"], "ID1")
    assert system.message_type == pb.NORMAL and system.delivery_attempt == 2
    assert system.body_digest.type == pb.MD5
    assert system.body_digest.checksum == hashlib.md5(b"hello").hexdigest().upper()
    assert (system.queue_id, system.queue_offset, system.receipt_handle) == (2, 9, "handle")
    assert system.born_host == "10.0.0.9" and system.store_host == "10.0.0.1:10911"
    assert system.born_timestamp.ToMilliseconds() == NOW_MS


def test_convert_round_trip_keeps_every_field_a_5x_producer_set() -> None:
    sent = _message(tag="T1", message_type=pb.FIFO, message_group="g", born_host="1.2.3.4")
    sent.system_properties.keys.append("key")
    spec = SendSpec(sent, bytes(sent.body))
    stored = MessageExt(
        topic=spec.topic, body=spec.body, properties=spec.properties, born_host=("9.9.9.9", 1)
    )
    back = stored_to_grpc(stored).system_properties
    assert (back.tag, list(back.keys), back.message_group, back.message_type) == ("T1", ["key"], "g", pb.FIFO)
    assert back.message_id == "01ABC" and back.born_host == "1.2.3.4"
    assert dict(stored_to_grpc(stored).user_properties) == {"k": "v"}


def test_convert_namespaces_wrap_as_rocketmq_does() -> None:
    assert resource_name(pb.Resource(resource_namespace="ns", name="T")) == "ns%T"
    assert to_resource("ns%T") == pb.Resource(resource_namespace="ns", name="T")
    assert to_resource("%DLQ%CG") == pb.Resource(name="%DLQ%CG")


def test_validation_refuses_with_the_java_proxy_codes() -> None:
    config = ProxyConfig(max_message_size_bytes=10)
    assert check_topic("TBW102").code == pb.ILLEGAL_TOPIC  # type: ignore[union-attr]
    assert check_topic("bad topic").code == pb.ILLEGAL_TOPIC  # type: ignore[union-attr]
    assert check_group("x" * 121).code == pb.ILLEGAL_CONSUMER_GROUP  # type: ignore[union-attr]
    cases = {
        pb.ILLEGAL_MESSAGE_TAG: _message(tag="a|b"),
        pb.MESSAGE_BODY_TOO_LARGE: pb.Message(topic=pb.Resource(name="T"), body=b"x" * 11),
        pb.ILLEGAL_MESSAGE_GROUP: _message(message_type=pb.FIFO, message_group="g" * 65),
        pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE: _message(message_type=pb.FIFO),
    }
    cases[pb.MESSAGE_BODY_TOO_LARGE].system_properties.message_id = "id"
    for code, message in cases.items():
        invalid = check_message(message, config, NOW_MS)
        assert invalid is not None and invalid.code == code, (code, invalid)
    reserved = _message()
    reserved.user_properties["UNIQ_KEY"] = "x"
    assert check_message(reserved, config, NOW_MS).code == pb.ILLEGAL_MESSAGE_PROPERTY_KEY  # type: ignore[union-attr]
    late = _message(message_type=pb.DELAY)
    late.system_properties.delivery_timestamp.FromMilliseconds(NOW_MS + config.max_delay_time_ms + 1000)
    assert check_message(late, config, NOW_MS).code == pb.ILLEGAL_DELIVERY_TIME  # type: ignore[union-attr]
    assert check_message(_message(), ProxyConfig(), NOW_MS) is None


def test_settings_answer_fills_what_each_client_type_needs() -> None:
    config = ProxyConfig(max_message_size_bytes=1024)
    producer = answer_settings(pb.Settings(client_type=pb.PRODUCER), config, None)
    assert producer.publishing.max_body_size == 1024 and producer.publishing.validate_message_type
    assert producer.backoff_policy.WhichOneof("strategy") == "exponential_backoff"
    assert producer.backoff_policy.max_attempts == 3 and not producer.metric.on
    push = answer_settings(
        pb.Settings(client_type=pb.PUSH_CONSUMER), config, GroupPolicy(fifo=True, max_attempts=4)
    )
    assert push.subscription.fifo and push.subscription.receive_batch_size == 32
    assert push.subscription.long_polling_timeout.ToMilliseconds() == config.max_long_polling_ms
    assert push.backoff_policy.max_attempts == 4
    delays = [d.ToMilliseconds() for d in push.backoff_policy.customized_backoff.next]
    assert delays == list(RETRY_DELAYS_MS)
