"""A plain listener's batches in the pool threads: claims from the consume FIFO, one call per batch.

Theory of operation. A concurrent consume service (``orbitmq.client._consume_service``) keeps
one FIFO of :class:`ConsumeRun` (the messages of one pull of a queue, cut into batches as
they are taken). With a plain listener and no hook, a consume worker hands a pool thread
:meth:`ThreadClaims.run` (through ``ListenerRunner.run_in_thread``): one hop to a thread runs
the batches it claims from the FIFO under a lock, one listener call each, until the FIFO is
empty or about ``THREAD_RUN_MAX_S`` passed, rather than one hop per batch. A thread claims
one batch at a time while the listener is slow, several while it is fast, and gathers what
succeeded per queue itself (:class:`Gathered`). Each group is finished on the loop, one call
for its messages: handed over (``call_soon_threadsafe``) as soon as the thread moves on to
another queue or has gathered the service's flush size, the thread going on meanwhile, or
returned at the end of the hop. A hop thus costs its two hand-overs (to the thread and back)
once per FIFO emptied rather than once per few hundred messages: on a busy host each one
waits for the scheduler, and the pulls meanwhile wait for the room their finishing makes.

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
from typing import Any

from orbitmq.client._listener_runner import THREAD_RUN_MAX_S, ConsumeResult, ListenerRunner
from orbitmq.client._process_queue import ProcessQueue
from orbitmq.model.message import MessageExt, MessageQueue

__all__ = [
    "CLAIM_MAX_BATCHES",
    "FAST_CALL_S",
    "ConsumeRun",
    "Failed",
    "Gathered",
    "ThreadClaims",
    "call_batches",
]

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


def call_batches(
    listener: Callable[[list[MessageExt]], object],
    mq: MessageQueue,
    pq: ProcessQueue,
    chunk: list[MessageExt],
    size: int,
    group: Gathered,
    failed: list[Failed],
    started: float,
) -> int:
    """In a pool thread: the listener on each batch of ``size`` messages of ``chunk``, until
    ``pq`` is dropped (the rest is the next owner's, from the committed offset). What succeeded
    joins ``group``, each batch that did not joins ``failed`` with the ms since ``started`` (its
    own time is not known: one clock read per claim). Returns the number of failed batches."""
    success = ConsumeResult.CONSUME_SUCCESS
    single = size == 1
    # Messages (each a batch of its own, wrapped at its call) or batches.
    batches: list[Any] = (
        chunk if single else [chunk[index : index + size] for index in range(0, len(chunk), size)]
    )
    failures: list[list[MessageExt]] = []
    for batch in batches:
        if pq.dropped:
            return len(failures)  # its messages are never finished: nothing to gather
        messages: list[MessageExt] = [batch] if single else batch
        try:
            result = listener(messages)
            if result is not success:
                result = ListenerRunner.outcome(result, mq)
        except Exception:
            result = ListenerRunner.raised(messages, mq)
        if result is not success:
            failures.append(messages)
            failed.append((mq, pq, messages, (time.perf_counter() - started) * 1000))
    if not failures:
        group.messages += chunk
        return 0
    not_consumed = {id(message) for messages in failures for message in messages}
    group.messages += [message for message in chunk if id(message) not in not_consumed]
    return len(failures)


class ThreadClaims:
    """The pool threads' side of one consume service: what they claim from its FIFO, and how.

    Args:
        work: the service's FIFO of runs (appended to on the loop, taken from under the lock).
        listener: the plain listener.
        batch_size: messages per listener call.
        spread: called on the loop when a claim found the listener slow.
        finish: called on the loop with what a thread gathered, while the thread goes on.
        flush_messages: how many messages a thread gathers before it hands them to ``finish``.
    """

    def __init__(
        self,
        work: deque[ConsumeRun],
        listener: Callable[[list[MessageExt]], object],
        batch_size: int,
        spread: Callable[[], None],
        finish: Callable[[Gathered], None],
        flush_messages: int,
    ) -> None:
        self._work = work
        self._listener = listener
        self._size = batch_size
        self._spread = spread
        self._finish = finish
        self._flush_calls = -(-flush_messages // batch_size)
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

    def run(self) -> tuple[Gathered | None, list[Failed]]:
        """In a pool thread: the listener on batches claimed from the FIFO, one call per batch,
        until the FIFO is empty or :data:`THREAD_RUN_MAX_S` passed (a claim in hand is finished
        first). What succeeded is gathered per run of one queue, with its calls and listener
        time, and handed to the loop (``finish``) every ``flush_messages`` messages while the
        thread goes on; the last group is returned, with the failed batches and their ms.

        A claim is one batch, or after calls that each took under :data:`FAST_CALL_S` twice
        the last claim's batches (up to :data:`CLAIM_MAX_BATCHES`): a fast listener takes
        the FIFO's lock once for many batches, a slow one batch by batch, so that the other
        threads take the rest meanwhile."""
        listener = self._listener
        size = self._size
        flush_calls = self._flush_calls
        perf_counter = time.perf_counter
        failed: list[Failed] = []
        group: Gathered | None = None
        claim = 1
        hop_started = claim_started = perf_counter()
        while True:
            taken = self._claim(claim)
            if taken is None:
                break
            mq, pq, chunk, batches = taken
            if group is not None and (group.pq is not pq or group.calls >= flush_calls):
                self._post(self._finish, group)
                group = None
            if group is None:
                group = Gathered(mq, pq)
            # The claim's listener time runs from the clock read that ended the last one.
            failures = call_batches(listener, mq, pq, chunk, size, group, failed, claim_started)
            finished = perf_counter()
            group.calls += batches - failures
            group.rt_s += finished - claim_started
            if finished - claim_started >= FAST_CALL_S * batches:
                claim = 1
                if self.fast and self._work:
                    self.fast = False
                    self._post(self._spread)
            elif claim < CLAIM_MAX_BATCHES:
                claim *= 2
            if finished - hop_started >= THREAD_RUN_MAX_S:
                break
            claim_started = finished
        if claim > 1:
            self.fast = True
        return group, failed

    def _post(self, callback: Callable[..., object], *args: object) -> None:
        """From a pool thread: ``callback(*args)`` at the loop's next turn. Nothing when the
        loop is closed: the consumer stopped, and what was not finished is consumed again from
        the committed offset."""
        loop = self.loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(callback, *args)
            except RuntimeError:
                pass

    def _claim(self, batches: int) -> tuple[MessageQueue, ProcessQueue, list[MessageExt], int] | None:
        """Up to ``batches`` batches of the run at the FIFO's head (in a pool thread): its queue,
        their messages and how many batches they are; or None: nothing left, or stopping."""
        size = self._size
        with self._lock:
            work = self._work
            while work and not self.stopping:
                run = work[0]
                if run.pq.dropped:
                    work.popleft()
                    continue
                start = run.position
                run.position = end = start + batches * size
                if end >= run.end:
                    work.popleft()
                    end = run.end
                    batches = -(-(end - start) // size)
                return run.mq, run.pq, run.messages[start:end], batches
        return None
