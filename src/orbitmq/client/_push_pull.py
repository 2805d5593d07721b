"""A push consumer's pull loops: one per queue owned, long-polling the broker, with flow control.

Theory of operation (RocketMQ's PullMessageService and DefaultMQPushConsumerImpl.pullMessage).
Each queue a push consumer owns gets :meth:`PullLoops.run`: it pulls from the queue's next
offset, decodes what was found, puts it in the queue's :class:`ProcessQueue` and hands it to
the consume service. The loop pauses while the queue holds more than
``pull_threshold_for_queue`` messages or ``pull_threshold_size_for_queue_mib``, and is woken
(:meth:`PullLoops.on_room`) when consumption has emptied half of it. A pull asks for
``pull_batch_size`` messages, or for more while the queue has a backlog and the threshold
leaves room (``_pull_api.PullSizer``). Each pull piggybacks the queue's committed offset
(clustering), and goes to the broker the last answer suggested (``PullNodeTable``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from orbitmq.client._consume_stats import ConsumeStatsRecorder
from orbitmq.client._consumer_config import PushConsumerConfig
from orbitmq.client._process_queue import ProcessQueue
from orbitmq.client._pull_api import (
    PULL_DELAY_ON_ERROR_S,
    BrokerInvoker,
    PullNodeTable,
    PullRequestSpec,
    PullSizer,
    PullStatus,
    decode_pull_body,
    pull_queue,
    restore_retry_topic,
)
from orbitmq.client.offset_store import OffsetStore
from orbitmq.client.selector import MessageSelector
from orbitmq.errors import OrbitError, RemoteProtocolError
from orbitmq.model.heartbeat import MessageModel
from orbitmq.model.message import MessageExt, MessageQueue

__all__ = ["PULL_DELAY_ON_FLOW_CONTROL_S", "PullLoops"]

logger = logging.getLogger(__name__)

PULL_DELAY_ON_FLOW_CONTROL_S = 0.05


class MessageSubmitter(Protocol):
    """The consume service, as the pull loops see it."""

    def submit(self, mq: MessageQueue, pq: ProcessQueue, messages: list[MessageExt]) -> None: ...


class PullLoops:
    """The pull loops of one push consumer, and the pulls waiting for room in their queues.

    Args:
        group: the consumer group.
        config: the consumer's settings.
        subscriptions: the consumer's topics and selectors (read at every pull: a topic
            unsubscribed ends its loops).
        stats: where pulls are counted.
        on_consumed: the consumer's offset sink, told when a pull leaves a queue empty.
    """

    def __init__(
        self,
        group: str,
        config: PushConsumerConfig,
        subscriptions: Mapping[str, MessageSelector],
        stats: ConsumeStatsRecorder,
        on_consumed: Callable[[MessageQueue, ProcessQueue, int], None],
    ) -> None:
        self._group = group
        self._config = config
        self._clustering = config.message_model is MessageModel.CLUSTERING
        self._subscriptions = subscriptions
        self._stats = stats
        self._on_consumed = on_consumed
        # Per queue, the broker the last pull answer suggested (a slave while the master is away).
        self._nodes = PullNodeTable()
        # Pull loops paused by flow control, woken when consumption makes room (on_room).
        self._room_waiters: dict[ProcessQueue, asyncio.Future[None]] = {}

    def on_room(self, pq: ProcessQueue) -> None:
        """Consumption took messages out of ``pq``: wake its pull if it waits and half is free."""
        waiter = self._room_waiters.get(pq)
        if waiter is not None and (
            pq.msg_count <= self._config.pull_threshold_for_queue // 2
            and pq.msg_size_bytes <= self._config.pull_threshold_size_for_queue_mib * 512 * 1024
        ):
            del self._room_waiters[pq]
            if not waiter.done():
                waiter.set_result(None)

    async def run(
        self,
        invoker: BrokerInvoker,
        service: MessageSubmitter,
        store: OffsetStore,
        mq: MessageQueue,
        pq: ProcessQueue,
    ) -> None:
        """Pull ``mq`` into ``pq`` and hand what is found to ``service``, until ``pq`` is dropped
        or its topic unsubscribed."""
        config = self._config
        threshold_count = config.pull_threshold_for_queue
        threshold_bytes = config.pull_threshold_size_for_queue_mib * 1024 * 1024
        sizer = PullSizer(config.pull_batch_size)
        next_offset = pq.commit_offset()
        while not pq.dropped:
            if sizer.worth_waiting(threshold_count - pq.msg_count, threshold_count):
                await self._wait_for_room(pq)  # then pulls what room there is, as RocketMQ would
            if pq.msg_count >= threshold_count or pq.msg_size_bytes >= threshold_bytes:
                await self._wait_for_room(pq)
                continue
            selector = self._subscriptions.get(mq.topic)
            if selector is None:
                return
            spec = PullRequestSpec(
                self._group,
                selector,
                sizer.next_size(threshold_count - pq.msg_count),
                config.broker_suspend_max_ms,
                config.consumer_timeout_when_suspend_ms,
            )
            commit_offset = store.table.get(mq) if self._clustering else None
            pull_started = time.perf_counter()
            try:
                result = await pull_queue(
                    invoker,
                    mq,
                    next_offset,
                    spec,
                    commit_offset=-1 if commit_offset is None else commit_offset,
                    nodes=self._nodes,
                )
            except OrbitError as exc:
                logger.info("pull of %s at queue offset %d failed: %s", mq, next_offset, exc)
                await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                continue
            if pq.dropped:
                return
            sizer.on_result(result)
            if result.status is PullStatus.FOUND:
                try:
                    messages = decode_pull_body(result.body, selector, mq)
                except RemoteProtocolError as exc:
                    # Never from an OrbitMQ broker (its store checks every record): say so and
                    # pull again, rather than end this queue's pull loop.
                    logger.error("pull of %s at queue offset %d: %s", mq, next_offset, exc)
                    await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                    continue
                self._stats.on_pull(
                    mq.topic, len(messages), (time.perf_counter() - pull_started) * 1000, _now_ms()
                )
                restore_retry_topic(messages, self._group)
                pq.put_messages(messages, result.next_begin_offset)
                if messages:
                    service.submit(mq, pq, messages)
                elif pq.msg_count == 0:
                    self._on_consumed(mq, pq, pq.commit_offset())
            elif result.status is PullStatus.NO_MATCHED_MSG:
                pq.put_messages([], result.next_begin_offset)
                if pq.msg_count == 0:
                    self._on_consumed(mq, pq, pq.commit_offset())
            elif result.status is PullStatus.OFFSET_ILLEGAL:
                # The broker moved this queue: an admin reset the group's offset, or the
                # offset fell outside the queue. Either way consumption continues there.
                logger.info(
                    "broker moved %s from queue offset %d to %d (queue holds [%d, %d])",
                    mq,
                    next_offset,
                    result.next_begin_offset,
                    result.min_offset,
                    result.max_offset,
                )
                pq.reset_to(result.next_begin_offset)
                store.table.update(mq, result.next_begin_offset)
                await store.persist([mq])
            next_offset = (
                result.next_begin_offset if result.status is not PullStatus.NO_NEW_MSG else next_offset
            )

    async def _wait_for_room(self, pq: ProcessQueue) -> None:
        """Flow control: until consumption has emptied half of ``pq`` (see :meth:`on_room`),
        or :data:`PULL_DELAY_ON_FLOW_CONTROL_S` passed (the caller looks at the thresholds again)."""
        waiter = asyncio.get_running_loop().create_future()
        self._room_waiters[pq] = waiter
        try:
            async with asyncio.timeout(PULL_DELAY_ON_FLOW_CONTROL_S):
                await waiter
        except TimeoutError:
            pass
        finally:
            if self._room_waiters.get(pq) is waiter:
                del self._room_waiters[pq]


def _now_ms() -> int:
    return int(time.time() * 1000)
