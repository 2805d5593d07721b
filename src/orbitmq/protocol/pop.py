"""POP consumption on the wire: its headers and the receipt handle (``POP_CK``), sans-IO.

RocketMQ 5's remoting clients consume with three requests, all answered by ``broker.pop``:

| code | request | what it does |
| --- | --- | --- |
| 200050 | POP_MESSAGE | take up to ``maxMsgNums`` visible messages of a group, invisible for ``invisibleTime`` ms |
| 200051 | ACK_MESSAGE | finish one delivery (named by its receipt handle, ``extraInfo``) |
| 200053 | CHANGE_MESSAGE_INVISIBLETIME | make one delivery visible again ``invisibleTime`` ms from now |

A POP_MESSAGE answer carries the records (as a pull does) and, in its header, what the
client needs to build each message's receipt handle: ``popTime``, ``invisibleTime``,
``reviveQid``, and per queue the start offset (``startOffsetInfo``) and the message offsets
(``msgOffsetInfo``). The client joins them into the ``POP_CK`` property, eight fields
separated by spaces (RocketMQ's ExtraInfoUtil)::

    index  field             OrbitMQ's use
    0      ckQueueOffset     the queue's first popped offset (informational)
    1      popTime           identity of this delivery: unique per message, kept by renewals
    2      invisibleTime     ms from popTime to the deadline when the handle was made
    3      reviveQid         0 (OrbitMQ keeps no revive queues)
    4      retry flag        "0": the message was popped from the topic; "1": from the group's
                             pop retry topic ``%RETRY%<group>_<topic>`` ("2": RocketMQ's v2
                             naming ``%RETRY%<group>+<topic>``, understood, never written)
    5      brokerName        where to send the ack (the proxy routes by it)
    6      queueId
    7      queueOffset

A message whose invisible time ran out unacknowledged is *revived*: stored again in the
group's pop retry topic (:func:`pop_retry_topic`) and popped from there. The broker answers such
a message under the topic the pop asked for, with its queue id and offset in the retry topic and
its ``POP_CK`` property already set (retry flag "1"), as RocketMQ's broker does; its offsets
info entries carry retry flag "1". An ack or change names the retry topic itself, or the topic
with that handle: :func:`real_topic` maps one to the other (RocketMQ's ExtraInfoUtil.getRealTopic).

OrbitMQ's gRPC proxy hands the same string to 5.x SDKs as their receipt handle, with a ninth
field appended: the message's commit-log offset (ForwardMessageToDeadLetterQueue needs it and
RocketMQ's parsers ignore trailing fields).

OrbitMQ's own header extensions (ignored by RocketMQ brokers): none; auto-renew is driven by
the proxy, which alone sees its gRPC clients' liveness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from orbitmq.errors import RemoteProtocolError
from orbitmq.protocol.header_fields import SUBSCRIPTION_MAX_CHARS, Group, HeaderBase, Int32, Rule, Text, Topic

__all__ = [
    "RETRY_FLAG_NORMAL",
    "RETRY_FLAG_V1",
    "RETRY_FLAG_V2",
    "AckMessageRequestHeader",
    "ChangeInvisibleTimeRequestHeader",
    "ChangeInvisibleTimeResponseHeader",
    "ExtraInfo",
    "PopMessageRequestHeader",
    "PopMessageResponseHeader",
    "decode_offset_info",
    "encode_offset_info",
    "pop_retry_topic",
    "popped_topic",
    "real_topic",
]

RETRY_FLAG_NORMAL = "0"
"""Receipt handle retry flag: popped from the topic itself."""
RETRY_FLAG_V1 = "1"
"""Popped from the group's pop retry topic ``%RETRY%<group>_<topic>`` (RocketMQ 5's default)."""
RETRY_FLAG_V2 = "2"
"""Popped from ``%RETRY%<group>+<topic>`` (RocketMQ's ``enableRetryTopicV2``)."""
_RETRY_PREFIX = "%RETRY%"


def pop_retry_topic(group: str, topic: str) -> str:
    """The topic a group's expired pops of ``topic`` are revived into (RocketMQ's KeyBuilder v1)."""
    return f"{_RETRY_PREFIX}{group}_{topic}"


def real_topic(topic: str, group: str, retry: str) -> str:
    """The topic a handle's message was popped from: ``topic`` itself when it already is a retry
    topic or the handle's retry flag is "0", else the group's pop retry topic of ``topic``."""
    if topic.startswith(_RETRY_PREFIX) or retry not in (RETRY_FLAG_V1, RETRY_FLAG_V2):
        return topic
    if retry == RETRY_FLAG_V2:
        return f"{_RETRY_PREFIX}{group}+{topic}"
    return pop_retry_topic(group, topic)


def popped_topic(topic: str, group: str) -> str:
    """The inverse of :func:`real_topic`: the topic a consumer of ``group`` popped, given the
    group's pop retry topic of it (any other topic is returned as it is)."""
    for separator in ("_", "+"):
        prefix = f"{_RETRY_PREFIX}{group}{separator}"
        if topic.startswith(prefix) and len(topic) > len(prefix):
            return topic[len(prefix) :]
    return topic


INIT_MODE_MIN = 0
"""ConsumeInitMode.MIN: a group new to a queue starts at the queue's oldest message."""
INIT_MODE_MAX = 1
"""ConsumeInitMode.MAX: it starts at the end (at 0 while nothing was ever deleted, as RocketMQ)."""


@dataclass(frozen=True, slots=True)
class PopMessageRequestHeader(HeaderBase):
    """POP_MESSAGE (200050). ``queue_id`` -1 pops from every readable queue of the topic."""

    consumer_group: Group
    topic: Topic
    queue_id: Int32
    max_msg_nums: Int32
    invisible_time: int
    poll_time: int
    born_time: int
    init_mode: Int32
    exp_type: Text | None = None
    exp: Annotated[str, Rule(max_chars=SUBSCRIPTION_MAX_CHARS)] | None = None
    order: bool = False
    attempt_id: Text | None = None


@dataclass(frozen=True, slots=True)
class PopMessageResponseHeader(HeaderBase):
    """Answer to POP_MESSAGE; offsets infos are ``retry queueId value`` entries joined by ``;``."""

    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@dataclass(frozen=True, slots=True)
class AckMessageRequestHeader(HeaderBase):
    """ACK_MESSAGE (200051). ``offset`` is the message's queue offset."""

    consumer_group: Group
    topic: Topic
    queue_id: Int32
    extra_info: Text
    offset: int


@dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeRequestHeader(HeaderBase):
    """CHANGE_MESSAGE_INVISIBLETIME (200053): visible again ``invisible_time`` ms from now."""

    consumer_group: Group
    topic: Topic
    queue_id: Int32
    extra_info: Text
    offset: int
    invisible_time: int


@dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeResponseHeader(HeaderBase):
    """The delivery's new deadline is ``pop_time + invisible_time``."""

    pop_time: int
    invisible_time: int
    revive_qid: int


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    """A parsed receipt handle (see the module docstring for the fields)."""

    ck_queue_offset: int
    pop_time_ms: int
    invisible_time_ms: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int | None = None

    def encode(self) -> str:
        fields = [
            self.ck_queue_offset,
            self.pop_time_ms,
            self.invisible_time_ms,
            self.revive_qid,
            self.retry,
            self.broker_name,
            self.queue_id,
            self.queue_offset,
        ]
        if self.commit_log_offset is not None:
            fields.append(self.commit_log_offset)
        return " ".join(str(value) for value in fields)

    @classmethod
    def decode(cls, text: str) -> ExtraInfo:
        """Parse a ``POP_CK`` / receipt handle.

        Raises:
            RemoteProtocolError: fewer than eight fields or a number that does not parse.
        """
        parts = text.split(" ")
        if len(parts) < 8 or not parts[5]:
            raise RemoteProtocolError(f"receipt handle {text[:80]!r} does not have eight fields")
        try:
            return cls(
                ck_queue_offset=int(parts[0]),
                pop_time_ms=int(parts[1]),
                invisible_time_ms=int(parts[2]),
                revive_qid=int(parts[3]),
                retry=parts[4],
                broker_name=parts[5],
                queue_id=int(parts[6]),
                queue_offset=int(parts[7]),
                commit_log_offset=int(parts[8]) if len(parts) > 8 and parts[8] else None,
            )
        except ValueError as exc:
            raise RemoteProtocolError(f"receipt handle {text[:80]!r}: {exc}") from exc


def encode_offset_info(entries: dict[int, list[int]], retry: str = RETRY_FLAG_NORMAL) -> str:
    """``msgOffsetInfo``/``startOffsetInfo``: ``<retry> <queueId> <v1,v2,..>`` per queue, ``;``-joined."""
    return ";".join(
        f"{retry} {queue_id} {','.join(str(v) for v in values)}" for queue_id, values in entries.items()
    )


def decode_offset_info(text: str | None, retry: str = RETRY_FLAG_NORMAL) -> dict[int, list[int]]:
    """The inverse of :func:`encode_offset_info`: the entries with retry flag ``retry``.

    Raises:
        RemoteProtocolError: an entry is not ``retry queueId values``.
    """
    result: dict[int, list[int]] = {}
    if not text:
        return result
    for entry in text.split(";"):
        parts = entry.split(" ")
        if len(parts) != 3:
            raise RemoteProtocolError(f"offset info entry {entry[:80]!r} is not 'retry queueId values'")
        try:
            queue_id = int(parts[1])
            values = [int(value) for value in parts[2].split(",") if value]
        except ValueError as exc:
            raise RemoteProtocolError(f"offset info entry {entry[:80]!r}: {exc}") from exc
        if parts[0] == retry:
            result.setdefault(queue_id, []).extend(values)
    return result
