"""The label cap: the most active topics and groups keep their labels, the rest sum under __other__."""

from __future__ import annotations

import math
import random

from orbitmq.metrics import BrokerView, LagRow, Recorder
from orbitmq.metrics.cardinality import OTHER, TopicActivity, cap_labels, most_active_topics
from orbitmq.metrics.steps import run_steps


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


def test_topic_activity_keeps_the_choice_of_a_full_pass_as_queues_move_and_topics_come_and_go() -> None:
    # Counts only grow between choices; ties (many topics at the same count) are broken by name,
    # so a topic that catches up with the least active kept one by count replaces it only when
    # its name is smaller.
    chooser = random.Random(28)
    activity = TopicActivity(7)
    names = [f"T{index:03}" for index in range(60)]
    offsets: dict[tuple[str, int], int] = {}
    for step in range(3000):
        topic = chooser.choice(names)
        if step % 97 == 0:
            activity.add_topic(f"Empty{step}")
        elif step % 331 == 0:
            activity.remove_topic(f"Empty{step // 97 * 97 - 97}")
        else:
            key = (topic, chooser.randrange(4))
            offsets[key] = offsets.get(key, 0) + chooser.choice((0, 1, 1, 2, 5))
            activity.move(*key, offsets[key])
        if step % 13 == 0:
            expected_counts = dict.fromkeys(activity.counts, 0)
            for (name, _), offset in offsets.items():
                expected_counts[name] += offset
            assert activity.counts == expected_counts
            assert activity.total == sum(expected_counts.values())
            kept = run_steps(activity.kept_steps())
            assert kept == most_active_topics(_view(expected_counts), 7)
            folded = activity.folded_offsets(kept)
            assert sum(folded.values()) == activity.total and len(folded) <= 8


def test_topic_activity_chooses_again_when_a_count_falls() -> None:
    activity = TopicActivity(1)
    activity.move("A", 0, 5)
    activity.move("B", 0, 3)
    assert run_steps(activity.kept_steps()) == {"A"}
    activity.move("A", 0, 1)  # the log was cut back
    assert run_steps(activity.kept_steps()) == {"B"}
    assert activity.folded_offsets(frozenset({"B"})) == {"B": 3, OTHER: 1}


def test_recorder_snapshot_kept_sums_the_other_topics_as_a_full_fold_does() -> None:
    chooser = random.Random(3)
    recorder = Recorder(is_system_topic=lambda topic: topic.startswith("RMQ_SYS"))
    topics = [f"T{index}" for index in range(40)] + ["RMQ_SYS_A", "RMQ_SYS_B"]
    for minute in range(3):
        for _ in range(400):
            recorder.count_in(
                chooser.choice(topics),
                chooser.choice(("normal", "fifo", "delay")),
                chooser.choice((10, 3000, 700_000)),
                chooser.choice((1, 1, 4)),
            )
        recorder.sample(1000 + minute * 30_000)
    now_ms = 100_000
    for kept in (frozenset(topics[:5]), frozenset({"T1", "RMQ_SYS_A", "Idle"}), frozenset(topics)):
        folded = recorder.snapshot_from(
            recorder.capture(now_ms), lambda topic, kept=kept: topic if topic in kept else OTHER
        )
        quick = recorder.snapshot_kept(now_ms, kept)
        assert quick.messages_in == folded.messages_in
        assert {key: (h.counts, h.total, h.count) for key, h in quick.message_size.items()} == {
            key: (h.counts, h.total, h.count) for key, h in folded.message_size.items()
        }
        assert quick.put_tps.keys() == folded.put_tps.keys()
        for topic, tps in folded.put_tps.items():
            assert math.isclose(quick.put_tps[topic], tps, rel_tol=1e-12), topic
        assert (quick.put_total, quick.broker_put_tps) == (folded.put_total, folded.broker_put_tps)
