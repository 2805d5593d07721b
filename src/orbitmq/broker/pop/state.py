"""POP consumption state: which messages of a group are in flight, and when each is visible.

This module is pure: no I/O, no clock (times are passed in), no asyncio. The service
(``broker.pop.service``) reads the store, decides with :mod:`broker.pop.selection`, writes
each change to the journal as an event (:mod:`broker.pop.journal`) and then applies the same
event here; replaying the journal after a restart applies the same events again, so the
state after a crash is the state before it.

Theory of operation. State is kept per (group, topic, queue id) in a :class:`QueuePopState`:

- ``cursor``: the first queue offset no pop has examined yet. Every offset below it is
  *done* (acknowledged, dead-lettered, or filtered out by the group's subscription), unless
  it is in ``inflight`` or ``held``. So acknowledged offsets cost no memory at all.
- ``inflight``: offset -> :class:`Delivery` (the delivery's identity ``pop_time_ms``, its
  deadline ``visible_at_ms``, its ``attempt`` number, its FIFO ``message_group`` and whether
  an orderly pop made it). A delivery whose deadline has passed is *visible* again. An orderly
  one is delivered again from its queue with ``attempt + 1`` (or dead-lettered once
  ``attempt`` reached the group's maximum); any other is revived through the group's pop
  retry topic (``broker.pop.revive``) and finished here, a ``DoneEvent``.
- ``held``: offset -> message group, for FIFO groups only: messages examined but held back
  because an earlier message of their group was still in flight.

The *done-below* offset (the lowest offset not done) is what the group has consumed for
good; it is published as the group's consumer offset, so admin tools show POP progress.

A receipt handle names a delivery by (queue, offset, ``pop_time_ms``). Pop times are unique
and increasing across the whole table (:meth:`PopStateTable.next_pop_time`), so a handle of
an earlier delivery of the same message never matches a later one. Acks and changes check
the handle: the same pop time and a deadline still ahead, otherwise the handle is invalid
(:class:`HandleStatus`). Renewing or changing the invisible time moves the deadline and keeps
the identity, so the handle a client holds stays valid.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum

QueueKey = tuple[str, str, int]
"""(group, topic, queue id)."""


class HandleStatus(Enum):
    """Outcome of checking a receipt handle against the state."""

    VALID = "VALID"
    EXPIRED = "EXPIRED"  # the delivery's deadline has passed (it may be delivered again)
    UNKNOWN = "UNKNOWN"  # no such delivery: acknowledged already, or a later delivery replaced it


@dataclass(slots=True)
class Delivery:
    """One delivery of one message to a group."""

    pop_time_ms: int
    visible_at_ms: int
    attempt: int
    message_group: str = ""
    orderly: bool = False


@dataclass(slots=True)
class QueuePopState:
    """The state of one (group, topic, queue id); see the module docstring."""

    cursor: int
    inflight: dict[int, Delivery] = field(default_factory=dict)
    held: dict[int, str] = field(default_factory=dict)

    def done_below(self) -> int:
        """The lowest offset that is not done (everything below it is consumed for good)."""
        lowest = self.cursor
        if self.inflight:
            lowest = min(lowest, min(self.inflight))
        if self.held:
            lowest = min(lowest, min(self.held))
        return lowest

    def visible_inflight(self, now_ms: int) -> list[int]:
        """In-flight offsets whose deadline has passed, in offset order."""
        return sorted(offset for offset, d in self.inflight.items() if d.visible_at_ms <= now_ms)

    def next_visible_ms(self) -> int | None:
        """The earliest deadline of the in-flight deliveries (None when nothing is in flight)."""
        return min((d.visible_at_ms for d in self.inflight.values()), default=None)

    def busy_groups(self, now_ms: int) -> set[str]:
        """FIFO message groups with a delivery still invisible: none of their messages may go out."""
        return {d.message_group for d in self.inflight.values() if d.visible_at_ms > now_ms}

    def check(self, offset: int, pop_time_ms: int, now_ms: int) -> HandleStatus:
        delivery = self.inflight.get(offset)
        if delivery is None or delivery.pop_time_ms != pop_time_ms:
            return HandleStatus.UNKNOWN
        if delivery.visible_at_ms <= now_ms:
            return HandleStatus.EXPIRED
        return HandleStatus.VALID


# -- events: every change to the state, as the journal records it --------------------------------


@dataclass(frozen=True, slots=True)
class InitEvent:
    """A group's first look at a queue: where its cursor starts."""

    key: QueueKey
    cursor: int


