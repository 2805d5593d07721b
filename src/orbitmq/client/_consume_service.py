"""Running a push consumer's listener: concurrently, or orderly (serial per queue).

Listeners may be ``async def`` functions (awaited on the event loop) or plain callables (run
in a thread pool of ``consume_thread_max`` threads). Either returns a :class:`ConsumeResult`;
an exception counts as RECONSUME_LATER.

Concurrent (RocketMQ ConsumeMessageConcurrentlyService): pulled messages are cut into batches
of ``consume_message_batch_max_size`` and handed to ``consume_thread_max`` worker tasks. A
failed batch is sent back to the broker (clustering) and then counts as done; a message the
broker does not take back stays in its process queue, which holds the committed offset below
it, and is consumed again locally after a pause, so it is never lost.

Orderly (ConsumeMessageOrderlyService): one task per queue takes the lowest messages in turn;
a failure puts them back and pauses the queue for ``suspend_current_queue_time_ms``, until a
message has failed ``max_reconsume_times`` times, when it is sent to %DLQ%<group>. In
clustering mode a queue is consumed only while this client holds its broker lock.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from orbitmq.client._group_api import DELAY_LEVEL_DEAD_LETTER, BrokerInvoker, send_back
from orbitmq.client._process_queue import ProcessQueue
from orbitmq.model.message import MessageExt, MessageQueue

logger = logging.getLogger(__name__)

LOCAL_RETRY_DELAY_S = 5.0
"""Pause before a message the broker would not take back is consumed again locally."""


class ConsumeResult(Enum):
    """What a listener answers for a batch."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


MessageListener = Callable[[list[MessageExt]], "ConsumeResult | Awaitable[ConsumeResult]"]


@dataclass(frozen=True, slots=True)
class ConsumeSettings:
    group: str
    clustering: bool
    thread_max: int
    batch_max_size: int
    max_reconsume_times: int
    suspend_current_queue_time_ms: int


class OffsetSink(Protocol):
    """Where finished messages move the committed offset to."""

    def on_consumed(self, mq: MessageQueue, pq: ProcessQueue, commit_offset: int) -> None: ...

    def queue_lockable(self, mq: MessageQueue, pq: ProcessQueue) -> Awaitable[bool]: ...


# How a listener call ended, as RocketMQ's ConsumeReturnType ordinals (trace records carry it).
RETURN_SUCCESS = 0
RETURN_EXCEPTION = 2
RETURN_NULL = 3
RETURN_FAILED = 4


class ConsumeHook(Protocol):
    """Told about every listener call (consume statistics, message trace)."""

    def consume_started(self, messages: list[MessageExt], mq: MessageQueue) -> object:
        """Before the call; the returned token comes back to :meth:`consume_finished`."""
        ...

    def consume_finished(
        self,
        token: object,
        messages: list[MessageExt],
        mq: MessageQueue,
        result: ConsumeResult,
        return_type: int,
        elapsed_ms: float,
    ) -> None: ...


class _ListenerRunner:
    """Calls the listener the right way for its kind and maps exceptions to RECONSUME_LATER."""

    def __init__(self, listener: MessageListener, thread_max: int, hooks: Sequence[ConsumeHook] = ()) -> None:
        self._hooks = tuple(hooks)
        self._listener = listener
        self._is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            type(listener).__call__
        )
        self._executor = None if self._is_async else ThreadPoolExecutor(thread_max, "orbitmq-consume")

    async def run(self, messages: list[MessageExt], mq: MessageQueue) -> ConsumeResult:
        if not self._hooks:
            return (await self._call(messages, mq))[0]
        tokens = [self._started(hook, messages, mq) for hook in self._hooks]
        started = time.perf_counter()
        result, return_type = await self._call(messages, mq)
        elapsed_ms = (time.perf_counter() - started) * 1000
        for hook, token in zip(self._hooks, tokens, strict=True):
            try:
                hook.consume_finished(token, messages, mq, result, return_type, elapsed_ms)
            except Exception:
                logger.exception("consume hook %s failed", type(hook).__name__)
        return result

    @staticmethod
    def _started(hook: ConsumeHook, messages: list[MessageExt], mq: MessageQueue) -> object:
        try:
            return hook.consume_started(messages, mq)
        except Exception:
            logger.exception("consume hook %s failed", type(hook).__name__)
            return None

    async def _call(self, messages: list[MessageExt], mq: MessageQueue) -> tuple[ConsumeResult, int]:
        try:
            if self._executor is None:
                result = await self._listener(messages)  # type: ignore[misc]
            else:
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(self._executor, self._listener, messages)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception(
                "listener failed on %d messages of %s; they will be reconsumed", len(messages), mq
            )
            return ConsumeResult.RECONSUME_LATER, RETURN_EXCEPTION
        if isinstance(result, ConsumeResult):
            return result, RETURN_SUCCESS if result is ConsumeResult.CONSUME_SUCCESS else RETURN_FAILED
        logger.warning("listener returned %r for %s; treating it as RECONSUME_LATER", result, mq)
        return ConsumeResult.RECONSUME_LATER, RETURN_NULL if result is None else RETURN_FAILED

    async def run_directly(self, messages: list[MessageExt], mq: MessageQueue) -> tuple[ConsumeResult, int]:
        """One listener call for CONSUME_MESSAGE_DIRECTLY: no hooks, no send-back."""
        return await self._call(messages, mq)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


