"""The dashboard's pure parts: the hour of chart points, topic kinds."""

from __future__ import annotations

from orbitmq.dashboard.data import topic_kind
from orbitmq.dashboard.history import History, Point


def test_history_keeps_one_hour_of_points_in_order() -> None:
    history = History()
    for minute in range(90):
        history.add(Point(minute * 60_000, float(minute), 0.0, minute))
    points = history.points()
    assert points[0].at_ms == 29 * 60_000 and points[-1].at_ms == 89 * 60_000
    series = history.series()
    assert series["time_s"][0] == 29 * 60 and series["lag_messages"][-1] == 89.0


def test_topic_kind_tells_retry_dlq_and_system_topics_apart() -> None:
    assert topic_kind("Orders") == "normal"
    assert topic_kind("%RETRY%CG") == "retry"
    assert topic_kind("%DLQ%CG") == "dlq"
    assert topic_kind("TBW102") == "system"
    assert topic_kind("RMQ_SYS_TRACE_TOPIC") == "system"
    assert topic_kind("rmq_sys_wheel_timer") == "system"
