"""Running a push consumer's listener: concurrently, or orderly (serial per queue).

Listeners may be ``async def`` functions (awaited on the event loop) or plain callables (run
in a thread pool of ``consume_thread_max`` threads); ``orbitmq.client._listener_runner`` calls
them. Either returns a :class:`ConsumeResult`; an exception counts as RECONSUME_LATER.

Concurrent (RocketMQ ConsumeMessageConcurrentlyService): pulled messages are cut into batches
of ``consume_message_batch_max_size`` and handed to ``consume_thread_max`` worker tasks. A
failed batch is sent back to the broker (clustering) and then counts as done; a message the
broker does not take back stays in its process queue, which holds the committed offset below
it, and is consumed again locally after a pause, so it is never lost.

Orderly (ConsumeMessageOrderlyService): ``orbitmq.client._consume_orderly``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence

from orbitmq.client._consume_orderly import OrderlyConsumeService
from orbitmq.client._consume_settings import ConsumeSettings, OffsetSink
from orbitmq.client._consume_stats import ConsumeStatsRecorder
from orbitmq.client._consume_threads import FAST_CALL_S, ConsumeRun, Gathered, ThreadClaims
from orbitmq.client._group_api import BrokerInvoker, send_back
from orbitmq.client._listener_runner import (
    ConsumeHook,
    ConsumeResult,
    ListenerRunner,
    MessageListener,
)
from orbitmq.client._process_queue import ProcessQueue
from orbitmq.model.message import MessageExt, MessageQueue

__all__ = [
    "ConcurrentConsumeService",
    "ConsumeHook",
    "ConsumeResult",
    "ConsumeService",
    "ConsumeSettings",
    "MessageListener",
    "OffsetSink",
    "OrderlyConsumeService",
]

logger = logging.getLogger(__name__)

LOCAL_RETRY_DELAY_S = 5.0
"""Pause before a message the broker would not take back is consumed again locally."""
DONE_FLUSH_MESSAGES = 256
"""Most finished messages a worker keeps before it finishes them and lets the loop run ..."""
DONE_FLUSH_MS = 10.0
"""... or listener time they took (a slow listener's batches are finished one by one)."""
CLOCK_EVERY_MAX = 16
"""Most calls of an async listener between two clock reads, while they are fast (each under
``FAST_CALL_S`` on average)."""
SLOW_HOP_S = 0.05
"""A hop of a listener thought fast that lasts longer wakes a worker per batch left."""


def _now_ms() -> int:
    return int(time.time() * 1000)


class ConcurrentConsumeService:
    """Worker tasks that consume batches from any queue in parallel.

    Theory of operation. :meth:`submit` appends a pull's messages to one FIFO of runs and
    wakes an idle worker when none is free to take them; a worker cuts the next batch of
    ``batch_max_size`` messages off the run at the head when it takes it, and calls the
    listener on that batch alone, exactly as RocketMQ's ConsumeRequests do. What follows a
    successful call (taking the messages out of their process queue, moving the queue's
    offset, the consume statistics) is gathered over the batches of one queue that a worker
    runs back to back, and done once for them: when its next batch is of another queue, when
    the FIFO is empty, or after :data:`DONE_FLUSH_MESSAGES` messages or
    :data:`DONE_FLUSH_MS` of listener time, when the worker also lets the event loop run
    (the pulls go on meanwhile). Until then the finished messages stay in their process
    queue, so the committed offset can only lag, never pass an unfinished message. While a
    listener call waits (an ``async def`` listener that awaits), another worker is woken to
    take the next batch (:meth:`_spread`), up to ``thread_max`` calls at once as before; a
    listener that never waits is called by one worker at a time, which is all it can use.

    A plain (thread pool) listener without hooks is called from the pool threads through
    ``ListenerRunner.run_in_thread``: one hop to a thread runs several batches claimed from
    the FIFO (``orbitmq.client._consume_threads``), one listener call each, rather than one
    hop per batch; the ``thread_max`` workers keep as many threads busy as before (a run's
    batches wake as many, unless the claims are fast: then one worker takes a run).
    """

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
        self._batch_size = max(settings.batch_max_size, 1)
        self._runner: ListenerRunner[ProcessQueue] = ListenerRunner(listener, settings.thread_max, hooks)
        self._invoker = invoker
        self._sink = sink
        self._stats = stats
        self._work: deque[ConsumeRun] = deque()
        self._claims = ThreadClaims(
            self._work,
            self._runner.plain_listener,
            self._batch_size,
            self._spread_threads,
            self._finish_gathered,
            DONE_FLUSH_MESSAGES,
        )
        self._idle: deque[asyncio.Future[None]] = deque()
        self._busy = 0
        self._in_listener = 0  # workers inside an async listener call now
        self._spread_scheduled = False
        # Calls between two clock reads of an async listener's worker (see _consume_on_loop).
        self._clock_every = 1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        loop = self._loop = self._claims.loop = asyncio.get_running_loop()
        for index in range(max(self._settings.thread_max, 1)):
            self._tasks.add(loop.create_task(self._worker(), name=f"orbitmq consume {index}"))

    def submit(self, mq: MessageQueue, pq: ProcessQueue, messages: list[MessageExt]) -> None:
        if not messages:
            return
        self._work.append(ConsumeRun(mq, pq, messages))
        if self._runner.batches_in_threads:
            if not self._claims.fast:
                self._wake(-(-len(messages) // self._batch_size))
            elif not self._busy:
                self._wake(1)  # it takes the FIFO until it is empty; a slow claim spreads it
        elif self._in_listener >= self._busy:
            # No worker is free to take the run now: one is woken, and more join it while
            # the listener calls wait (_spread).
            self._wake(1)

    def _wake(self, count: int) -> None:
        idle = self._idle
        while count and idle:
            waiter = idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                count -= 1

    def _spread_threads(self) -> None:
        """A pool thread found the listener slow: a worker for each batch left, as RocketMQ's
        thread pool would run them."""
        self._claims.fast = False
        self._wake(self._claims.batches_left())

    def _spread(self) -> None:
        """At the loop's next turn after a listener call began: if a call is still waiting (the
        listener awaited something) and batches are left, wake one more worker to take them.
        A listener that never waits keeps one worker busy and the others asleep, so the pull
        loops get their turn every :data:`DONE_FLUSH_MESSAGES` messages, not after every worker's."""
        self._spread_scheduled = False
        if self._in_listener and self._work:
            self._wake(1)

    async def _wait_for_work(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._idle.append(waiter)
        try:
            await waiter
        finally:
            if not waiter.done():
                waiter.cancel()

    async def _worker(self) -> None:
        work = self._work
        in_threads = self._runner.batches_in_threads
        while True:
            if not work:
                await self._wait_for_work()
                continue
            self._busy += 1
            try:
                if in_threads:
                    await self._consume_in_thread()
                else:
                    await self._consume_on_loop()
            finally:
                self._busy -= 1

    async def _consume_on_loop(self) -> None:
        """Take batches off the FIFO and call the listener on each, until the FIFO is empty.

        Between two turns it gives the loop (:data:`DONE_FLUSH_MESSAGES` messages), this
        worker counts as inside a listener call (``_in_listener``, read by :meth:`_spread` and
        :meth:`submit`): nothing else runs meanwhile unless a listener call (or a send-back)
        waits, so the count is only read while one does.

        The listener time of a stretch is read from the clock after every call while calls
        are slow, and after every few while they are fast (:data:`CLOCK_EVERY_MAX` calls at
        most, each under :data:`FAST_CALL_S` on average): the calls run back to back, so the
        clock read after the last of them gives their total. A listener that turns slow is
        seen within those few calls, and then read after every call again."""
        work, runner, size = self._work, self._runner, self._batch_size
        listener = runner.awaitable_listener
        success = ConsumeResult.CONSUME_SUCCESS
        perf_counter = time.perf_counter
        loop = asyncio.get_running_loop()
        flush_s = DONE_FLUSH_MS / 1000
        flush_calls = -(-DONE_FLUSH_MESSAGES // size)
        # Successful batches of done_pq not yet finished (see the class docstring), their calls
        # and listener seconds; the calls after the first `clocked` ended after the clock read
        # `started`, which is read again after call `check_at`. The calls between two reads
        # (clock_every) are the service's, so that every worker follows what one has seen.
        done_mq: MessageQueue | None = None
        done_pq: ProcessQueue | None = None
        done: list[MessageExt] = []
        calls = clocked = 0
        rt_s = 0.0
        clock_every = self._clock_every
        check_at = min(clock_every, flush_calls)
        self._in_listener += 1
        try:
            while work:
                run = work[0]
                pq = run.pq
                if pq.dropped:
                    work.popleft()
                    continue
                mq = run.mq
                run_messages = run.messages
                end_of_run = run.end
                if pq is not done_pq:
                    if done_mq is not None and done_pq is not None and done:
                        self._finish(done_mq, done_pq, done, calls, rt_s * 1000)
                    done_mq, done_pq, done, calls, rt_s = mq, pq, [], 0, 0.0
                    clocked, check_at = 0, min(clock_every, flush_calls)
                if not self._spread_scheduled and self._idle:
                    self._spread_scheduled = True
                    loop.call_soon(self._spread)
                started = perf_counter()
                # The batches of this run, while it is still the head's (another worker may
                # take some while a call waits, or empty it).
                while run.position < end_of_run:
                    start = run.position
                    run.position = end = start + size
                    if end >= end_of_run and work and work[0] is run:
                        work.popleft()
                    messages = run_messages[start:end]
                    if listener is not None:
                        try:
                            result = await listener(messages)
                        except asyncio.CancelledError:
                            raise
                        except Exception:
                            result = runner.raised(messages, mq)
                        if result is not success:
                            result = runner.outcome(result, mq)
                    else:
                        result = await runner.run(messages, mq)
                    if pq.dropped:
                        # The queue belongs to another member now; it re-consumes from the
                        # committed offset.
                        break
                    if result is not success:
                        # This call's time: its share of what the clock says since it was read.
                        unclocked = calls - clocked
                        elapsed_s = (perf_counter() - started) / (unclocked + 1)
                        rt_s += elapsed_s * unclocked
                        clocked, check_at = calls, min(calls + 1, flush_calls)
                        clock_every = self._clock_every = 1
                        await self._failed(mq, pq, messages, elapsed_s * 1000)
                        started = perf_counter()
                        continue
                    done += messages
                    calls += 1
                    if calls < check_at:
                        continue
                    finished = perf_counter()
                    elapsed_s = finished - started
                    started = finished
                    rt_s += elapsed_s
                    if elapsed_s >= FAST_CALL_S * (calls - clocked):
                        clock_every = self._clock_every = 1
                    elif clock_every < CLOCK_EVERY_MAX:
                        clock_every = self._clock_every = clock_every * 2
                    clocked = calls
                    check_at = calls + clock_every
                    if check_at > flush_calls:
                        check_at = flush_calls
                    if calls >= flush_calls or rt_s >= flush_s:
                        self._finish(mq, pq, done, calls, rt_s * 1000)
                        done, calls, rt_s = [], 0, 0.0
                        self._in_listener -= 1
                        try:
                            await asyncio.sleep(0)  # let the pulls (and the other workers) run
                        finally:
                            self._in_listener += 1
                        started = perf_counter()
                        # Another worker may have seen the listener turn slow meanwhile.
                        clock_every = self._clock_every
                        clocked, check_at = 0, min(clock_every, flush_calls)
                        if not self._spread_scheduled and self._idle and work:
                            self._spread_scheduled = True
                            loop.call_soon(self._spread)
                if calls > clocked:
                    rt_s += perf_counter() - started
                    clocked = calls
        finally:
            self._in_listener -= 1
            if done_mq is not None and done_pq is not None and done:
                self._finish(done_mq, done_pq, done, calls, rt_s * 1000)

    async def _consume_in_thread(self) -> None:
        """Hand batches of the FIFO to a pool thread (see the class docstring), then finish them."""
        # A listener fast so far may block now, with the batches behind it waiting for this
        # one thread: past SLOW_HOP_S, the others are woken.
        watch = (
            self._loop.call_later(SLOW_HOP_S, self._spread_threads)
            if self._claims.fast and self._loop
            else None
        )
        try:
            group, failed = await self._runner.run_in_thread(self._claims.run)
        finally:
            if watch is not None:
                watch.cancel()
        if group is not None:
            self._finish_gathered(group)
        for mq, pq, messages, rt_ms in failed:
            if not pq.dropped:
                await self._failed(mq, pq, messages, rt_ms)

    def _finish_gathered(self, group: Gathered) -> None:
        """What a pool thread gathered (see ``ThreadClaims.run``) is finished."""
        if group.messages:
            self._finish(group.mq, group.pq, group.messages, group.calls, group.rt_s * 1000)

    def _finish(
        self, mq: MessageQueue, pq: ProcessQueue, messages: list[MessageExt], calls: int, rt_ms: float
    ) -> None:
        """``calls`` listener calls on ``messages`` of ``pq`` succeeded: out of the process queue,
        the offset moves, the statistics count them."""
        if pq.dropped:
            return
        self._sink.on_consumed(mq, pq, pq.remove_messages(messages))
        if self._stats is not None:
            self._stats.on_consumed(mq.topic, len(messages), 0, rt_ms, _now_ms(), calls)

    async def _failed(
        self, mq: MessageQueue, pq: ProcessQueue, messages: list[MessageExt], elapsed_ms: float
    ) -> None:
        """A batch the listener did not consume: sent back, or kept for a local retry."""
        if self._stats is not None:
            self._stats.on_consumed(mq.topic, 0, len(messages), elapsed_ms, _now_ms())
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
        """Wait until queued batches are consumed and finished (or ``timeout_s`` passes)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while (self._work or self._busy) and loop.time() < deadline:
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self._claims.stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self._runner.close()


ConsumeService = ConcurrentConsumeService | OrderlyConsumeService
