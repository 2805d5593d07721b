"""Pops waiting for something to deliver: parked by topic, woken by arrivals and by the engine.

A pop with a poll time and nothing to deliver waits on the topics it reads (the topic, and for
a concurrent group its pop retry topic) until a message arrives on one of them (the store's
arrival listener, called from any thread), the engine wakes the topic (an ack that frees a FIFO
message group, a change of invisible time), its wake-up time comes, or the broker stops.

An arrival is never lost between a pop's read and its parking: a pop first *watches* the topics
it may wait on (:meth:`PopWaiters.watch`), and an arrival on a watched topic is handed to the
loop as a callback, which runs after the turn in which the pop read and parked. (A pop's own
revive stores copies in its retry topic that the store dispatches a moment later, often in just
that gap.)
"""

from __future__ import annotations

import asyncio
import threading


class PopWaiters:
    """Parked pops by topic; one event loop wakes them."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._watched: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread_id = 0

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop the pops run on (the arrival listener hands wake-ups to it)."""
        self._loop = loop
        self._loop_thread_id = threading.get_ident()

    def watch(self, topics: tuple[str, ...]) -> None:
        """From now on, hand every arrival on ``topics`` to the loop (called before a pop reads)."""
        self._watched.update(topics)

    async def wait(self, topics: tuple[str, ...], timeout_ms: int) -> None:
        """Park until one of ``topics`` is woken or ``timeout_ms`` passed."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        for topic in topics:
            self._waiters.setdefault(topic, set()).add(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout_ms / 1000)
        except TimeoutError:
            pass
        finally:
            for topic in topics:
                waiters = self._waiters.get(topic)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._waiters[topic]

    def on_arrival(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        """The store's arrival listener; safe to call from any thread."""
        if topic not in self._watched or self._loop is None:
            return
        if threading.get_ident() == self._loop_thread_id:
            self._loop.call_soon(self.wake, topic)  # after the turn that may be about to park
        else:
            try:
                self._loop.call_soon_threadsafe(self.wake, topic)
            except RuntimeError:
                pass  # the loop is closed: the broker is stopping

    def wake(self, topic: str) -> None:
        for waiter in self._waiters.get(topic, ()):
            if not waiter.done():
                waiter.set_result(None)

    def wake_all(self) -> None:
        for topic in list(self._waiters):
            self.wake(topic)
