"""The target check of every internal re-put: a held message goes only where a send could go.

The broker holds messages in its own topics and writes them again later, to a destination
the held message names (``REAL_TOPIC``/``REAL_QID``) or derives (a group's retry and dead
letter topics):

| re-put | held in | goes to |
| --- | --- | --- |
| timed message falls due (broker.timer) | ``rmq_sys_wheel_timer`` | ``REAL_TOPIC``/``REAL_QID`` |
| delay level passes (broker.schedule) | ``SCHEDULE_TOPIC_XXXX`` | ``REAL_TOPIC``/``REAL_QID`` |
| transaction commit (broker.transaction) | ``RMQ_SYS_TRANS_HALF_TOPIC`` | ``REAL_TOPIC``/``REAL_QID`` |
| staged write commit (broker.staging) | ``RMQ_SYS_STAGE_HALF_TOPIC`` | ``REAL_TOPIC``/``REAL_QID`` |
| POP delivery exhausted (broker.pop) | the topic popped | ``%DLQ%<group>`` queue 0 |
| retry exhausted (send, send-back) | the retry topic | ``%DLQ%<group>`` queue 0 |

The destination was checked when the message arrived, but a held message outlives that
check: the topic can be deleted, made read-only or shrunk meanwhile, and a record written
before a check existed (or planted in a system topic) can name anything. So each re-put
checks its destination again, as a direct send would be checked: a legal topic name that is
not one only the broker writes (``SCHEDULE_TOPIC_XXXX``, ``OFFSET_MOVED_EVENT``,
``rmq_sys_*``, ...), a topic that exists and is writable, a queue id inside its queues. A
message whose destination fails is logged (one line per path every few seconds, with a
count of those held back) and dropped; it is never written. The check runs when the message
is re-put, not when it was held, so records already in the store are checked after a
restart too.
"""

from __future__ import annotations

import logging

from orbitmq.broker.topics import TopicConfigTable
from orbitmq.broker.validation import Rejection, check_queue_id, check_send_topic
from orbitmq.model.route import PERM_WRITE
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.names import shorten
from orbitmq.transport.log_limit import LogLimiter

__all__ = ["ReputTargets"]

logger = logging.getLogger(__name__)


class ReputTargets:
    """Checks re-put destinations against the broker's topic table (see the module docstring)."""

    def __init__(self, topics: TopicConfigTable, log_interval_s: float = 10.0) -> None:
        self._topics = topics
        self._log_limit = LogLimiter(logger, log_interval_s)
        self.refused_count = 0

    def refusal(self, topic: str, queue_id: int) -> Rejection | None:
        """Why a direct send to ``topic``/``queue_id`` would be refused; None when it would not."""
        rejection = check_send_topic(topic)
        if rejection is not None:
            return rejection
        config = self._topics.get(topic)
        if config is None:
            return Rejection(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if not config.perm & PERM_WRITE:
            return Rejection(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        if queue_id < 0:
            return Rejection(ResponseCode.SYSTEM_ERROR, f"queueId[{queue_id}] is illegal, topic[{topic}]")
        return check_queue_id(topic, queue_id, max(config.read_queue_nums, config.write_queue_nums))

    def check(self, path: str, message_id: str, topic: str, queue_id: int) -> Rejection | None:
        """:meth:`refusal`, logged (rate-limited per ``path``) and counted when there is one.

        ``path`` names the re-put ("timer", "delay", ...): a short fixed word, the log kind.
        """
        rejection = self.refusal(topic, queue_id)
        if rejection is None:
            return None
        self.refused_count += 1
        self._log_limit.warning(
            f"reput:{path}",
            "%s: message %s not re-put to %s/%d: %s",
            path,
            shorten(message_id),
            shorten(topic),
            queue_id,
            rejection.remark,
        )
        return rejection

    def admit(self, path: str, message_id: str, topic: str, queue_id: int) -> bool:
        """True when the re-put may go ahead (a refusal is logged by :meth:`check`)."""
        return self.check(path, message_id, topic, queue_id) is None
