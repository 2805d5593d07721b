"""Request checks that refuse bad names, sizes and queue ids before anything is stored.

Each check returns ``None`` when the input is acceptable, else a :class:`Rejection` carrying the
response code RocketMQ answers with and a remark naming what was wrong:

| check | code |
| --- | --- |
| topic name blank, too long (>127) or outside ``[%|a-zA-Z0-9_-]`` | SYSTEM_ERROR |
| send to a topic only the broker writes (SCHEDULE_TOPIC_XXXX, RMQ_SYS_TRANS_*, rmq_sys_*, ...) | NO_PERMISSION |
| create/delete of a reserved topic (TBW102, system topics) | SYSTEM_ERROR |
| group name blank, too long (>120) or outside the charset | SYSTEM_ERROR |
| body larger than maxMessageSize | MESSAGE_ILLEGAL |
| client's property string larger than 32767 bytes | MESSAGE_ILLEGAL |
| queue id out of the topic's range | SYSTEM_ERROR |
"""

from __future__ import annotations

from dataclasses import dataclass

from orbitmq.errors import BrokerResponseError, error_for_code
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.names import group_name_problem, topic_name_problem
from orbitmq.protocol.properties import MAX_PROPERTIES_BYTES

AUTO_CREATE_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
STAGE_HALF_TOPIC = "RMQ_SYS_STAGE_HALF_TOPIC"  # staged writes (broker.staging), OrbitMQ's own
STAGE_LEDGER_TOPIC = "RMQ_SYS_STAGE_LEDGER_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC,
        SCHEDULE_TOPIC,
        BENCHMARK_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        TRACE_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
        STAGE_HALF_TOPIC,
        STAGE_LEDGER_TOPIC,
    }
)
"""Topics a RocketMQ broker owns; clients may not create or delete them."""

NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
        STAGE_HALF_TOPIC,
        STAGE_LEDGER_TOPIC,
    }
)
"""Topics only the broker itself writes to (RocketMQ's NOT_ALLOWED_SEND_TOPIC_SET, plus OrbitMQ's own).

Every ``rmq_sys_*`` topic is refused too (:func:`is_broker_written_topic`): the timer wheel's
``rmq_sys_wheel_timer`` and the POP journal ``rmq_sys_POP_JOURNAL`` hold records whose
properties or body the broker acts on later (``REAL_TOPIC``/``REAL_QID``, journal events),
so a client that could write them could steer messages and state anywhere. RocketMQ leaves
the prefix to its system-topic set only; its clients never send there. The other system
topics stay sendable as in RocketMQ: TBW102, BenchmarkTest and RMQ_SYS_TRACE_TOPIC (trace
producers write it).
"""


def is_broker_written_topic(topic: str) -> bool:
    """True for topics a client may never send to (see :data:`NOT_ALLOWED_SEND_TOPICS`)."""
    return topic in NOT_ALLOWED_SEND_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a request is refused: the response code and a remark naming the offending value."""

    code: ResponseCode
    remark: str

    def response(self, request: RemotingCommand) -> RemotingCommand:
        return request.response(self.code, self.remark)

    def error(self) -> BrokerResponseError:
        return error_for_code(int(self.code), self.remark)


def retry_topic(group: str) -> str:
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}"


def dlq_topic(group: str) -> str:
    return f"{DLQ_GROUP_TOPIC_PREFIX}{group}"


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def check_topic_name(topic: str) -> Rejection | None:
    """RocketMQ's TopicValidator.validateTopic (the rule lives in ``protocol.names``)."""
    problem = topic_name_problem(topic)
    return None if problem is None else Rejection(ResponseCode.SYSTEM_ERROR, problem)


def check_send_topic(topic: str) -> Rejection | None:
    """Name check plus the refusal of topics only the broker writes."""
    rejection = check_topic_name(topic)
    if rejection is not None:
        return rejection
    if is_broker_written_topic(topic):
        return Rejection(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
    return None


def check_admin_topic(topic: str) -> Rejection | None:
    """Name check plus the refusal of reserved names for UPDATE_AND_CREATE_TOPIC / DELETE_TOPIC."""
    rejection = check_topic_name(topic)
    if rejection is not None:
        return rejection
    if topic == AUTO_CREATE_TOPIC:
        return Rejection(
            ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC."
        )
    if is_system_topic(topic):
        return Rejection(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
    return None


def check_group_name(group: str) -> Rejection | None:
    """The group rule of ``protocol.names`` (charset, at most 120 characters)."""
    problem = group_name_problem(group)
    return None if problem is None else Rejection(ResponseCode.SYSTEM_ERROR, problem)


def check_message_size(
    topic: str, body_len: int, properties_len: int, max_message_size_bytes: int
) -> Rejection | None:
    """Body and property-string limits (RocketMQ answers MESSAGE_ILLEGAL for both)."""
    if body_len > max_message_size_bytes:
        return Rejection(
            ResponseCode.MESSAGE_ILLEGAL,
            f"the message body size {body_len} bytes to topic[{topic}] exceeds the limit "
            f"maxMessageSize {max_message_size_bytes}",
        )
    if properties_len > MAX_PROPERTIES_BYTES:
        return Rejection(
            ResponseCode.MESSAGE_ILLEGAL,
            f"the message properties size {properties_len} bytes to topic[{topic}] exceeds the limit "
            f"{MAX_PROPERTIES_BYTES}",
        )
    return None


def stamps_that_fit(stamps: dict[str, str], properties_bytes: int) -> dict[str, str]:
    """The broker's stamps (CLUSTER, MSG_REGION, TRACE_ON, in that order) a record has room for.

    The 32767-byte limit is the client's: a property string of exactly that size is accepted
    (:func:`check_message_size`). The stored record has its own limit, the same figure (its
    length field is a signed short, as Java clients decode it), so stamps that would take
    the stored string past it are left off, the last first: they are informational (trace
    hooks read them), the client's properties are not. ``properties_bytes`` is the client's
    string's length; the stamps' cost counted is an upper bound (each adds its key, its value
    and two separators).
    """
    kept = dict(stamps)
    while kept and properties_bytes + _encoded_bytes(kept) > MAX_PROPERTIES_BYTES:
        kept.popitem()
    return kept


def _encoded_bytes(properties: dict[str, str]) -> int:
    return sum(len(key.encode()) + len(value.encode()) + 2 for key, value in properties.items())


def check_queue_id(topic: str, queue_id: int, queue_count: int, who: str = "") -> Rejection | None:
    """A queue id must be below the topic's queue count (a negative id means "broker picks")."""
    if queue_id >= queue_count:
        suffix = f" client[{who}]" if who else ""
        return Rejection(
            ResponseCode.SYSTEM_ERROR,
            f"queueId[{queue_id}] is illegal, topic[{topic}] has {queue_count} queues{suffix}",
        )
    return None