@dataclass(frozen=True, slots=True)
class PopEvent:
    """One pop on one queue.

    ``delivered`` offsets become in flight until ``visible_at_ms``; the cursor moves to
    ``scan_to`` (offsets between the old cursor and ``scan_to`` that are neither delivered nor
    ``held`` were filtered out: done); ``groups`` gives the FIFO message group of delivered
    and held offsets (empty for other pops), so a delivered offset found in ``groups`` is an
    orderly delivery.
    """

    key: QueueKey
    pop_time_ms: int
    visible_at_ms: int
    delivered: tuple[int, ...]
    scan_to: int
    held: tuple[int, ...] = ()
    groups: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AckEvent:
    """Deliveries finished by their consumer: (offset, pop time) pairs."""

    key: QueueKey
    acks: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """A delivery's new deadline (a nack, an extension or a renewal)."""

    key: QueueKey
    offset: int
    pop_time_ms: int
    visible_at_ms: int


@dataclass(frozen=True, slots=True)
class DoneEvent:
    """Offsets finished by the broker: dead-lettered, or gone from the store."""

    key: QueueKey
    offsets: tuple[int, ...]


Event = InitEvent | PopEvent | AckEvent | ChangeEvent | DoneEvent


class PopStateTable:
    """Every queue's POP state, and the pop-time clock that keeps handles unique."""

    def __init__(self) -> None:
        self._queues: dict[QueueKey, QueuePopState] = {}
        self.last_pop_time_ms = 0

    def __len__(self) -> int:
        return len(self._queues)

    def get(self, key: QueueKey) -> QueuePopState | None:
        return self._queues.get(key)

    def items(self) -> Iterator[tuple[QueueKey, QueuePopState]]:
        return iter(list(self._queues.items()))

    def keys_of(self, group: str, topic: str) -> list[QueueKey]:
        return [key for key in self._queues if key[0] == group and key[1] == topic]

    def next_pop_time(self, now_ms: int) -> int:
        """A pop time after every one handed out before (the wall clock when it moved on)."""
        return max(now_ms, self.last_pop_time_ms + 1)

    def apply(self, event: Event) -> None:
        """Change the state as ``event`` says (live, and again when replaying the journal)."""
        if isinstance(event, InitEvent):
            self._queues.setdefault(event.key, QueuePopState(event.cursor))
            return
        state = self._queues.get(event.key)
        if state is None:
            # Only an InitEvent creates a queue; anything else for an unknown queue is from a
            # journal cut off before its InitEvent (a state reset): nothing to change.
            return
        if isinstance(event, PopEvent):
            self._apply_pop(state, event)
        elif isinstance(event, AckEvent):
            for offset, pop_time_ms in event.acks:
                delivery = state.inflight.get(offset)
                if delivery is not None and delivery.pop_time_ms == pop_time_ms:
                    del state.inflight[offset]
        elif isinstance(event, ChangeEvent):
            delivery = state.inflight.get(event.offset)
            if delivery is not None and delivery.pop_time_ms == event.pop_time_ms:
                delivery.visible_at_ms = event.visible_at_ms
        else:
            for offset in event.offsets:
                state.inflight.pop(offset, None)
                state.held.pop(offset, None)

    def _apply_pop(self, state: QueuePopState, event: PopEvent) -> None:
        self.last_pop_time_ms = max(self.last_pop_time_ms, event.pop_time_ms)
        for offset in event.delivered:
            previous = state.inflight.get(offset)
            attempt = previous.attempt + 1 if previous is not None else 1
            orderly = offset in event.groups
            group = event.groups.get(offset, previous.message_group if previous else "")
            state.inflight[offset] = Delivery(event.pop_time_ms, event.visible_at_ms, attempt, group, orderly)
            state.held.pop(offset, None)
        for offset in event.held:
            state.held[offset] = event.groups.get(offset, "")
        if event.scan_to > state.cursor:
            state.cursor = event.scan_to

    def apply_all(self, events: Iterable[Event]) -> None:
        for event in events:
            self.apply(event)

    def forget(self, group: str, topic: str | None = None) -> None:
        """Drop the state of a deleted group or topic."""
        for key in list(self._queues):
            if key[0] == group and (topic is None or key[1] == topic):
                del self._queues[key]

    def inflight_count(self) -> int:
        return sum(len(state.inflight) for state in self._queues.values())
