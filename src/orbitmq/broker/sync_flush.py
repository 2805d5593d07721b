"""SYNC_FLUSH answers: a lone put of a loop turn is flushed on the event loop, others by group commit.

Under SYNC_FLUSH a send is answered once its records are on disk. The store's flush thread
(``CommitLogFlusher``) flushes for every put that waits: puts join a group and one flush
covers the group. Waiting for it from the event loop costs two thread hand-offs per round
trip (wake the flush thread; be woken by it through the loop's self-pipe), about a third of
the time a lone sync send spends on the broker besides the sync itself, and more when an
idle CPU must be woken for each.

So the waits of one loop turn are gathered, and when the turn ends (a callback scheduled by
its first wait) with exactly one put waiting and the flush thread not flushing at that
moment, the loop flushes itself (:meth:`MessageStore.flush_here`), as Redis does under
``appendfsync always``: the loop is blocked for one sync nobody else was waiting for. Two
or more puts in a turn, or a flush already running, are left to the thread, whose group
commit runs beside the loop, so concurrent producers keep sharing flushes and the loop keeps
serving pulls meanwhile.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Future

from orbitmq.store.message_store import MessageStore

__all__ = ["SyncFlushWaits"]


class SyncFlushWaits:
    """The flush waits of a broker's SYNC_FLUSH puts, on one event loop."""

    def __init__(self) -> None:
        self._store: MessageStore | None = None
        self._turn: list[tuple[Future[bool], int, asyncio.Future[bool]]] = []
        self._shared: dict[Future[bool], asyncio.Future[bool]] = {}

    def wait(self, store: MessageStore, group: Future[bool], end_offset: int) -> asyncio.Future[bool]:
        """Resolves True once the put whose records end at ``end_offset`` is durable.

        ``group`` is the put's flush future from ``store``; False means the flush timed
        out (FLUSH_DISK_TIMEOUT). Each put gets its own loop future, so a handler cancelled
        while waiting (its connection closed) cancels nothing another put waits for.
        """
        loop = asyncio.get_running_loop()
        if not self._turn:
            loop.call_soon(self._end_turn)
        self._store = store
        waiter = loop.create_future()
        self._turn.append((group, end_offset, waiter))
        return waiter

    def _end_turn(self) -> None:
        turn, self._turn = self._turn, []
        store = self._store
        if store is None:
            return
        if len(turn) == 1:
            _, end_offset, waiter = turn[0]
            if not waiter.done() and store.flush_here(end_offset):  # else flush_here woke the thread
                waiter.set_result(True)
                return
        # The puts were made without waking the flush thread (``wake_flusher=False``).
        store.wake_flusher()
        for group, _, waiter in turn:
            if not waiter.done():
                self._shared_wait(group).add_done_callback(functools.partial(_settle, waiter))

    def _shared_wait(self, group: Future[bool]) -> asyncio.Future[bool]:
        """One loop future per flush group, however many puts of the turn share the group."""
        shared = self._shared.get(group)
        if shared is None:
            shared = self._shared[group] = asyncio.wrap_future(group)
            shared.add_done_callback(lambda _: self._shared.pop(group, None))
        return shared


def _settle(waiter: asyncio.Future[bool], shared: asyncio.Future[bool]) -> None:
    if waiter.done():
        return
    if shared.cancelled():
        waiter.cancel()
    elif (error := shared.exception()) is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(shared.result())
