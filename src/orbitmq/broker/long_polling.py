"""Long polling: a pull that finds nothing new is parked until a message arrives or it expires.

Theory of operation. A PULL_MESSAGE with the SUSPEND bit that finds no new message (the
requested queue offset equals the queue's max offset) is *parked*: its handler leaves a
callback (:meth:`LongPollingService.park`; :meth:`LongPollingService.hold` awaits one) in
:class:`PullHoldTable`, keyed by (topic, queue_id). Two things resolve it:

- *arrival*: the store calls its arrival listener after each dispatch with the queue's new max
  offset. :meth:`LongPollingService.on_arrival` runs on the putting thread; when that is not the
  event-loop thread it hops over with ``loop.call_soon_threadsafe``. Every parked pull on that
  queue whose queue offset is below the new max offset wakes with ``True``;
- *expiry*: a service task ticks every ``check_interval_ms`` and resolves pulls whose deadline
  (``suspendTimeoutMillis`` after parking) has passed with ``False``.

The handler then re-runs the read once, without suspending again, so an expired poll answers
PULL_NOT_FOUND. The callback runs at once, on the loop: a pull woken by a send put on the loop
is read and answered in the turn that read the send, where a task awaiting a future would run
a turn later and answer in the turn after that. Every ``recheck_interval_ms`` the service also
compares each parked queue with the store's max offset, as RocketMQ's PullRequestHoldService
does, so that an arrival that raced with parking can delay a pull by at most that interval;
:meth:`LongPollingService.park` closes the common race directly by re-reading the max offset
right after parking.

:class:`PullHoldTable` is pure bookkeeping (time passed in, no asyncio) so it is unit-tested
without an event loop.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class ParkedPull(Generic[T]):
    """One parked pull request and whatever the caller needs to resume it (``payload``)."""

    topic: str
    queue_id: int
    queue_offset: int
    deadline_ms: int
    payload: T
    done: bool = field(default=False)


class PullHoldTable(Generic[T]):
    """Parked pulls by queue, with a deadline heap for expiry.

    An entry leaves the table exactly once: woken, expired or cancelled. The heap keeps removed
    entries until they surface (lazy deletion), so cancel is O(queue's parked count).
    """

    def __init__(self) -> None:
        self._by_queue: dict[tuple[str, int], list[ParkedPull[T]]] = {}
        self._deadlines: list[tuple[int, int, ParkedPull[T]]] = []
        self._sequence = 0
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def park(
        self, topic: str, queue_id: int, queue_offset: int, deadline_ms: int, payload: T
    ) -> ParkedPull[T]:
        parked = ParkedPull(topic, queue_id, queue_offset, deadline_ms, payload)
        self._by_queue.setdefault((topic, queue_id), []).append(parked)
        # The sequence number breaks ties so the heap never compares two ParkedPull objects.
        self._sequence += 1
        heapq.heappush(self._deadlines, (deadline_ms, self._sequence, parked))
        self._count += 1
        return parked

    def wake(self, topic: str, queue_id: int, max_queue_offset: int) -> list[ParkedPull[T]]:
        """Remove and return the pulls on this queue that now have a message to read."""
        waiting = self._by_queue.get((topic, queue_id))
        if not waiting:
            return []
        ready = [parked for parked in waiting if parked.queue_offset < max_queue_offset]
        if not ready:
            return []
        remaining = [parked for parked in waiting if parked.queue_offset >= max_queue_offset]
        if remaining:
            self._by_queue[(topic, queue_id)] = remaining
        else:
            del self._by_queue[(topic, queue_id)]
        for parked in ready:
            parked.done = True
        self._count -= len(ready)
        return ready

    def pop_expired(self, now_ms: int) -> list[ParkedPull[T]]:
        """Remove and return the pulls whose deadline is at or before ``now_ms``."""
        expired: list[ParkedPull[T]] = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, _, parked = heapq.heappop(self._deadlines)
            if not parked.done:
                self._remove(parked)
                expired.append(parked)
        return expired

    def cancel(self, parked: ParkedPull[T]) -> None:
        """Forget a parked pull (its handler gave up); a no-op when it already left."""
        if not parked.done:
            self._remove(parked)

    def pop_all(self) -> list[ParkedPull[T]]:
        """Remove and return every parked pull (shutdown)."""
        everything = [parked for waiting in self._by_queue.values() for parked in waiting]
        for parked in everything:
            parked.done = True
        self._by_queue.clear()
        self._deadlines.clear()
        self._count = 0
        return everything

    def parked_queues(self) -> list[tuple[str, int]]:
        """Every (topic, queue_id) with at least one parked pull."""
        return list(self._by_queue)

    def _remove(self, parked: ParkedPull[T]) -> None:
        parked.done = True
        key = (parked.topic, parked.queue_id)
        waiting = self._by_queue.get(key, [])
        if parked in waiting:
            waiting.remove(parked)
        if not waiting:
            self._by_queue.pop(key, None)
        self._count -= 1


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class LongPollingService:
    """Parks pulls on the event loop and wakes them on arrival or expiry (see module docstring).

    Args:
        max_queue_offset_of: the store's ``get_max_queue_offset(topic, queue_id)``.
        check_interval_ms: how often expiry is checked (bounds the lateness of a timeout).
        recheck_interval_ms: how often parked queues are compared with the store.
    """

    def __init__(
        self,
        max_queue_offset_of: Callable[[str, int], int],
        *,
        check_interval_ms: int = 100,
        recheck_interval_ms: int = 5000,
    ) -> None:
        self._max_queue_offset_of = max_queue_offset_of
        self._check_interval_ms = check_interval_ms
        self._recheck_interval_ms = recheck_interval_ms
        self._table: PullHoldTable[Callable[[bool], None]] = PullHoldTable()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread_id = 0
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    @property
    def parked_count(self) -> int:
        return len(self._table)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread_id = threading.get_ident()
        self._task = asyncio.create_task(self._run(), name="long-polling")

    async def stop(self) -> None:
        """Stop ticking and release every parked pull (each answers PULL_NOT_FOUND)."""
        # From now on hold() returns at once, so no pull parks after the release below.
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        for parked in self._table.pop_all():
            _release(parked, False)

    def park(
        self, topic: str, queue_id: int, queue_offset: int, timeout_ms: int, on_wake: Callable[[bool], None]
    ) -> None:
        """Park until a message past ``queue_offset`` arrives (``on_wake(True)``) or ``timeout_ms``
        passes (``on_wake(False)``); called on the loop, once, maybe before this returns.

        ``on_wake`` runs where the wake comes from (a put on the loop, the expiry tick, the
        recheck, :meth:`stop`) and must not raise.
        """
        if self._stopped:
            on_wake(False)
            return
        parked = self._table.park(topic, queue_id, queue_offset, _now_ms() + max(timeout_ms, 0), on_wake)
        # A put on another thread may have landed between the caller's read and parking.
        if self._max_queue_offset_of(topic, queue_id) > queue_offset:
            self._table.cancel(parked)
            _release(parked, True)

    async def hold(self, topic: str, queue_id: int, queue_offset: int, timeout_ms: int) -> bool:
        """:meth:`park` for a caller that awaits: True once a message past ``queue_offset``
        arrives, False once ``timeout_ms`` passes."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def woken(arrived: bool) -> None:
            if not future.done():
                future.set_result(arrived)

        self.park(topic, queue_id, queue_offset, timeout_ms, woken)
        return await future

    def on_arrival(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        """The store's arrival listener; safe to call from any thread."""
        loop = self._loop
        if loop is None or not self._table:
            return
        if threading.get_ident() == self._loop_thread_id:
            self._wake(topic, queue_id, max_queue_offset)
        else:
            try:
                loop.call_soon_threadsafe(self._wake, topic, queue_id, max_queue_offset)
            except RuntimeError:
                # The loop is closed: the broker is shutting down and nobody is parked any more.
                pass

    def wake_queue(self, topic: str, queue_id: int) -> None:
        """Wake every pull parked on a queue now (its offsets were reset): each re-reads once."""
        self._wake(topic, queue_id, 1 << 62)

    def _wake(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        for parked in self._table.wake(topic, queue_id, max_queue_offset):
            _release(parked, True)

    async def _run(self) -> None:
        next_recheck_ms = _now_ms() + self._recheck_interval_ms
        while True:
            await asyncio.sleep(self._check_interval_ms / 1000)
            now_ms = _now_ms()
            for parked in self._table.pop_expired(now_ms):
                _release(parked, False)
            if now_ms >= next_recheck_ms:
                next_recheck_ms = now_ms + self._recheck_interval_ms
                self._recheck()

    def _recheck(self) -> None:
        for topic, queue_id in self._table.parked_queues():
            try:
                max_queue_offset = self._max_queue_offset_of(topic, queue_id)
            except Exception:
                logger.exception("long polling: reading max offset of %s/%d failed", topic, queue_id)
                continue
            self._wake(topic, queue_id, max_queue_offset)


def _spent(_value: bool) -> None:
    """What a parked pull's entry holds once released (see :func:`_release`)."""


def _release(parked: ParkedPull[Callable[[bool], None]], value: bool) -> None:
    """Call back a parked pull that left the table. Its entry may stay in the deadline heap until
    its deadline (lazy deletion), so it lets go of the callback first: a parked pull's callback
    holds its request and answer, which must not live that long."""
    on_wake, parked.payload = parked.payload, _spent
    on_wake(value)
