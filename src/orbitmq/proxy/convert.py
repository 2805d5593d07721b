"""One message world: gRPC messages <-> the remoting protocol's stored messages (pure).

A message sent through the proxy is stored as any remoting producer's message is, so 4.x
consumers read it; a stored message, whoever sent it, is delivered to 5.x SDKs. The mapping
(grpc-v5-protocol §4.2, as the Java proxy does it):

| gRPC ``SystemProperties`` | stored as |
| --- | --- |
| message_id | property ``UNIQ_KEY`` |
| tag | ``TAGS`` |
| keys | ``KEYS``, space separated |
| message_group | ``__SHARDINGKEY`` |
| delivery_timestamp | ``TIMER_DELIVER_MS`` (epoch ms) |
| message_type TRANSACTION | ``TRAN_MSG=true`` and the prepared sys flag |
| (producer group) | ``PGROUP`` = the topic |
| born_host / born_timestamp | ``__BORNHOST`` / ``BORN_TIMESTAMP`` (and the record's born timestamp) |
| trace_context | ``TRACE_CONTEXT`` |
| orphaned_transaction_recovery_duration | ``CHECK_IMMUNITY_TIME_IN_SECONDS`` |
| user_properties | the other properties, unchanged |

On delivery the type is read back in this order: the commit sys flag of a committed
transactional message or ``TRAN_MSG``, a delay or timer property,
``__SHARDINGKEY``, else NORMAL; ``delivery_attempt`` is the record's reconsume times + 1;
bodies are served decompressed (IDENTITY) with an MD5 digest in upper-case hex, the one digest
every SDK checks the same way. User properties are every property RocketMQ does not reserve
(:data:`SYSTEM_PROPERTY_KEYS`).

Namespaces: a resource ``{namespace, name}`` is the broker-side name ``namespace%name``
(RocketMQ's NamespaceUtil); an empty namespace is the plain name.
"""

from __future__ import annotations

import hashlib
import time

from orbitmq.model.message import MessageConst, MessageExt, SysFlag
from orbitmq.proxy._pb import definition_pb2 as pb

__all__ = [
    "SYSTEM_PROPERTY_KEYS",
    "SendSpec",
    "resource_name",
    "stored_to_grpc",
    "to_resource",
]

SYSTEM_PROPERTY_KEYS = frozenset(
    {
        "TRACE_ON",
        "MSG_REGION",
        "KEYS",
        "TAGS",
        "WAIT",
        "DELAY",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "BUYER_ID",
        "ORIGIN_MESSAGE_ID",
        "ORIGIN_GROUP",
        "TRANSFER_FLAG",
        "CORRECTION_FLAG",
        "MQ2_FLAG",
        "RECONSUME_TIME",
        "UNIQ_KEY",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "POP_CK",
        "POP_CK_OFFSET",
        "1ST_POP_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "DUP_INFO",
        "EXTEND_UNIQ_INFO",
        "INSTANCE_ID",
        "CORRELATION_ID",
        "REPLY_TO_CLIENT",
        "TTL",
        "ARRIVE_TIME",
        "PUSH_REPLY_TIME",
        "CLUSTER",
        "MSG_TYPE",
        "INNER_MULTI_QUEUE_OFFSET",
        "TIMER_DELAY_MS",
        "TIMER_DELAY_SEC",
        "TIMER_DELIVER_MS",
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "TIMER_OUT_MS",
        "TIMER_DEL_UNIQKEY",
        "TIMER_DELAY_LEVEL",
        "__BORNHOST",
        "BORN_TIMESTAMP",
        "DLQ_ORIGIN_TOPIC",
        "DLQ_ORIGIN_MESSAGE_ID",
        "__CRC32#",
    }
)
"""RocketMQ's reserved property names (MessageConst.STRING_HASH_SET): never user properties."""

# Properties that have a field of their own in SystemProperties: not repeated as user properties.
_SYSTEM_FIELD_KEYS = SYSTEM_PROPERTY_KEYS | {
    MessageConst.SHARDING_KEY,
    MessageConst.TRACE_CONTEXT,
    MessageConst.TRANSACTION_CHECK_TIMES,
    MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS,
}


def resource_name(resource: pb.Resource) -> str:
    """The broker-side name of a topic or group resource."""
    if resource.resource_namespace:
        return f"{resource.resource_namespace}%{resource.name}"
    return resource.name


def to_resource(name: str) -> pb.Resource:
    """The inverse of :func:`resource_name` (``%RETRY%``/``%DLQ%`` prefixes are not namespaces)."""
    if name.startswith("%"):
        return pb.Resource(name=name)
    namespace, separator, plain = name.partition("%")
    if separator and namespace and plain:
        return pb.Resource(resource_namespace=namespace, name=plain)
    return pb.Resource(name=name)


