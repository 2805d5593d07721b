"""The master's replication bookkeeping (acks.py): links, acknowledgements and wait groups.

Method: drive SlaveLinks and TransferWaiters with plain offsets and millisecond clocks, as
master.py does, and check each rule of the module docstring: where streaming starts, which
acknowledgements are believed (ha-replication §7.3: never one above what was sent), which
send may wait, and how groups share one acknowledgement and expire at their deadline.
"""

from __future__ import annotations

import pytest

from orbitmq.broker.replication.acks import LinkState, ReportOutcome, SlaveLinks, TransferWaiters

MIN, MAX = 4096, 10_000


def _streaming(links: SlaveLinks, request_offset: int = MIN) -> object:
    link = links.add("10.0.0.2:40000", 0)
    assert links.on_report(link, request_offset, MIN, MAX, 1) is ReportOutcome.STARTED
    return link


@pytest.mark.parametrize(
    ("request_offset", "outcome", "state", "start"),
    [
        (0, ReportOutcome.STARTED, LinkState.STREAMING, MIN),  # empty slave: everything the master holds
        (MIN, ReportOutcome.STARTED, LinkState.STREAMING, MIN),
        (7000, ReportOutcome.STARTED, LinkState.STREAMING, 7000),
        (MAX, ReportOutcome.STARTED, LinkState.STREAMING, MAX),
        (100, ReportOutcome.BEHIND, LinkState.BEHIND, MIN),  # its bytes were deleted here
        (MAX + 1, ReportOutcome.AHEAD, LinkState.AHEAD, 0),  # bytes this master never wrote
    ],
)
def test_slave_links_first_report_chooses_where_streaming_starts(
    request_offset: int, outcome: ReportOutcome, state: LinkState, start: int
) -> None:
    links = SlaveLinks()
    link = links.add("10.0.0.2:40000", 0)
    assert links.on_report(link, request_offset, MIN, MAX, 5) is outcome
    assert (link.state, link.sent_offset, link.request_offset) == (state, start, request_offset)
    assert link.usable is (state is LinkState.STREAMING)


def test_slave_links_believe_only_acks_within_what_was_sent() -> None:
    links = SlaveLinks()
    link = links.add("10.0.0.2:40000", 0)
    links.on_report(link, MIN, MIN, MAX, 1)
    link.sent_offset = 6000
    assert links.on_report(link, 5000, MIN, MAX, 2) is ReportOutcome.ACKED
    assert links.acked_offset() == 5000
    assert links.on_report(link, 6001, MIN, MAX, 3) is ReportOutcome.BOGUS  # never sent
    assert links.acked_offset() == 5000
    link.sent_offset = MAX + 50  # cannot happen, but an ack above the max is refused regardless
    assert links.on_report(link, MAX + 10, MIN, MAX, 4) is ReportOutcome.BOGUS
    assert links.on_report(link, 4500, MIN, MAX, 5) is ReportOutcome.ACKED  # lower: kept at 5000
    assert link.ack_offset == 5000


def test_slave_links_keep_acks_per_link_and_count_the_ones_needed() -> None:
    links = SlaveLinks(acks_needed=2)
    first, second = links.add("a:1", 0), links.add("b:1", 0)
    for link in (first, second):
        links.on_report(link, MIN, MIN, MAX, 1)
        link.sent_offset = MAX
    links.on_report(first, 9000, MIN, MAX, 2)
    assert links.acked_offset() == MIN  # the second slave holds only MIN
    links.on_report(second, 8000, MIN, MAX, 3)
    assert links.acked_offset() == 8000
    links.remove(second)
    assert links.acked_offset() == -1 and len(links) == 1


def test_slave_links_ignore_reports_of_a_link_that_cannot_stream() -> None:
    links = SlaveLinks()
    link = links.add("a:1", 0)
    links.on_report(link, 100, MIN, MAX, 1)
    assert links.on_report(link, 100, MIN, MAX, 2) is ReportOutcome.IGNORED
    assert links.acked_offset() == -1 and not links.is_slave_ok(MAX, 1 << 30)


def test_slave_links_slave_ok_needs_a_close_enough_usable_slave() -> None:
    links = SlaveLinks()
    assert not links.is_slave_ok(MAX, 1 << 30)  # nobody connected
    link = links.add("a:1", 0)
    assert not links.is_slave_ok(MAX, 1 << 30)  # connected, no report yet
    links.on_report(link, MIN, MIN, MAX, 1)
    assert links.is_slave_ok(MAX, 1 << 30)
    assert not links.is_slave_ok(MIN + 1000, 1000)  # haSlaveFallbehindMax
    assert links.is_slave_ok(MIN + 999, 1000)


def test_transfer_waiters_group_sends_until_their_bytes_are_sent() -> None:
    waiters = TransferWaiters(join_window_ms=10)
    first, created = waiters.add(100, now_ms=0, timeout_ms=3000, sent_offset=0)
    assert created
    joined, created = waiters.add(200, now_ms=2, timeout_ms=3000, sent_offset=50)
    assert not created and joined is first and first.waiting == 2 and first.end_offset == 200
    assert first.deadline_ms == 3002  # the newest member's: nobody times out early
    # Once the group's bytes were all handed to a slave, a new send opens a new group.
    second, created = waiters.add(300, now_ms=3, timeout_ms=3000, sent_offset=200)
    assert created and second is not first
    # And a group older than the join window takes no new member either.
    third, created = waiters.add(400, now_ms=20, timeout_ms=3000, sent_offset=200)
    assert created and third is not second
    assert waiters.release(199) == []
    assert waiters.release(300) == [first, second]
    assert len(waiters) == 1


def test_transfer_waiters_expire_at_the_deadline_not_before() -> None:
    waiters = TransferWaiters()
    group, _ = waiters.add(100, now_ms=1000, timeout_ms=3000, sent_offset=0)
    later, _ = waiters.add(900, now_ms=1500, timeout_ms=3000, sent_offset=100)
    assert waiters.next_deadline_ms() == 4000
    assert waiters.expire(3999) == []
    assert waiters.expire(4000) == [group]
    assert waiters.next_deadline_ms() == 4500
    assert waiters.drain() == [later] and waiters.next_deadline_ms() is None
