"""The master's replication bookkeeping: what each slave was sent and acknowledged, and who waits.

Pure state (no asyncio, no sockets, no clock): callers pass ``now_ms`` and offsets, so every
rule here is tested without an event loop. ``master.py`` drives it.

Theory of operation.

*Links.* Each HA connection is a :class:`SlaveLink`. Its first offset report is the *request
offset* R, where streaming starts (§1.4), judged by :meth:`SlaveLinks.on_report`:

=========================  ==============================================================
R                          outcome
=========================  ==============================================================
0 (an empty slave)         stream from the master's oldest offset: it copies everything
min <= R <= max            stream from R
0 < R < min                BEHIND: the bytes it needs were deleted; it can never catch up
R > max                    AHEAD: its log has bytes this master never wrote (diverged)
=========================  ==============================================================

Every later report is an *acknowledgement*. One is believed only if it is at most what this
link was sent and at most the master's max offset (§7.3: a stray process writing 8 bytes to
the HA port must not confirm unreplicated data); otherwise the link is dropped. Acks are kept
per link, never folded into one global maximum, so the master always knows which slave holds
what: :meth:`SlaveLinks.acked_offset` is the offset that ``acks_needed`` usable slaves hold
(the classic 4.x rule is one).

*Waiters.* Under SYNC_MASTER a send waits until its end offset is acknowledged
(:class:`TransferWaiters`). Sends form *groups*: a send joins the newest group while that
group's bytes have not all been handed to a slave yet and the group is younger than
``join_window_ms``; otherwise it opens a new one. One acknowledgement then releases a whole
group (group transfer: 64 sends in flight cost one ack, not 64). Groups are ordered by end offset,
so releasing pops from the front, and expiring too: a group's deadline is that of its newest
member, so no send times out before its own ``slaveTimeout``, and none later than
``join_window_ms`` after it (a group behind one with a later deadline waits for it).

Designed to grow: a confirm offset (the lowest ack of an in-sync set) and epochs attach to
:class:`SlaveLinks` without changing how links are fed.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum

_EVERY_OFFSET = (1 << 63) - 1

__all__ = ["LinkState", "ReportOutcome", "SlaveLink", "SlaveLinks", "TransferWaiters", "WaitGroup"]


class LinkState(Enum):
    """Where one HA connection stands."""

    WAITING = "WAITING"  # connected, no offset report yet
    STREAMING = "STREAMING"  # request offset accepted: bytes flow, acks count
    BEHIND = "BEHIND"  # asked for bytes below the master's oldest offset
    AHEAD = "AHEAD"  # asked for bytes beyond the master's max offset


class ReportOutcome(Enum):
    """What one offset report did to its link."""

    STARTED = "STARTED"  # first report: streaming starts at link.sent_offset
    ACKED = "ACKED"  # a believable acknowledgement
    BEHIND = "BEHIND"  # first report below the master's oldest offset
    AHEAD = "AHEAD"  # first report above the master's max offset
    BOGUS = "BOGUS"  # an ack above what was sent or above the master's max: drop the link
    IGNORED = "IGNORED"  # a later report of a link that is not streaming


@dataclass(slots=True)
class SlaveLink:
    """One slave connection as the master sees it."""

    link_id: int
    peer_address: str
    state: LinkState = LinkState.WAITING
    request_offset: int = -1
    sent_offset: int = 0  # next offset to send: every byte below it was handed to the socket
    ack_offset: int = -1  # the slave's max offset as last reported and believed
    last_report_ms: int = 0
    connected_ms: int = 0
    broker_id: int = -1  # the slave's controller-given id (controller mode's handshake), else -1
    caught_up_ms: int = 0  # last time it held every byte the master had at its previous report
    master_max_at_report: int = 0  # the master's max offset when it last reported

    @property
    def usable(self) -> bool:
        """Whether this slave's acks may confirm sends (streaming, and has reported)."""
        return self.state is LinkState.STREAMING


