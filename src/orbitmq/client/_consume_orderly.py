"""Orderly consumption (RocketMQ ConsumeMessageOrderlyService): each queue's messages in order.

One task per queue takes the lowest messages in turn; a failure puts them back and pauses the
queue for ``suspend_current_queue_time_ms``, until a message has failed
``max_reconsume_times`` times, when it is sent to %DLQ%<group>. In clustering mode a queue is
consumed only while this client holds its broker lock (``OffsetSink.queue_lockable``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from orbitmq.client._consume_settings import ConsumeSettings, OffsetSink
from orbitmq.client._consume_stats import ConsumeStatsRecorder
from orbitmq.client._group_api import DELAY_LEVEL_DEAD_LETTER, BrokerInvoker, send_back
from orbitmq.client._listener_runner import ConsumeHook, ConsumeResult, ListenerRunner, MessageListener
from orbitmq.client._process_queue import ProcessQueue
from orbitmq.model.message import MessageExt, MessageQueue

__all__ = ["OrderlyConsumeService"]


class OrderlyConsumeService:
    """One consuming task per queue at a time; messages of a queue are consumed in order."""

    def __init__(
        self,
        settings: ConsumeSettings,
        listener: MessageListener,
        invoker: BrokerInvoker,
        sink: OffsetSink,
        hooks: Sequence[ConsumeHook] = (),
        stats: ConsumeStatsRecorder | None = None,
    ) -> None:
        self._settings = settings
        self._runner: ListenerRunner[ProcessQueue] = ListenerRunner(listener, settings.thread_max, hooks)
        self._invoker = invoker
        self._sink = sink
        self._stats = stats
        self._tasks: dict[ProcessQueue, asyncio.Task[None]] = {}

    def start(self) -> None:
        return None

    def submit(self, mq: MessageQueue, pq: ProcessQueue, messages: list[MessageExt]) -> None:
        existing = self._tasks.get(pq)
        if (existing is not None and not existing.done()) or pq.dropped:
            return
        task = asyncio.get_running_loop().create_task(
            self._consume_queue(mq, pq), name=f"orbitmq orderly {mq}"
        )
        self._tasks[pq] = task
        task.add_done_callback(lambda done: self._forget(pq, done))

    def _forget(self, pq: ProcessQueue, task: asyncio.Task[None]) -> None:
        if self._tasks.get(pq) is task:
            del self._tasks[pq]

    async def _consume_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        pq.consuming_orderly = True
        try:
            while not pq.dropped:
                if not await self._sink.queue_lockable(mq, pq):
                    await asyncio.sleep(0.1)
                    continue
                messages = pq.take_messages(max(self._settings.batch_max_size, 1))
                if not messages:
                    return
                started = time.perf_counter()
                result = await self._runner.run(messages, mq)
                if self._stats is not None:
                    ok = len(messages) if result is ConsumeResult.CONSUME_SUCCESS else 0
                    elapsed_ms = (time.perf_counter() - started) * 1000
                    self._stats.on_consumed(mq.topic, ok, len(messages) - ok, elapsed_ms, _now_ms())
                if pq.dropped:
                    return
                if result is ConsumeResult.CONSUME_SUCCESS or await self._dead_letter(mq, messages):
                    self._sink.on_consumed(mq, pq, pq.commit())
                    continue
                for message in messages:
                    message.reconsume_times += 1
                pq.make_available(messages)
                await asyncio.sleep(self._settings.suspend_current_queue_time_ms / 1000)
        finally:
            pq.consuming_orderly = False

    async def _dead_letter(self, mq: MessageQueue, messages: list[MessageExt]) -> bool:
        """After max_reconsume_times local attempts, move the batch to %DLQ%<group>; True if done."""
        if not any(m.reconsume_times >= self._settings.max_reconsume_times for m in messages):
            return False
        if not self._settings.clustering:
            return True
        results = await asyncio.gather(
            *(
                send_back(
                    self._invoker,
                    mq.broker_name,
                    self._settings.group,
                    message,
                    delay_level=DELAY_LEVEL_DEAD_LETTER,
                    max_reconsume_times=self._settings.max_reconsume_times,
                )
                for message in messages
            )
        )
        return all(results)

    async def consume_directly(
        self, messages: list[MessageExt], mq: MessageQueue
    ) -> tuple[ConsumeResult, int]:
        """The listener on ``messages`` now, outside the queues (CONSUME_MESSAGE_DIRECTLY)."""
        return await self._runner.run_directly(messages, mq)

    async def drain(self, timeout_s: float) -> None:
        """Wait for the running queue tasks to finish their current batch."""
        pending = list(self._tasks.values())
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._runner.close()


def _now_ms() -> int:
    return int(time.time() * 1000)
