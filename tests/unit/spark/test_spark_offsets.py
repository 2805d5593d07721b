"""Offset JSON canonical form, start/end resolution and proportional read limits."""

from __future__ import annotations

import json
import random

import pytest

from orbitmq.model.message import MessageQueue
from orbitmq.spark._offsets import (
    OffsetFormatError,
    backlog,
    cap_to_limit,
    from_offset_json,
    offsets_behind,
    resolve_end,
    resolve_offset,
    split_ranges,
    to_offset_json,
)
from orbitmq.spark._options import StartKind, parse_offset_spec


def _mq(topic: str, queue_id: int, broker: str = "b") -> MessageQueue:
    return MessageQueue(topic, broker, queue_id)


def test_offset_json_text_is_stable_whatever_the_insertion_order() -> None:
    queues = [_mq(t, q, b) for t in ("B", "A") for b in ("b2", "b1") for q in (10, 2, 1)]
    texts = set()
    for seed in range(5):
        random.Random(seed).shuffle(queues)
        texts.add(json.dumps(to_offset_json({mq: mq.queue_id * 7 for mq in queues})))
    assert len(texts) == 1
    doc = json.loads(texts.pop())
    assert list(doc) == ["A", "B"] and list(doc["A"]) == ["b1", "b2"]
    assert list(doc["A"]["b1"]) == ["1", "2", "10"]


def test_offset_json_round_trips_and_rejects_bad_shapes() -> None:
    offsets = {_mq("A", 0): 5, _mq("A", 3, "b9"): 0}
    assert from_offset_json(json.loads(json.dumps(to_offset_json(offsets)))) == offsets
    for bad in (
        [],
        {"A": 1},
        {"A": {"b": 1}},
        {"A": {"b": {"x": 1}}},
        {"A": {"b": {"0": -1}}},
        {"A": {"b": {"0": True}}},
    ):
        with pytest.raises(OffsetFormatError):
            from_offset_json(bad)


def test_resolve_offset_for_each_start_kind() -> None:
    assert resolve_offset(None, StartKind.EARLIEST, 3, 9, None) == 3
    assert resolve_offset(None, StartKind.LATEST, 3, 9, None) == 9
    assert resolve_offset(None, StartKind.TIMESTAMP, 3, 9, 5) == 5
    assert resolve_offset(None, StartKind.TIMESTAMP, 3, 9, 1) == 3
    assert resolve_offset(7, StartKind.EXPLICIT, 3, 9, None) == 7
    assert resolve_offset(-2, StartKind.EXPLICIT, 3, 9, None) == 3
    assert resolve_offset(-1, StartKind.EXPLICIT, 3, 9, None) == 9
    assert resolve_offset(None, StartKind.EXPLICIT, 3, 9, None) == 3


def test_resolve_end_clamps_to_max_offset() -> None:
    spec = parse_offset_spec("endingOffsets", '{"A": {"0": 4, "1": 100, "2": -1}}')
    assert [resolve_end(spec, _mq("A", q), 50) for q in range(4)] == [4, 50, 50, 50]
    assert resolve_end(None, _mq("A", 0), 50) == 50


def test_cap_to_limit_splits_in_proportion_and_sums_exactly() -> None:
    start = {_mq("A", 0): 0, _mq("A", 1): 10, _mq("A", 2): 5, _mq("A", 3): 7}
    latest = {_mq("A", 0): 600, _mq("A", 1): 310, _mq("A", 2): 6, _mq("A", 3): 7}
    end = cap_to_limit(start, latest, 100)
    assert backlog(start, end) == 100
    assert all(start[mq] <= end[mq] <= latest[mq] for mq in start)
    assert end[_mq("A", 0)] - 0 > end[_mq("A", 1)] - 10 > 0
    assert end[_mq("A", 3)] == 7
    assert cap_to_limit(start, latest, 100_000) == latest


def test_cap_to_limit_is_deterministic_for_tiny_budgets() -> None:
    start = {_mq("A", q): 0 for q in range(8)}
    latest = {_mq("A", q): 10 for q in range(8)}
    ends = {json.dumps(to_offset_json(cap_to_limit(start, latest, 3))) for _ in range(3)}
    assert len(ends) == 1
    assert backlog(start, cap_to_limit(start, latest, 3)) == 3


def test_split_ranges_caps_records_per_partition_and_covers_each_range() -> None:
    spans = [(_mq("A", 0), 0, 10), (_mq("A", 1), 5, 5), (_mq("A", 2), 3, 6)]
    pieces = split_ranges(spans, None, 4)
    assert pieces == [
        (_mq("A", 0), 0, 3), (_mq("A", 0), 3, 6), (_mq("A", 0), 6, 10), (_mq("A", 2), 3, 6),
    ]  # fmt: skip
    assert split_ranges(spans, None, None) == [spans[0], spans[2]]


def test_split_ranges_min_partitions_splits_big_ranges_more() -> None:
    spans = [(_mq("A", 0), 0, 900), (_mq("A", 1), 0, 100)]
    pieces = split_ranges(spans, 10, None)
    assert len([p for p in pieces if p[0].queue_id == 0]) == 9
    assert len([p for p in pieces if p[0].queue_id == 1]) == 1
    for queue_id, stop in ((0, 900), (1, 100)):
        mine = [p for p in pieces if p[0].queue_id == queue_id]
        assert mine[0][1] == 0 and mine[-1][2] == stop
        assert all(a[2] == b[1] for a, b in zip(mine, mine[1:], strict=False))
    # Already enough ranges: left alone; tiny ranges never give empty pieces.
    assert split_ranges(spans, 2, None) == spans
    assert split_ranges([(_mq("A", 0), 0, 2)], 8, None) == [(_mq("A", 0), 0, 1), (_mq("A", 0), 1, 2)]


def test_offsets_behind_latest_metrics() -> None:
    latest = {_mq("A", 0): 10, _mq("A", 1): 4, _mq("A", 2): 7}
    end = {_mq("A", 0): 6, _mq("A", 1): 4}
    assert offsets_behind(end, latest) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "7",
        "avgOffsetsBehindLatest": str(11 / 3),
    }
    assert offsets_behind({}, {}) == {}
