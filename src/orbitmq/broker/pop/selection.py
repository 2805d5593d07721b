"""Which messages one pop delivers from one queue: the pure decision behind every POP.

The service offers *candidates*: messages visible again (in flight past their deadline, or
held back earlier) and fresh messages read from the queue's cursor that passed the group's
filter. :func:`select` returns what to deliver, what to hold back and how far the cursor
moves; the service turns that into a :class:`~orbitmq.broker.pop.state.PopEvent`.

- **Concurrent groups** take the visible-again messages first (oldest offset first), then
  fresh ones in queue order, up to the batch size.
- **FIFO groups** (RocketMQ's ``consumeMessageOrderly``) see candidates in queue order and
  deliver a message only when no other message of its message group (``__SHARDINGKEY``; a
  message without one belongs to the group ``""``) is in flight and still invisible, and
  no earlier message of that group is being held back. A held-back fresh message joins
  ``held`` and waits for a later pop; at most :data:`HELD_MAX` messages per queue wait so,
  after which the scan stops at the cursor (head-of-line blocking, as RocketMQ's queue lock).
  Several messages of one group may go out in one batch, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orbitmq.broker.pop.state import QueuePopState

HELD_MAX = 1024
"""FIFO messages one queue may hold back behind busy message groups before its scan stops."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A message a pop could deliver."""

    offset: int
    message_group: str = ""
    fresh: bool = True
    """True for a message at or past the cursor, False for one visible again or held back."""


@dataclass(slots=True)
class Selection:
    """The outcome of :func:`select` for one queue."""

    delivered: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)
    scan_to: int = 0
    groups: dict[int, str] = field(default_factory=dict)


def dead_letter_due(state: QueuePopState, now_ms: int, max_attempts: int) -> list[int]:
    """Visible-again deliveries that used their last attempt: they go to the DLQ, not out again."""
    return [
        offset for offset in state.visible_inflight(now_ms) if state.inflight[offset].attempt >= max_attempts
    ]


def select(
    state: QueuePopState,
    again: list[Candidate],
    fresh: list[Candidate],
    fresh_scan_end: int,
    batch_max: int,
    now_ms: int,
    fifo: bool,
) -> Selection:
    """Decide one queue's share of a pop (see the module docstring).

    ``again`` are visible-again candidates, ``fresh`` the new messages read from the cursor in
    queue order, ``fresh_scan_end`` the offset after the last entry that read examined
    (fresh or filtered out). Offsets below the returned ``scan_to`` are all resolved.
    """
    if fifo:
        return _select_fifo(state, again, fresh, fresh_scan_end, batch_max, now_ms)
    selection = Selection(scan_to=max(state.cursor, fresh_scan_end))
    for candidate in sorted(again, key=lambda c: c.offset)[:batch_max]:
        selection.delivered.append(candidate.offset)
    room = batch_max - len(selection.delivered)
    taken = fresh[: max(room, 0)]
    selection.delivered.extend(candidate.offset for candidate in taken)
    if len(taken) < len(fresh):
        selection.scan_to = fresh[len(taken)].offset
    return selection


def _select_fifo(
    state: QueuePopState,
    again: list[Candidate],
    fresh: list[Candidate],
    fresh_scan_end: int,
    batch_max: int,
    now_ms: int,
) -> Selection:
    selection = Selection(scan_to=max(state.cursor, fresh_scan_end))
    blocked = state.busy_groups(now_ms)
    held_room = HELD_MAX - len(state.held)
    for candidate in sorted([*again, *fresh], key=lambda c: c.offset):
        if len(selection.delivered) >= batch_max:
            if candidate.fresh:
                selection.scan_to = candidate.offset
                break
            continue
        group = candidate.message_group
        if group in blocked:
            if candidate.fresh:
                if held_room <= 0:
                    selection.scan_to = candidate.offset
                    break
                held_room -= 1
                selection.held.append(candidate.offset)
                selection.groups[candidate.offset] = group
            continue
        selection.delivered.append(candidate.offset)
        selection.groups[candidate.offset] = group
    return selection
