"""Reviving expired deliveries through the group's pop retry topic, as RocketMQ's PopReviveService.

A message popped by a concurrent (not orderly) group and neither acknowledged nor changed
before its invisible time ran out is *revived*: a copy goes to the group's pop retry topic
``%RETRY%<group>_<topic>`` (queue 0; the topic is created on first use with one queue and
permission 6, as RocketMQ's ``addRetryTopicIfNotExist``), and the delivery of the original is
finished. The copy keeps the body, flag, sys flag, born time and properties, with:

- RECONSUMETIMES: the deliveries the message has had (the original's count + 1 per revive),
- ``1ST_POP_TIME``: the pop time of its first delivery (set once, kept by later revives),
- ``ORIGIN_GROUP``: the group (RocketMQ 5.5),
- born host and store host: this broker.

The group's pops read the retry topic beside the topic (``broker.pop.service``), so the message
comes back with its offset in the retry topic. A message from the retry topic that expires
again is revived into the same retry topic. Orderly (FIFO) deliveries are never revived this
way: RocketMQ redelivers them from their own queue, and so does OrbitMQ.

The copy is stored before the original's delivery is journaled as finished, so a crash between
the two revives the message twice (at least once), never not at all.
"""

from __future__ import annotations

import logging

from orbitmq.broker.pop.messages import SystemTopicCopies
from orbitmq.errors import RemoteProtocolError
from orbitmq.model.route import PERM_READ_WRITE
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.protocol.pop import pop_retry_topic
from orbitmq.store.message_store import PutStatus

logger = logging.getLogger(__name__)

FIRST_POP_TIME = "1ST_POP_TIME"
ORIGIN_GROUP = "ORIGIN_GROUP"
RETRY_QUEUE_NUMS = 1
"""Queues of a pop retry topic (RocketMQ's PopAckConstants.retryQueueNum)."""
RETRY_TOPIC_PERM = PERM_READ_WRITE


def reconsume_times_of(record: bytes) -> int:
    """The RECONSUMETIMES a stored record carries (0 when it does not decode)."""
    try:
        message, _ = decode_stored_message(record, decode_body=False)
    except RemoteProtocolError:
        return 0
    return message.reconsume_times


class RetryTopics(SystemTopicCopies):
    """Stores revived messages in their group's pop retry topic (created on first use)."""

    def revive(self, group: str, topic: str, record: bytes, deliveries: int, first_pop_time_ms: int) -> bool:
        """Store a copy of ``record`` (popped from ``topic``) in the group's pop retry topic.

        ``deliveries`` is how many times the message went out so far (its new RECONSUMETIMES).
        False when the copy could not be stored: the caller delivers the message again from
        where it is (nothing is lost).
        """
        try:
            original, _ = decode_stored_message(record)
        except RemoteProtocolError as exc:
            logger.error("reviving an undecodable message of group %s: %s", group, exc)
            return False
        target = topic if topic.startswith("%RETRY%") else pop_retry_topic(group, topic)
        message_id = original.uniq_key or original.offset_msg_id
        if not self._open(target, RETRY_QUEUE_NUMS, RETRY_TOPIC_PERM, "pop-revive", message_id):
            return False
        properties = dict(original.properties)
        if original.reconsume_times == 0 or FIRST_POP_TIME not in properties:
            properties[FIRST_POP_TIME] = str(first_pop_time_ms)
        properties[ORIGIN_GROUP] = group
        status = self._put_copy(target, original, properties, deliveries, born_host=self._store_host())
        if status is not PutStatus.PUT_OK:
            logger.error(
                "reviving %s of group %s into %s failed: %s", message_id, group, target, status.value
            )
            return False
        return True