class SlaveLinks:
    """Every slave connection of one master and the acknowledgement rules."""

    def __init__(self, acks_needed: int = 1) -> None:
        if acks_needed < 1:
            raise ValueError(f"acks_needed {acks_needed} < 1")
        self.acks_needed = acks_needed
        # Controller mode with allAckInSyncStateSet: the broker ids whose acks a send needs (the
        # SyncStateSet without the master). None: ``acks_needed`` acks of any slaves.
        self.required: frozenset[int] | None = None
        self._links: dict[int, SlaveLink] = {}
        self._ids = itertools.count(1)

    def add(self, peer_address: str, now_ms: int) -> SlaveLink:
        link = SlaveLink(next(self._ids), peer_address, last_report_ms=now_ms, connected_ms=now_ms)
        self._links[link.link_id] = link
        return link

    def remove(self, link: SlaveLink) -> None:
        self._links.pop(link.link_id, None)

    def __iter__(self) -> Iterator[SlaveLink]:
        return iter(list(self._links.values()))

    def __len__(self) -> int:
        return len(self._links)

    def on_report(
        self, link: SlaveLink, offset: int, master_min: int, master_max: int, now_ms: int
    ) -> ReportOutcome:
        """Apply one offset report of ``link`` (see the module docstring)."""
        link.last_report_ms = now_ms
        if link.state is LinkState.WAITING:
            link.request_offset = offset
            if offset > master_max:
                link.state = LinkState.AHEAD
                return ReportOutcome.AHEAD
            if offset == 0:
                start = master_min
            elif offset < master_min:
                link.state = LinkState.BEHIND
                link.sent_offset = master_min
                return ReportOutcome.BEHIND
            else:
                start = offset
            link.state = LinkState.STREAMING
            link.sent_offset = start
            link.ack_offset = start
            return ReportOutcome.STARTED
        if link.state is not LinkState.STREAMING:
            # A slave we cannot stream to keeps reporting its offset: nothing to believe.
            return ReportOutcome.IGNORED
        if offset > link.sent_offset or offset > master_max:
            return ReportOutcome.BOGUS
        if offset > link.ack_offset:
            link.ack_offset = offset
        # Caught up: it holds what the master had one report ago (under load, never all of now).
        if offset >= min(link.master_max_at_report, master_max):
            link.caught_up_ms = now_ms
        link.master_max_at_report = master_max
        return ReportOutcome.ACKED

    def acked_offset(self) -> int:
        """The highest offset that ``acks_needed`` usable slaves have acknowledged (-1: none).

        With ``required`` set: the lowest ack among those broker ids (-1 when one has no usable
        link; every offset when the set is empty: the master alone is the SyncStateSet).
        """
        if self.required is not None:
            if not self.required:
                return _EVERY_OFFSET
            best: dict[int, int] = {}
            for link in self._links.values():
                if link.usable and link.broker_id in self.required:
                    best[link.broker_id] = max(best.get(link.broker_id, -1), link.ack_offset)
            return min(best.values()) if len(best) == len(self.required) else -1
        acks = sorted((link.ack_offset for link in self._links.values() if link.usable), reverse=True)
        if len(acks) < self.acks_needed:
            return -1
        return acks[self.acks_needed - 1]

    def sent_offset(self) -> int:
        """The highest offset handed to any usable slave's socket (-1: none)."""
        return max((link.sent_offset for link in self._links.values() if link.usable), default=-1)

    def is_slave_ok(self, end_offset: int, fallbehind_max_bytes: int) -> bool:
        """Whether a SYNC_MASTER send ending at ``end_offset`` may wait for a slave.

        Enough usable slaves must be connected, and the acknowledged offset must be within
        ``haSlaveFallbehindMax`` of the send (else SLAVE_NOT_AVAILABLE at once, as in 4.x).
        """
        if self.required is not None:
            return True  # every SyncStateSet member is waited for; the set shrinks if one stays away
        acked = self.acked_offset()
        return acked >= 0 and end_offset - acked < fallbehind_max_bytes

    def ack_of(self, broker_id: int) -> int:
        """The best ack of ``broker_id``'s usable links (-1: none)."""
        return max(
            (link.ack_offset for link in self._links.values() if link.usable and link.broker_id == broker_id),
            default=-1,
        )

    def caught_up_ms_of(self, broker_id: int) -> int:
        return max(
            (
                link.caught_up_ms
                for link in self._links.values()
                if link.usable and link.broker_id == broker_id
            ),
            default=0,
        )


@dataclass(slots=True)
class WaitGroup:
    """Sends waiting for the same acknowledgement."""

    end_offset: int
    deadline_ms: int
    created_ms: int
    waiting: int = 1  # sends in the group
    token: object = field(default=None)  # the caller's completion object (a future)


class TransferWaiters:
    """SYNC_MASTER sends waiting for acknowledgements, in groups (see the module docstring)."""

    def __init__(self, join_window_ms: int = 10) -> None:
        self.join_window_ms = join_window_ms
        self._groups: deque[WaitGroup] = deque()

    def __len__(self) -> int:
        return len(self._groups)

    def add(self, end_offset: int, now_ms: int, timeout_ms: int, sent_offset: int) -> tuple[WaitGroup, bool]:
        """Register a send ending at ``end_offset``; returns its group and whether it is new.

        ``sent_offset`` is how far bytes have been handed to slaves: a group already fully
        sent takes no new member (its acknowledgement may be on its way).
        """
        deadline_ms = now_ms + timeout_ms
        newest = self._groups[-1] if self._groups else None
        if (
            newest is not None
            and newest.end_offset > sent_offset
            and now_ms - newest.created_ms < self.join_window_ms
        ):
            newest.end_offset = max(newest.end_offset, end_offset)
            newest.deadline_ms = max(newest.deadline_ms, deadline_ms)
            newest.waiting += 1
            return newest, False
        group = WaitGroup(end_offset, deadline_ms, now_ms)
        if newest is not None and group.end_offset < newest.end_offset:
            # Puts are ordered, so this does not happen; keep the order invariant regardless.
            group.end_offset = newest.end_offset
        self._groups.append(group)
        return group, True

    def release(self, acked_offset: int) -> list[WaitGroup]:
        """Remove and return every group whose end offset is acknowledged."""
        released = []
        while self._groups and self._groups[0].end_offset <= acked_offset:
            released.append(self._groups.popleft())
        return released

    def expire(self, now_ms: int) -> list[WaitGroup]:
        """Remove and return every group whose deadline has passed."""
        expired = []
        while self._groups and self._groups[0].deadline_ms <= now_ms:
            expired.append(self._groups.popleft())
        return expired

    def next_deadline_ms(self) -> int | None:
        return self._groups[0].deadline_ms if self._groups else None

    def drain(self) -> list[WaitGroup]:
        """Remove and return every group (shutdown)."""
        groups = list(self._groups)
        self._groups.clear()
        return groups
