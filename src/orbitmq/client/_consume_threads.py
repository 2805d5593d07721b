"""A plain listener's batches in the pool threads: claims from the consume FIFO, one call per batch.

Theory of operation. A concurrent consume service (``orbitmq.client._consume_service``) keeps
one FIFO of :class:`ConsumeRun` (the messages of one pull of a queue, cut into batches as
they are taken). With a plain listener and no hook, a consume worker hands a pool thread
:meth:`ThreadClaims.run` (through ``ListenerRunner.run_in_thread``): one hop to a thread runs
several batches claimed from the FIFO under a lock, one listener call each, rather than one
hop per batch. A thread claims one batch at a time while the listener is slow, several while
it is fast, and gathers what succeeded per queue itself (:class:`Gathered`), so the loop
finishes each hop's messages with one call per queue.

While the claims are fast (:attr:`ThreadClaims.fast`) the service wakes one worker (one
thread) per pull rather than one per batch: the threads would only queue for the GIL, and on
a busy host every hand-over of the GIL between them waits for the scheduler. The first slow
claim asks the service, on the loop, to wake a worker per batch left (``spread``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable

from orbitmq.client._listener_runner import (
    THREAD_RUN_BATCHES,
    THREAD_RUN_MAX_S,
    ConsumeResult,
    ListenerRunner,
)
from orbitmq.client._process_queue import ProcessQueue
from orbitmq.model.message import MessageExt, MessageQueue

__all__ = ["CLAIM_MAX_BATCHES", "FAST_CALL_S", "ConsumeRun", "Failed", "Gathered", "ThreadClaims"]

FAST_CALL_S = 0.0001
"""A plain listener's call under this long lets its pool thread claim more batches at once ..."""
CLAIM_MAX_BATCHES = 32
"""... up to this many."""


class ConsumeRun:
    """The messages of one pull (or of one local retry) of a queue, cut into batches as taken."""

    __slots__ = ("mq", "pq", "messages", "position", "end")

    def __init__(self, mq: MessageQueue, pq: ProcessQueue, messages: list[MessageExt]) -> None:
        self.mq = mq
        self.pq = pq
        self.messages = messages
        self.position = 0  # index of the first message not yet taken
        self.end = len(messages)


class Gathered:
    """Successful batches of one queue that a pool thread ran back to back."""

    __slots__ = ("mq", "pq", "messages", "calls", "rt_s")

    def __init__(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        self.mq = mq
        self.pq = pq
        self.messages: list[MessageExt] = []
        self.calls = 0
        self.rt_s = 0.0


Failed = tuple[MessageQueue, ProcessQueue, list[MessageExt], float]
"""A batch the listener did not consume in a pool thread, and the ms its call took."""


class ThreadClaims:
    """The pool threads' side of one consume service: what they claim from its FIFO, and how.

    Args:
        work: the service's FIFO of runs (appended to on the loop, taken from under the lock).
        listener: the plain listener.
        batch_size: messages per listener call.
        spread: called on the loop when a claim found the listener slow.
    """

    def __init__(
        self,
        work: deque[ConsumeRun],
        listener: Callable[[list[MessageExt]], object],
        batch_size: int,
        spread: Callable[[], None],
    ) -> None:
        self._work = work
        self._listener = listener
        self._size = batch_size
        self._spread = spread
        self._lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping = False
        """No more claims (the service stops)."""
        self.fast = False
        """Whether the last claims were fast: then one pool thread at a time takes the FIFO."""

    def batches_left(self) -> int:
        """Batches of the FIFO not yet claimed (the threads take from it meanwhile)."""
        with self._lock:
            return sum(-(-max(run.end - run.position, 0) // self._size) for run in self._work)

    def run(self) -> tuple[list[Gathered], list[Failed]]:
        """In a pool thread: the listener on batches claimed from the FIFO, one call per batch,
        until :data:`THREAD_RUN_BATCHES` calls or :data:`THREAD_RUN_MAX_S` (a claim in hand is
        finished first). Returns the successful messages gathered per run of one queue, with
        their calls and listener ms, and the failed batches with their ms.

        A claim is one batch, or after calls that each took under :data:`FAST_CALL_S` twice
        the last claim's batches (up to :data:`CLAIM_MAX_BATCHES`): a fast listener takes
        the FIFO's lock once for many batches, a slow one batch by batch, so that the other
        threads take the rest meanwhile."""
        listener = self._listener
        loop = self.loop
        size = self._size
        success = ConsumeResult.CONSUME_SUCCESS
        perf_counter = time.perf_counter
        done: list[Gathered] = []
        failed: list[Failed] = []
        group: Gathered | None = None
        claim = 1
        calls_total = 0
        hop_started = perf_counter()
        while calls_total < THREAD_RUN_BATCHES:
            taken = self._claim(claim * size)
            if taken is None:
                break
            mq, pq, chunk = taken
            if group is None or group.pq is not pq:
                group = Gathered(mq, pq)
                done.append(group)
            gathered = group.messages
            batches = -(-len(chunk) // size)
            ok = batches
            claim_started = perf_counter()
            for index in range(0, len(chunk), size):
                if pq.dropped:
                    break  # the rest is the next owner's, from the committed offset
                messages = chunk[index : index + size]
                try:
                    result = listener(messages)
                    if result is not success:
                        result = ListenerRunner.outcome(result, mq)
                except Exception:
                    result = ListenerRunner.raised(messages, mq)
                if result is success:
                    gathered += messages
                else:
                    # Its own time is not known (one clock read per claim): the claim's so far.
                    failed.append((mq, pq, messages, (perf_counter() - claim_started) * 1000))
                    ok -= 1
            finished = perf_counter()
            calls_total += batches
            group.calls += ok
            group.rt_s += finished - claim_started
            if finished - claim_started >= FAST_CALL_S * batches:
                claim = 1
                if self.fast and self._work and loop is not None:
                    self.fast = False
                    loop.call_soon_threadsafe(self._spread)
            elif claim < CLAIM_MAX_BATCHES:
                claim *= 2
            if finished - hop_started >= THREAD_RUN_MAX_S:
                break
        if claim > 1:
            self.fast = True
        return done, failed

    def _claim(self, count: int) -> tuple[MessageQueue, ProcessQueue, list[MessageExt]] | None:
        """Up to ``count`` messages of the run at the FIFO's head (in a pool thread), or None:
        nothing left, or stopping."""
        with self._lock:
            work = self._work
            while work and not self.stopping:
                run = work[0]
                if run.pq.dropped:
                    work.popleft()
                    continue
                start = run.position
                run.position = end = start + count
                if end >= run.end:
                    work.popleft()
                return run.mq, run.pq, run.messages[start:end]
        return None
