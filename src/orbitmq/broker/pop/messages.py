"""What the POP engine reads from the store and writes to it besides its journal.

Reads: one message by queue offset (a redelivery), and the fresh messages from a queue's
cursor that pass a group's filter (first on the consume-queue tags code, then on the decoded
message). Writes: a copy of an exhausted message in ``%DLQ%<group>`` (queue 0), with
RocketMQ's DLQ properties: ``RETRY_TOPIC`` / ``DLQ_ORIGIN_TOPIC`` (where it came from),
``ORIGIN_MESSAGE_ID`` / ``DLQ_ORIGIN_MESSAGE_ID`` (its message id) and RECONSUMETIMES = the
deliveries it had.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from orbitmq.broker.pop.filter import MessageFilter
from orbitmq.broker.pop.selection import Candidate
from orbitmq.broker.reput import ReputTargets
from orbitmq.broker.topics import TopicConfigTable
from orbitmq.broker.validation import dlq_topic
from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageConst, MessageExt
from orbitmq.model.route import PERM_WRITE
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.store.message_store import GetStatus, MessageStore, PutMessageRequest, PutStatus

logger = logging.getLogger(__name__)

DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"


def read_one(store: MessageStore, topic: str, queue_id: int, offset: int) -> bytes | None:
    """The record at ``offset`` of a queue, or None when it is gone (retention) or missing."""
    result = store.get_messages(topic, queue_id, offset, 1)
    if result.status is not GetStatus.FOUND or not result.queue_offsets or result.queue_offsets[0] != offset:
        return None
    return bytes(result.buffers[0])


def read_fresh(
    store: MessageStore,
    topic: str,
    queue_id: int,
    cursor: int,
    wanted: int,
    message_filter: MessageFilter,
    fifo: bool,
    records: dict[int, bytes],
) -> tuple[list[Candidate], int]:
    """Up to ``wanted`` messages from ``cursor`` that pass the filter, and the offset after the scan.

    Their records go into ``records``; for a FIFO pop each candidate carries its message group.
    """
    if wanted <= 0:
        return [], cursor
    result = store.get_messages(topic, queue_id, cursor, wanted, 1 << 24, message_filter.matches_code)
    if result.status not in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE):
        if result.status in (GetStatus.OFFSET_FOUND_NULL, GetStatus.MESSAGE_WAS_REMOVING):
            return [], max(result.next_begin_offset, cursor)
        if result.status is GetStatus.OFFSET_TOO_SMALL:
            return [], result.min_offset
        return [], cursor
    fresh: list[Candidate] = []
    for buffer, offset in zip(result.buffers, result.queue_offsets, strict=True):
        record = bytes(buffer)
        try:
            message, _ = decode_stored_message(record, decode_body=False)
        except RemoteProtocolError:
            logger.error("undecodable message at %s/%d offset %d; skipped", topic, queue_id, offset)
            continue
        if not message_filter.matches(message.tags, message.properties):
            continue
        records[offset] = record
        group = message.properties.get(MessageConst.SHARDING_KEY, "") if fifo else ""
        fresh.append(Candidate(offset, group, fresh=True))
    return fresh, max(result.next_begin_offset, cursor)


def message_group_of(record: bytes, fifo: bool) -> str:
    """A record's FIFO message group ("" for none, or when the pop is not FIFO)."""
    if not fifo:
        return ""
    try:
        message, _ = decode_stored_message(record, decode_body=False)
    except RemoteProtocolError:
        return ""
    return message.properties.get(MessageConst.SHARDING_KEY, "")


class SystemTopicCopies:
    """Puts copies of popped messages into a system topic of their group, created on first use.

    The base of :class:`DeadLetters` and ``revive.RetryTopics``: the topic is made when missing
    (``on_topics_changed`` then tells the broker to register it), and a copy is admitted only
    where a direct send would be (``broker.reput``).
    """

    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigTable,
        store_host: Callable[[], tuple[str, int]],
        targets: ReputTargets | None = None,
    ) -> None:
        self._store = store
        self._topics = topics
        self._targets = targets
        self._store_host = store_host
        self.on_topics_changed: Callable[[], None] = lambda: None

    def _open(self, target: str, queues: int, perm: int, reason: str, message_id: str) -> bool:
        """Create ``target`` when missing; False when a copy may not go there."""
        if self._topics.get(target) is None:
            self._topics.find_or_create(target, queues, perm)
            self.on_topics_changed()
        return self._targets is None or self._targets.admit(reason, message_id, target, 0)

    def _put_copy(
        self,
        target: str,
        original: MessageExt,
        properties: dict[str, str],
        reconsume_times: int,
        born_host: tuple[str, int] | None = None,
    ) -> PutStatus:
        """Store ``original``'s copy in queue 0 of ``target`` (born host: the original's, unless given)."""
        put = self._store.put_message(
            PutMessageRequest(
                topic=target,
                queue_id=0,
                body=original.body,
                flag=original.flag,
                properties=properties,
                sys_flag=original.sys_flag,
                born_timestamp=original.born_timestamp,
                born_host=original.born_host if born_host is None else born_host,
                store_host=self._store_host(),
                reconsume_times=reconsume_times,
            )
        )
        return put.status


class DeadLetters(SystemTopicCopies):
    """Stores exhausted messages in their group's DLQ topic (created on first use)."""

    def store(self, group: str, record: bytes, attempts: int, origin_topic: str | None = None) -> bool:
        """Put a copy of a stored message into ``%DLQ%<group>``; False when the put failed.

        ``origin_topic`` is the topic the message was consumed from, when the record is a copy
        in the group's pop retry topic (the DLQ properties name the topic, not the copy's).

        A DLQ topic that cannot take it (made read-only, say: broker.reput) drops the copy,
        logged: the delivery is finished either way.
        """
        try:
            original, _ = decode_stored_message(record)
        except RemoteProtocolError as exc:
            logger.error("dead-lettering an undecodable message of group %s: %s; dropped", group, exc)
            return True
        target = dlq_topic(group)
        message_id = original.uniq_key or original.offset_msg_id
        if not self._open(target, 1, PERM_WRITE, "pop-dlq", message_id):
            return True
        origin = origin_topic or original.topic
        properties = dict(original.properties)
        properties.setdefault(MessageConst.RETRY_TOPIC, origin)
        properties.setdefault(MessageConst.ORIGIN_MESSAGE_ID, message_id)
        properties.setdefault(DLQ_ORIGIN_TOPIC, origin)
        properties.setdefault(DLQ_ORIGIN_MESSAGE_ID, message_id)
        status = self._put_copy(target, original, properties, attempts)
        if status is not PutStatus.PUT_OK:
            logger.error("dead-lettering %s of group %s failed: %s", original.msg_id, group, status.value)
            return False
        logger.info("message %s of %s went to %s after %d deliveries", message_id, origin, target, attempts)
        return True
