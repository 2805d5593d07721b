"""The CommitLog's flush thread: periodic sync (ASYNC_FLUSH) or group commit (SYNC_FLUSH).

See :class:`CommitLogFlusher`; :class:`FlushFuture` is the future a group of puts waits on.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orbitmq.store.commit_log import CommitLog

_log = logging.getLogger(__name__)


class FlushFuture(Future[bool]):
    """The future of a flush group, whose blocking :meth:`result` scales to many waiting threads.

    ``Future.result`` sleeps on the future's one shared Condition, so when a group commit
    resolves the future that 64 threads wait on, every woken thread must re-take that lock in
    turn before it can return: a convoy that costs more than the fsync it waited for. Here
    each waiting thread sleeps on a lock of its own, released by the resolution, and finds the
    result already final when it wakes. Callbacks and ``asyncio.wrap_future`` work as for any
    Future.
    """

    def __init__(self) -> None:
        super().__init__()
        self._sleepers: list[threading.Lock] = []
        self._sleepers_lock = threading.Lock()

    def result(self, timeout: float | None = None) -> bool:
        if not self.done():
            sleeper = threading.Lock()
            sleeper.acquire()
            with self._sleepers_lock:
                # Checked again under the lock: a resolution that already woke the sleepers
                # must not leave this one waiting.
                sleeping = not self.done()
                if sleeping:
                    self._sleepers.append(sleeper)
            if sleeping:
                sleeper.acquire(timeout=-1 if timeout is None else timeout)
        return super().result(timeout=0)

    def set_result(self, result: bool) -> None:
        super().set_result(result)
        self._wake_sleepers()

    def set_exception(self, exception: BaseException | None) -> None:
        super().set_exception(exception)
        self._wake_sleepers()

    def _wake_sleepers(self) -> None:
        with self._sleepers_lock:
            sleepers, self._sleepers = self._sleepers, []
        for sleeper in sleepers:
            sleeper.release()


class _FlushGroup:
    """Puts waiting for one flush: the highest end offset among them, the first's deadline."""

    __slots__ = ("deadline", "end_offset", "future", "woken")

    def __init__(self, end_offset: int, deadline: float, future: Future[bool]) -> None:
        self.end_offset = end_offset
        self.deadline = deadline
        self.future = future
        self.woken = False  # the thread was told about this group