class ConcurrentConsumeService:
    """Worker tasks that consume batches from any queue in parallel."""

    def __init__(
        self,
        settings: ConsumeSettings,
        listener: MessageListener,
        invoker: BrokerInvoker,
        sink: OffsetSink,
        hooks: Sequence[ConsumeHook] = (),
    ) -> None:
        self._settings = settings
        self._runner = _ListenerRunner(listener, settings.thread_max, hooks)
        self._invoker = invoker
        self._sink = sink
        self._work: asyncio.Queue[tuple[MessageQueue, ProcessQueue, list[MessageExt]]] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for index in range(max(self._settings.thread_max, 1)):
            self._tasks.add(loop.create_task(self._worker(), name=f"orbitmq consume {index}"))

    def submit(self, mq: MessageQueue, pq: ProcessQueue, messages: list[MessageExt]) -> None:
        size = max(self._settings.batch_max_size, 1)
        for start in range(0, len(messages), size):
            self._work.put_nowait((mq, pq, messages[start : start + size]))

    async def _worker(self) -> None:
        while True:
            mq, pq, messages = await self._work.get()
            if pq.dropped:
                continue
            result = await self._runner.run(messages, mq)
            if pq.dropped:
                # The queue belongs to another member now; it re-consumes from the committed offset.
                continue
            done = messages
            if result is ConsumeResult.RECONSUME_LATER:
                done = await self._send_back(mq, messages)
                taken_back = {id(m) for m in done}
                kept = [m for m in messages if id(m) not in taken_back]
                if kept:
                    self._retry_locally(mq, pq, kept)
            self._sink.on_consumed(mq, pq, pq.remove_messages(done))

    async def _send_back(self, mq: MessageQueue, messages: list[MessageExt]) -> list[MessageExt]:
        """The messages the broker took back (broadcasting drops failures, as RocketMQ does)."""
        if not self._settings.clustering:
            return messages
        results = await asyncio.gather(
            *(
                send_back(
                    self._invoker,
                    mq.broker_name,
                    self._settings.group,
                    message,
                    max_reconsume_times=self._settings.max_reconsume_times,
                )
                for message in messages
            )
        )
        return [message for message, ok in zip(messages, results, strict=True) if ok]

    def _retry_locally(self, mq: MessageQueue, pq: ProcessQueue, messages: list[MessageExt]) -> None:
        for message in messages:
            message.reconsume_times += 1
        loop = asyncio.get_running_loop()
        loop.call_later(LOCAL_RETRY_DELAY_S, self._resubmit, mq, pq, messages)

    def _resubmit(self, mq: MessageQueue, pq: ProcessQueue, messages: list[MessageExt]) -> None:
        if not pq.dropped:
            self.submit(mq, pq, messages)

    async def consume_directly(
        self, messages: list[MessageExt], mq: MessageQueue
    ) -> tuple[ConsumeResult, int]:
        """The listener on ``messages`` now, outside the queues (CONSUME_MESSAGE_DIRECTLY)."""
        return await self._runner.run_directly(messages, mq)

    async def drain(self, timeout_s: float) -> None:
        """Wait until queued batches are consumed (or ``timeout_s`` passes)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not self._work.empty() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self._runner.close()


class OrderlyConsumeService:
    """One consuming task per queue at a time; messages of a queue are consumed in order."""

    def __init__(
        self,
        settings: ConsumeSettings,
        listener: MessageListener,
        invoker: BrokerInvoker,
        sink: OffsetSink,
        hooks: Sequence[ConsumeHook] = (),
    ) -> None:
        self._settings = settings
        self._runner = _ListenerRunner(listener, settings.thread_max, hooks)
        self._invoker = invoker
        self._sink = sink
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
                result = await self._runner.run(messages, mq)
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


ConsumeService = ConcurrentConsumeService | OrderlyConsumeService