class SendSpec:
    """A gRPC message as the remoting send path wants it: properties, sys flag, born time."""

    __slots__ = ("body", "born_timestamp_ms", "properties", "sys_flag", "topic")

    def __init__(self, message: pb.Message, body: bytes) -> None:
        system = message.system_properties
        self.topic = resource_name(message.topic)
        self.body = body
        properties = dict(message.user_properties)
        properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = system.message_id
        if system.HasField("tag"):
            properties[MessageConst.TAGS] = system.tag
        if system.keys:
            properties[MessageConst.KEYS] = " ".join(system.keys)
        if system.HasField("message_group"):
            properties[MessageConst.SHARDING_KEY] = system.message_group
        if system.HasField("delivery_timestamp"):
            properties[MessageConst.TIMER_DELIVER_MS] = str(_millis(system.delivery_timestamp))
        if system.HasField("trace_context"):
            properties[MessageConst.TRACE_CONTEXT] = system.trace_context
        born_ms = _millis(system.born_timestamp) if system.HasField("born_timestamp") else _now_ms()
        self.born_timestamp_ms = born_ms
        properties[MessageConst.BORN_TIMESTAMP] = str(born_ms)
        if system.born_host:
            properties[MessageConst.BORN_HOST] = system.born_host
        properties[MessageConst.PRODUCER_GROUP] = self.topic
        self.sys_flag = 0
        if system.message_type == pb.TRANSACTION:
            properties[MessageConst.TRANSACTION_PREPARED] = "true"
            self.sys_flag = SysFlag.TRANSACTION_PREPARED_TYPE
            if system.HasField("orphaned_transaction_recovery_duration"):
                seconds = system.orphaned_transaction_recovery_duration.seconds
                properties[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(max(seconds, 0))
        self.properties = properties


def stored_to_grpc(message: MessageExt, receipt_handle: str | None = None) -> pb.Message:
    """A stored message (body already decompressed) as a gRPC ``Message`` for delivery."""
    properties = message.properties
    system = pb.SystemProperties(
        message_id=message.uniq_key or message.offset_msg_id,
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(message.body).hexdigest().upper()),
        body_encoding=pb.IDENTITY,
        message_type=_delivered_type(message),
        born_host=properties.get(MessageConst.BORN_HOST) or message.born_host[0],
        store_host=f"{message.store_host[0]}:{message.store_host[1]}",
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        delivery_attempt=message.reconsume_times + 1,
    )
    system.born_timestamp.FromMilliseconds(message.born_timestamp)
    system.store_timestamp.FromMilliseconds(message.store_timestamp)
    tag = properties.get(MessageConst.TAGS)
    if tag is not None:
        system.tag = tag
    keys = properties.get(MessageConst.KEYS)
    if keys:
        system.keys.extend(key for key in keys.split(" ") if key)
    group = properties.get(MessageConst.SHARDING_KEY)
    if group is not None:
        system.message_group = group
    deliver_ms = properties.get(MessageConst.TIMER_DELIVER_MS)
    if deliver_ms is not None and deliver_ms.isdigit():
        system.delivery_timestamp.FromMilliseconds(int(deliver_ms))
    trace_context = properties.get(MessageConst.TRACE_CONTEXT)
    if trace_context is not None:
        system.trace_context = trace_context
    if receipt_handle is not None:
        system.receipt_handle = receipt_handle
    origin_topic = properties.get("DLQ_ORIGIN_TOPIC")
    origin_id = properties.get("DLQ_ORIGIN_MESSAGE_ID")
    if origin_topic is not None and origin_id is not None:
        system.dead_letter_queue.CopyFrom(pb.DeadLetterQueue(topic=origin_topic, message_id=origin_id))
    user_properties = {key: value for key, value in properties.items() if key not in _SYSTEM_FIELD_KEYS}
    return pb.Message(
        topic=to_resource(message.topic),
        user_properties=user_properties,
        system_properties=system,
        body=message.body,
    )


def _delivered_type(message: MessageExt) -> pb.MessageType:
    """A committed transactional message is delivered as TRANSACTION, as Apache's proxy does (its
    broker keeps ``TRAN_MSG`` on the committed copy; OrbitMQ's drops it and keeps the commit flag)."""
    if message.sys_flag & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_COMMIT_TYPE:
        return pb.TRANSACTION
    return message_type_of(message.properties)


def message_type_of(properties: dict[str, str]) -> pb.MessageType:
    """The gRPC MessageType a stored message's properties imply (see the module docstring)."""
    if properties.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return pb.TRANSACTION
    if (
        MessageConst.DELAY_TIME_LEVEL in properties
        or MessageConst.TIMER_DELIVER_MS in properties
        or MessageConst.TIMER_DELAY_SEC in properties
    ):
        return pb.DELAY
    if MessageConst.SHARDING_KEY in properties:
        return pb.FIFO
    return pb.NORMAL


def _millis(timestamp: object) -> int:
    seconds = getattr(timestamp, "seconds", 0)
    nanos = getattr(timestamp, "nanos", 0)
    return int(seconds) * 1000 + int(nanos) // 1_000_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
