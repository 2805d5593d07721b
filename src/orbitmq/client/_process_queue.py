"""The messages a push consumer has pulled from one queue and not yet finished (RocketMQ ProcessQueue).

Theory of operation. Pulled messages enter in ascending queue offset order and leave when
their listener finishes, in any order when consumption is concurrent. The offset that may be
committed is the lowest offset still inside (every message below it is done), or one past the
highest offset ever seen when the queue is empty: committing further would skip an unfinished
message after a crash. A plain dict keeps insertion order and removal preserves the order of
the rest, so its first key is always the lowest offset inside; no sorting is needed.

Orderly consumption takes messages out in order into a "consuming" window
(:meth:`take_messages`), and either commits the window (:meth:`commit`) or puts it back for
a local retry (:meth:`make_available`).

``dropped`` is set when a rebalance gives the queue away: pulls and listeners of a dropped
queue stop, and their results no longer move the offset. Pure state: no I/O, no clock reads.
"""

from __future__ import annotations

from orbitmq.model.message import MessageExt


class ProcessQueue:
    """In-flight messages of one queue, the counters flow control reads, and lock/drop state."""

    __slots__ = (
        "_messages",
        "_consuming",
        "_max_seen_offset",
        "msg_size_bytes",
        "dropped",
        "locked",
        "last_lock_ms",
        "last_pull_ms",
        "consuming_orderly",
        "_known",
    )

    def __init__(self) -> None:
        self._messages: dict[int, MessageExt] = {}
        self._consuming: dict[int, MessageExt] = {}
        self._max_seen_offset = -1
        self.msg_size_bytes = 0
        self.dropped = False
        self.locked = False
        self.last_lock_ms = 0
        self.last_pull_ms = 0
        self.consuming_orderly = False
        self._known = False

    @property
    def msg_count(self) -> int:
        """Messages inside, including an orderly consumer's current window."""
        return len(self._messages) + len(self._consuming)

    @property
    def max_span(self) -> int:
        """Queue offsets between the lowest and highest message inside (0 when empty)."""
        if not self._messages:
            return 0
        return self._max_seen_offset - next(iter(self._messages))

    def cached_offset_range(self) -> tuple[int, int]:
        """Lowest and highest queue offset inside ((0, 0) when empty), for running info."""
        offsets = [*self._consuming, *self._messages]
        return (min(offsets), max(offsets)) if offsets else (0, 0)

    def put_messages(self, messages: list[MessageExt], next_begin_offset: int = -1) -> None:
        """Add freshly pulled messages (strictly ascending offsets, as a pull returns them; ones
        already seen are ignored).

        ``next_begin_offset`` is the pull's next offset: every offset below it that is not
        inside was filtered out by tag, so an empty queue may commit up to it.
        """
        if messages and messages[0].queue_offset > self._max_seen_offset:
            # The usual case, a pull past everything seen: no message to skip.
            offsets = [message.queue_offset for message in messages]
            self._messages.update(zip(offsets, messages, strict=True))
            self._max_seen_offset = max(offsets)
            self._known = True
            self.msg_size_bytes += sum([len(message.body) for message in messages])
            messages = []
        for message in messages:
            queue_offset = message.queue_offset
            if queue_offset <= self._max_seen_offset:
                continue
            self._messages[queue_offset] = message
            self._max_seen_offset = queue_offset
            self._known = True
            self.msg_size_bytes += len(message.body)
        if next_begin_offset - 1 > self._max_seen_offset:
            self._max_seen_offset = next_begin_offset - 1
            self._known = True

    def remove_messages(self, messages: list[MessageExt]) -> int:
        """Mark messages done; return the offset now safe to commit (see the module docstring)."""
        for message in messages:
            if self._messages.pop(message.queue_offset, None) is not None:
                self.msg_size_bytes -= len(message.body)
        return self.commit_offset()

    def commit_offset(self) -> int:
        """Lowest offset still inside, or one past the highest seen; -1 before any message."""
        if self._consuming:
            return next(iter(self._consuming))
        if self._messages:
            return next(iter(self._messages))
        return self._max_seen_offset + 1 if self._known else -1

    # -- orderly --------------------------------------------------------------------------------

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move up to ``batch_size`` lowest messages into the consuming window and return them."""
        taken: list[MessageExt] = []
        while self._messages and len(taken) < batch_size:
            queue_offset = next(iter(self._messages))
            message = self._messages.pop(queue_offset)
            self._consuming[queue_offset] = message
            taken.append(message)
        return taken

    def commit(self) -> int:
        """The consuming window is done; return the offset safe to commit."""
        for message in self._consuming.values():
            self.msg_size_bytes -= len(message.body)
        self._consuming.clear()
        return self.commit_offset()

    def make_available(self, messages: list[MessageExt]) -> None:
        """Put window messages back in front of the rest so they are taken again first."""
        returned = {
            m.queue_offset: m for m in messages if self._consuming.pop(m.queue_offset, None) is not None
        }
        if returned:
            rest = self._messages
            self._messages = dict(sorted(returned.items()))
            self._messages.update(rest)

    def clear(self) -> None:
        """Forget every message (the queue was dropped or its offset was reset)."""
        self._messages.clear()
        self._consuming.clear()
        self.msg_size_bytes = 0

    def reset_to(self, queue_offset: int) -> None:
        """Forget everything and treat ``queue_offset`` as the next message expected."""
        self.clear()
        self._max_seen_offset = queue_offset - 1
        self._known = True
