"""Checks of gRPC requests, each failure a ``Code`` and a remark naming the bad value (pure).

The rules and codes are the Java proxy's (GrpcValidator and the send path's checks), with the
limits from :class:`~orbitmq.proxy.config.ProxyConfig`:

| what | refused with |
| --- | --- |
| topic: blank, longer than 127, outside ``[%|a-zA-Z0-9_-]``, or a system topic | ILLEGAL_TOPIC |
| group: blank, longer than 120, outside the charset, or a system group | ILLEGAL_CONSUMER_GROUP |
| tag: blank, contains ``|`` or a control character | ILLEGAL_MESSAGE_TAG |
| key: blank or contains a control character | ILLEGAL_MESSAGE_KEY |
| message group: blank, longer than ``maxMessageGroupSize`` bytes, control characters | ILLEGAL_MESSAGE_GROUP |
| user property named like a system one, or all of them over ``maxUserPropertySize`` | ILLEGAL_MESSAGE_PROPERTY_KEY / MESSAGE_PROPERTIES_TOO_LARGE |
| message id blank or with a control character | ILLEGAL_MESSAGE_ID |
| body empty / over ``maxMessageSize`` | MESSAGE_BODY_EMPTY / MESSAGE_BODY_TOO_LARGE |
| due time more than ``maxDelayTimeMills`` ahead | ILLEGAL_DELIVERY_TIME |
| type and properties disagree (FIFO without group, DELAY without due time, ...) | MESSAGE_PROPERTY_CONFLICT_WITH_TYPE |
| receipt handle: not eight fields, a number out of its field's range, a broker name outside ``[a-zA-Z0-9_.:-]`` | INVALID_RECEIPT_HANDLE |
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orbitmq.errors import RemoteProtocolError
from orbitmq.protocol.pop import ExtraInfo
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.convert import SYSTEM_PROPERTY_KEYS

__all__ = ["Invalid", "check_group", "check_message", "check_topic", "parse_receipt_handle"]

_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_CHARS = 127
GROUP_MAX_CHARS = 120
_SYSTEM_TOPIC_NAMES = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)
_SYSTEM_GROUPS = frozenset({"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONSAPI_OWNER"})
# The remoting properties this proxy writes itself: a user property may not take their names.
_RESERVED_USER_KEYS = SYSTEM_PROPERTY_KEYS | {
    "__SHARDINGKEY",
    "TRACE_CONTEXT",
    "CHECK_IMMUNITY_TIME_IN_SECONDS",
}


@dataclass(frozen=True, slots=True)
class Invalid:
    """A refused request: the status code and the remark the client sees."""

    code: pb.Code
    message: str


def _has_control(text: str) -> bool:
    return any(ord(char) < 0x20 or ord(char) == 0x7F for char in text)


_NAMESPACE = re.compile(r"^[a-zA-Z0-9_-]+$")


def _namespace_problem(resource: pb.Resource, max_chars: int) -> str | None:
    """Why a resource's namespace cannot prefix its name on the broker (``<namespace>%<name>``)."""
    namespace = resource.resource_namespace
    if not namespace:
        return None
    if not _NAMESPACE.match(namespace):
        return f"namespace {namespace[:48]!r} has characters outside [a-zA-Z0-9_-]"
    if len(namespace) + 1 + len(resource.name) > max_chars:
        return f"namespace and name {namespace[:40]}%{resource.name[:40]}... are longer than {max_chars}"
    return None


def check_topic(resource: str | pb.Resource) -> Invalid | None:
    """A topic name, or a topic resource (its namespace too)."""
    if isinstance(resource, pb.Resource):
        problem = _namespace_problem(resource, TOPIC_MAX_CHARS)
        if problem is not None:
            return Invalid(pb.ILLEGAL_TOPIC, problem)
        topic = resource.name
    else:
        topic = resource
    if not topic.strip():
        return Invalid(pb.ILLEGAL_TOPIC, "topic name is blank")
    if len(topic) > TOPIC_MAX_CHARS:
        return Invalid(pb.ILLEGAL_TOPIC, f"topic name {topic[:40]}... is longer than {TOPIC_MAX_CHARS}")
    if not _NAME.match(topic):
        return Invalid(pb.ILLEGAL_TOPIC, f"topic name {topic!r} has characters outside [%|a-zA-Z0-9_-]")
    if topic in _SYSTEM_TOPIC_NAMES or topic.startswith("rmq_sys_"):
        return Invalid(pb.ILLEGAL_TOPIC, f"topic {topic} is a system topic")
    return None


def check_group(resource: str | pb.Resource) -> Invalid | None:
    """A consumer group name, or a group resource (its namespace too)."""
    if isinstance(resource, pb.Resource):
        problem = _namespace_problem(resource, GROUP_MAX_CHARS)
        if problem is not None:
            return Invalid(pb.ILLEGAL_CONSUMER_GROUP, problem)
        group = resource.name
    else:
        group = resource
    if not group.strip():
        return Invalid(pb.ILLEGAL_CONSUMER_GROUP, "consumer group name is blank")
    if len(group) > GROUP_MAX_CHARS:
        return Invalid(
            pb.ILLEGAL_CONSUMER_GROUP, f"consumer group {group[:40]}... is longer than {GROUP_MAX_CHARS}"
        )
    if not _NAME.match(group):
        return Invalid(
            pb.ILLEGAL_CONSUMER_GROUP, f"consumer group {group!r} has characters outside [%|a-zA-Z0-9_-]"
        )
    if group in _SYSTEM_GROUPS:
        return Invalid(pb.ILLEGAL_CONSUMER_GROUP, f"consumer group {group} is a system group")
    return None


