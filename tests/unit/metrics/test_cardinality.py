"""The label cap: the most active topics and groups keep their labels, the rest sum under __other__."""

from __future__ import annotations

from orbitmq.metrics import BrokerView, LagRow, Recorder
from orbitmq.metrics.cardinality import OTHER, cap_labels, most_active_topics


def _view(offsets: dict[str, int]) -> BrokerView:
    return BrokerView(
        "C1", "broker-a", 0, "127.0.0.1:10911", "OrbitMQ", 1, 6, topic_max_offsets=dict(offsets)
    )


def test_cardinality_cap_keeps_the_most_active_by_count_then_name_and_keeps_totals() -> None:
    recorder = Recorder()
    offsets = {"T0": 5, "T1": 9, "T2": 9, "T3": 1, "T4": 0, "T5": 7}
    for topic, count in offsets.items():
        for _ in range(count or 1):
            recorder.count_in(topic, "normal", 100)
    view = _view(offsets)
    view.topic_number = len(offsets)
    view.lags = [
        LagRow(group, topic, False, False, lag, 10 * lag, offset, 1, "1")
        for group, topic, lag, offset in (("G1", "T1", 2, 50), ("G2", "T1", 3, 5), ("G3", "T3", 4, 1))
    ]
    topics = most_active_topics(view, 3)
    assert topics == {"T1", "T2", "T5"}  # 9, 9, 7; T0 (5) and the rest are folded
    snapshot = recorder.snapshot_from(
        recorder.capture(1000), lambda topic: topic if topic in topics else OTHER
    )
    snapshot, capped = cap_labels(snapshot, view, 3, 1, topics)
    per_topic = {key[0]: counts[0] for key, counts in snapshot.messages_in.items()}
    assert per_topic == {"T1": 9, "T2": 9, "T5": 7, OTHER: 5 + 1 + 1}
    assert sum(capped.topic_max_offsets.values()) == sum(offsets.values())
    assert capped.topic_number == len(offsets)
    lags = {(row.group, row.topic): row for row in capped.lags}
    # G1 consumed the most: it keeps its label; G2 and G3 are summed, G3's topic is folded too.
    assert set(lags) == {("G1", "T1"), (OTHER, "T1"), (OTHER, OTHER)}
    assert lags[(OTHER, "T1")].lag_messages == 3
    assert lags[(OTHER, OTHER)].lag_latency_ms == 40


def test_cardinality_cap_changes_nothing_under_the_caps() -> None:
    recorder = Recorder()
    recorder.count_in("T", "normal", 10)
    view = _view({"T": 1})
    snapshot = recorder.snapshot(1000)
    assert cap_labels(snapshot, view, 5, 5) == (snapshot, view)
