"""POP journal and snapshot codecs: what they refuse, and the auto-renew policy table."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbitmq.broker.pop.journal import decode_events, decode_snapshot, encode_events, encode_snapshot
from orbitmq.broker.pop.renew import RENEW_FAILURES_MAX, RENEW_STEPS_MS, RenewTable
from orbitmq.broker.pop.state import AckEvent, ChangeEvent, DoneEvent, InitEvent, PopEvent, PopStateTable
from orbitmq.errors import CorruptRecordError


def test_pop_journal_round_trips_every_event_kind() -> None:
    key = ("CG", "T", 3)
    events = [
        InitEvent(key, 7),
        PopEvent(key, 100, 200, (7, 8), 9, (5,), {7: "g", 5: "g"}),
        AckEvent(key, ((7, 100),)),
        ChangeEvent(key, 8, 100, 900),
        DoneEvent(key, (5,)),
    ]
    assert decode_events(encode_events(events)) == events


def test_pop_snapshot_keeps_which_deliveries_are_orderly() -> None:
    # An orderly pop's deliveries are redelivered from their queue, the others revived through
    # the pop retry topic: the snapshot keeps the difference, and reads an older snapshot's
    # deliveries (five fields) as orderly, the way every delivery was redelivered then.
    table = PopStateTable()
    fifo, concurrent = ("CG", "F", 0), ("CG", "C", 0)
    table.apply_all([InitEvent(fifo, 0), InitEvent(concurrent, 0)])
    table.apply(PopEvent(fifo, 100, 200, (0,), 1, (), {0: "g"}))
    table.apply(PopEvent(concurrent, 101, 201, (0,), 1))
    loaded, _ = decode_snapshot(encode_snapshot(table, 5))
    assert [loaded.get(key).inflight[0].orderly for key in (fifo, concurrent)] == [True, False]  # type: ignore[union-attr]
    older = orjson.loads(encode_snapshot(table, 5))
    for queue in older["queues"]:
        queue["f"] = [entry[:5] for entry in queue["f"]]
    old_loaded, _ = decode_snapshot(orjson.dumps(older))
    assert [old_loaded.get(key).inflight[0].orderly for key in (fifo, concurrent)] == [True, True]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "body",
    [b"", b"{}", b"[1]", b'[{"e": "x", "g": "a", "t": "b", "q": 0}]', b'[{"e": "i", "g": 1, "t": "b", "q": 0, "c": 0}]',
     b'[{"e": "p", "g": "a", "t": "b", "q": 0, "pt": 1, "v": 2, "d": ["x"], "s": 0}]'],
)  # fmt: skip
def test_pop_journal_refuses_what_it_did_not_write(body: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_events(body)


@given(st.binary(max_size=200))
def test_pop_journal_arbitrary_bytes_decode_or_raise_corrupt_record_only(body: bytes) -> None:
    try:
        decode_events(body)
    except CorruptRecordError:
        pass


@given(st.binary(max_size=200))
def test_pop_snapshot_arbitrary_bytes_decode_or_raise_corrupt_record_only(data: bytes) -> None:
    try:
        decode_snapshot(data)
    except CorruptRecordError:
        pass


def test_pop_renew_table_renews_ahead_of_the_deadline_in_growing_steps() -> None:
    table = RenewTable(renew_ahead_ms=10_000, renew_max_ms=3_600_000)
    key = ("broker-a", "CG", "T", 0, 5)
    table.add("client-1", key, "handle", deadline_ms=60_000, now_ms=0)
    assert table.due(49_999) == []
    (owner, due_key, entry, step) = table.due(50_000)[0]
    assert (owner, due_key, step) == ("client-1", key, RENEW_STEPS_MS[0])
    table.renewed(entry, 50_000 + step)
    assert table.due(50_001) == []
    assert table.due(50_000 + step - 10_000)[0][3] == RENEW_STEPS_MS[1]


def test_pop_renew_table_gives_up_after_the_limit_and_on_failures() -> None:
    table = RenewTable(renew_ahead_ms=10_000, renew_max_ms=100_000)
    table.add("c", ("b", "g", "t", 0, 1), "h1", deadline_ms=50_000, now_ms=0)
    assert table.due(100_000) == [] and len(table) == 0  # past renewMaxTimeMillis: dropped
    table.add("c", ("b", "g", "t", 0, 2), "h2", deadline_ms=5_000, now_ms=0)
    for _ in range(RENEW_FAILURES_MAX):
        owner, key, entry, _ = table.due(1_000)[0]
        table.failed(owner, key, entry, gone=False)
    assert len(table) == 0
    table.add("c", ("b", "g", "t", 0, 3), "h3", deadline_ms=5_000, now_ms=0)
    owner, key, entry, _ = table.due(1_000)[0]
    table.failed(owner, key, entry, gone=True)  # the delivery is gone: stop at once
    assert len(table) == 0


def test_pop_renew_table_release_hands_back_one_owner_only() -> None:
    table = RenewTable(10_000, 3_600_000)
    table.add("a", ("b", "g", "t", 0, 1), "h1", 60_000, 0)
    table.add("a", ("b", "g", "t", 1, 1), "h2", 60_000, 0)
    table.add("z", ("b", "g", "t", 0, 2), "h3", 60_000, 0)
    assert sorted(entry.receipt_handle for _, entry in table.release("a")) == ["h1", "h2"]
    assert table.owners() == ["z"] and table.release("a") == []