def check_message(message: pb.Message, config: ProxyConfig, now_ms: int) -> Invalid | None:
    """Every check of one message to send (the topic's name included)."""
    system = message.system_properties
    return (
        check_topic(message.topic)
        or _check_identity(system)
        or _check_body(message, config)
        or _check_properties(message, config)
        or _check_type(system, config, now_ms)
    )


def _check_identity(system: pb.SystemProperties) -> Invalid | None:
    if not system.message_id.strip():
        return Invalid(pb.ILLEGAL_MESSAGE_ID, "message id is blank")
    if _has_control(system.message_id):
        return Invalid(
            pb.ILLEGAL_MESSAGE_ID, f"message id {system.message_id[:48]!r} contains a control character"
        )
    if system.HasField("tag") and (not system.tag.strip() or "|" in system.tag or _has_control(system.tag)):
        return Invalid(
            pb.ILLEGAL_MESSAGE_TAG, f"tag {system.tag!r} is blank or has '|' or control characters"
        )
    for key in system.keys:
        if not key.strip() or _has_control(key):
            return Invalid(pb.ILLEGAL_MESSAGE_KEY, f"key {key!r} is blank or has control characters")
    return None


def _check_body(message: pb.Message, config: ProxyConfig) -> Invalid | None:
    if not message.body:
        return Invalid(
            pb.MESSAGE_BODY_EMPTY, f"message {message.system_properties.message_id} has an empty body"
        )
    if len(message.body) > config.max_message_size_bytes:
        return Invalid(
            pb.MESSAGE_BODY_TOO_LARGE,
            f"message body of {len(message.body)} bytes exceeds maxMessageSize {config.max_message_size_bytes}",
        )
    return None


def _check_properties(message: pb.Message, config: ProxyConfig) -> Invalid | None:
    total = 0
    for key, value in message.user_properties.items():
        if key in _RESERVED_USER_KEYS:
            return Invalid(
                pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"user property {key!r} is a reserved property name"
            )
        if not key or _has_control(key):
            return Invalid(
                pb.ILLEGAL_MESSAGE_PROPERTY_KEY,
                f"user property key {key!r} is blank or has control characters",
            )
        total += len(key.encode()) + len(value.encode())
    if total > config.max_user_property_size_bytes:
        return Invalid(
            pb.MESSAGE_PROPERTIES_TOO_LARGE,
            f"user properties of {total} bytes exceed maxUserPropertySize {config.max_user_property_size_bytes}",
        )
    return None


def _check_type(system: pb.SystemProperties, config: ProxyConfig, now_ms: int) -> Invalid | None:
    kind = system.message_type
    has_group = system.HasField("message_group")
    has_due = system.HasField("delivery_timestamp")
    if has_group:
        group = system.message_group
        if not group.strip() or _has_control(group):
            return Invalid(
                pb.ILLEGAL_MESSAGE_GROUP, f"message group {group!r} is blank or has control characters"
            )
        if len(group.encode()) > config.max_message_group_size_bytes:
            return Invalid(
                pb.ILLEGAL_MESSAGE_GROUP,
                f"message group {group[:20]!r} is longer than {config.max_message_group_size_bytes} bytes",
            )
    if has_due:
        due_ms = system.delivery_timestamp.seconds * 1000 + system.delivery_timestamp.nanos // 1_000_000
        if due_ms - now_ms > config.max_delay_time_ms:
            return Invalid(
                pb.ILLEGAL_DELIVERY_TIME,
                f"delivery time {due_ms} ms is more than maxDelayTimeMills {config.max_delay_time_ms} ahead",
            )
    conflict = (
        (kind == pb.FIFO and not has_group)
        or (kind == pb.DELAY and not has_due)
        or (kind == pb.TRANSACTION and (has_group or has_due))
        or (kind == pb.NORMAL and (has_group or has_due))
    )
    if conflict:
        return Invalid(
            pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"message type {pb.MessageType.Name(kind)} does not fit its message group / delivery time",
        )
    if kind in (pb.LITE, pb.PRIORITY):
        return Invalid(pb.UNSUPPORTED, f"message type {pb.MessageType.Name(kind)} is not supported")
    return None


_BROKER_NAME = re.compile(r"^[a-zA-Z0-9_.:-]{1,127}$")
_INT32_MAX = 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_receipt_handle(text: str) -> ExtraInfo:
    """A client's receipt handle, every field within what the broker's headers can carry.

    Raises:
        RemoteProtocolError: a malformed handle (INVALID_RECEIPT_HANDLE); the remark names the field.
    """
    handle = ExtraInfo.decode(text)
    if not _BROKER_NAME.match(handle.broker_name) or handle.broker_name.strip(".") == "":
        raise RemoteProtocolError(
            f"receipt handle names broker {handle.broker_name[:48]!r}, not a broker name"
        )
    for name, value, low, high in (
        ("queue id", handle.queue_id, 0, _INT32_MAX),
        ("queue offset", handle.queue_offset, 0, _INT64_MAX),
        ("revive queue id", handle.revive_qid, 0, _INT32_MAX),
        ("checkpoint offset", handle.ck_queue_offset, _INT64_MIN, _INT64_MAX),
        ("pop time", handle.pop_time_ms, _INT64_MIN, _INT64_MAX),
        ("invisible time", handle.invisible_time_ms, _INT64_MIN, _INT64_MAX),
        ("commit-log offset", handle.commit_log_offset, 0, _INT64_MAX),
    ):
        if value is not None and not low <= value <= high:
            raise RemoteProtocolError(f"receipt handle {name} {str(value)[:48]} is out of range")
    return handle