class CommitLogFlusher:
    """The flush thread: periodic fdatasync (ASYNC_FLUSH) or group commit (SYNC_FLUSH).

    Under SYNC_FLUSH puts join the open *flush group*: (highest end offset, deadline,
    future), the deadline and future being those of its first put. The thread takes every
    group waiting at that moment, runs one flush, which covers them all (group commit), and
    resolves each group's future True; a group still not covered by its deadline resolves
    False (FLUSH_DISK_TIMEOUT). Sharing one future per group makes a put's cost one lock
    round trip instead of a future, a wake-up and a resolution per put; the price is that a
    put joining a group late may time out up to one flush round (normally about a
    millisecond) before its own timeout would have passed. Under ASYNC_FLUSH the thread
    flushes every ``interval_ms`` and puts get no future.

    :meth:`flush_here` lets a caller that has nothing else to do flush in its own thread
    instead, when the thread is not flushing at that moment: the broker's event loop does
    so for a lone SYNC_FLUSH put, sparing the two thread hand-offs of the round trip. One
    lock keeps the two from flushing at once; the groups a caller's flush covers are
    resolved by it.
    """

    def __init__(self, commit_log: CommitLog, sync: bool, interval_ms: int, timeout_ms: int) -> None:
        self._commit_log = commit_log
        self._sync = sync
        self._interval_s = interval_ms / 1000
        self._timeout_s = timeout_ms / 1000
        # Puts take the plain lock (a C-level context manager); the thread waits on the condition.
        self._lock = threading.Lock()
        self._condition = threading.Condition(self._lock)
        self._flushing = threading.Lock()  # held by whoever runs a flush: the thread or flush_here
        self._requests: list[_FlushGroup] = []
        self._open_group: _FlushGroup | None = None  # the group new puts join (not yet taken)
        self._stopping = False
        self._stopped = False  # the thread has finished; requests resolve at once
        self._thread = threading.Thread(target=self._run, name="orbitmq-commit-log-flush", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request(self, end_offset: int, wake: bool = True) -> Future[bool]:
        """A future resolved once ``end_offset`` is flushed (True) or the timeout passes (False).

        Puts waiting for the same flush share one future (see the class docstring). With
        ``wake`` False the thread is not told yet: the caller will call :meth:`flush_here`
        or :meth:`wake` (until then the thread still looks every 10 ms).
        """
        with self._lock:
            group = self._open_group
            if group is not None:
                if end_offset > group.end_offset:
                    group.end_offset = end_offset
            else:
                future: Future[bool] = FlushFuture()
                if self._stopped:
                    # A put that raced with close(): the final flush already ran (or failed).
                    future.set_result(end_offset <= self._commit_log.flushed_offset)
                    return future
                # Running futures cannot be cancelled: one waiter giving up (asyncio.wrap_future
                # propagates a cancelled await) must not cancel the answer of the whole group.
                future.set_running_or_notify_cancel()
                group = self._open_group = _FlushGroup(end_offset, time.monotonic() + self._timeout_s, future)
                self._requests.append(group)
            if wake and not group.woken:
                group.woken = True
                self._condition.notify()
            return group.future

    def wake(self) -> None:
        """Tell the thread about every group waiting (see ``wake`` of :meth:`request`)."""
        with self._lock:
            self._wake_locked()

    def _wake_locked(self) -> None:
        if any(not group.woken for group in self._requests):
            for group in self._requests:
                group.woken = True
            self._condition.notify()

    def _run(self) -> None:
        while True:
            with self._condition:
                if not self._requests and not self._stopping:
                    self._condition.wait(self._interval_s if not self._sync else 0.01)
                stopping = self._stopping
                requests, self._requests = self._requests, []
                self._open_group = None
            with self._flushing:
                try:
                    flushed = self._commit_log.flush()
                except OSError:
                    _log.exception("commit log flush failed")
                    flushed = self._commit_log.flushed_offset
            if self._resolve(requests, flushed):
                # Some puts are still not covered (a failing disk): do not spin.
                time.sleep(0.001)
            if stopping:
                with self._condition:
                    self._stopped = True
                    late, self._requests = self._requests, []
                    self._open_group = None
                self._resolve(late, self._commit_log.flushed_offset)
                return

    def flush_here(self, end_offset: int) -> bool:
        """Flush in the calling thread, unless a flush is running; True once ``end_offset`` is durable.

        False when the thread (or another caller) is flushing at that moment, when the flush
        fails, or after :meth:`stop`: the caller then waits for its put's future as usual,
        which the thread resolves (and which reports a failing disk as a timeout). Groups the
        flush covers are resolved here, so no later put joins them: True, or False past their
        deadline, as the thread answers.
        """
        if self._stopped or not self._flushing.acquire(blocking=False):
            self.wake()
            return False
        try:
            flushed = self._commit_log.flush()
        except OSError:
            _log.exception("commit log flush failed")
            self.wake()
            return False
        finally:
            self._flushing.release()
        covered = []
        with self._lock:
            if self._requests:
                covered = [group for group in self._requests if group.end_offset <= flushed]
                if covered:
                    self._requests = [group for group in self._requests if group.end_offset > flushed]
                    if self._open_group is not None and self._open_group.end_offset <= flushed:
                        self._open_group = None
                self._wake_locked()  # groups this flush did not cover are the thread's
        now = time.monotonic()
        for group in covered:
            if not group.future.done():
                group.future.set_result(now < group.deadline)  # late is a timeout, as in _resolve
        return end_offset <= flushed

    def _resolve(self, requests: list[_FlushGroup], flushed: int) -> bool:
        now = time.monotonic()
        waiting = []
        for group in requests:
            if now >= group.deadline:
                # Answer as RocketMQ does: late is a timeout even if the flush then succeeded.
                group.future.set_result(False)
            elif group.end_offset <= flushed:
                group.future.set_result(True)
            elif self._stopping:
                group.future.set_result(False)
            else:
                waiting.append(group)
        if waiting:
            with self._condition:
                self._requests[:0] = waiting
        return bool(waiting)

    def stop(self) -> None:
        """Flush once more, resolve every waiting future and end the thread."""
        with self._condition:
            self._stopping = True
            self._condition.notify()
        if self._thread.is_alive():
            self._thread.join()
