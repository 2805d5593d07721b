"""A topic's message type (its ``message.type`` attribute) against the messages sent to it (pure).

As Apache's proxy (``enableTopicMessageTypeCheck``, on by default):

- QueryRoute answers each queue with the types its topic accepts: NORMAL, FIFO, DELAY or
  TRANSACTION alone for a topic of that type, all four for MIXED, MESSAGE_TYPE_UNSPECIFIED for
  a topic whose type the proxy could not learn. A topic without the attribute is NORMAL. The
  publishing settings say ``validate_message_type``, so the SDKs refuse a mismatch themselves.
- SendMessage refuses a message whose type, read from its properties as the broker stores them
  (``TRAN_MSG=true`` TRANSACTION; a delay level or timer property DELAY; a sharding key FIFO;
  else NORMAL), is not its topic's (unless MIXED) with MESSAGE_PROPERTY_CONFLICT_WITH_TYPE and
  RocketMQ's remark ``TopicMessageType validate failed, the expected type is FIFO, but actual
  type is NORMAL``. Retry and dead-letter topics are not checked.

OrbitMQ's own addition: a topic that does not exist yet but which the first send creates
through TBW102 (``autoCreateTopicEnable``) is NORMAL, since that is what the send creates.
"""

from __future__ import annotations

from orbitmq.model.message import MessageConst
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy.validation import Invalid

__all__ = ["accepted_message_types", "check_topic_message_type", "message_type_name"]

_ACCEPTED: dict[str, tuple[pb.MessageType, ...]] = {
    "NORMAL": (pb.NORMAL,),
    "FIFO": (pb.FIFO,),
    "DELAY": (pb.DELAY,),
    "TRANSACTION": (pb.TRANSACTION,),
    "MIXED": (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION),
}

_DELAY_KEYS = (
    MessageConst.DELAY_TIME_LEVEL,
    MessageConst.TIMER_DELIVER_MS,
    MessageConst.TIMER_DELAY_SEC,
    MessageConst.TIMER_DELAY_MS,
)


def accepted_message_types(topic_type: str) -> tuple[pb.MessageType, ...]:
    """What a queue of a ``topic_type`` topic accepts, as QueryRoute answers it."""
    return _ACCEPTED.get(topic_type, (pb.MESSAGE_TYPE_UNSPECIFIED,))


def message_type_name(properties: dict[str, str]) -> str:
    """A message's type from its remoting properties (TopicMessageType.parseFromMessageProperty)."""
    if properties.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return "TRANSACTION"
    if any(properties.get(key) is not None for key in _DELAY_KEYS):
        return "DELAY"
    if properties.get(MessageConst.SHARDING_KEY) is not None:
        return "FIFO"
    return "NORMAL"


def check_topic_message_type(topic_type: str, properties: dict[str, str]) -> Invalid | None:
    """None when a topic of ``topic_type`` takes a message with ``properties``."""
    actual = message_type_name(properties)
    if actual == topic_type or topic_type == "MIXED":
        return None
    return Invalid(
        pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        f"TopicMessageType validate failed, the expected type is {topic_type}, but actual type is {actual}",
    )
