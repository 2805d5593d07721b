"""The dashboard's pure parts: trace record decoding, the hour of chart points, topic kinds."""

from __future__ import annotations

from orbitmq.dashboard.data import topic_kind
from orbitmq.dashboard.history import History, Point
from orbitmq.dashboard.trace import decode_trace_body


def test_trace_decodes_pub_and_paired_sub_records_and_skips_short_ones() -> None:
    pub = "\x01".join(
        [
            "Pub",
            "1000",
            "DefaultRegion",
            "PG",
            "T",
            "M1",
            "tag",
            "k1",
            "1.2.3.4:10911",
            "5",
            "3",
            "0",
            "OFF",
            "true",
        ]
    )
    before = "\x01".join(["SubBefore", "2000", "DefaultRegion", "CG", "R1", "M1", "0", "k1"])
    after = "\x01".join(["SubAfter", "R1", "M1", "7", "false", "k1", "4", "2007", "CG"])
    records = decode_trace_body(f"{pub}\x02{before}\x02{after}\x02Pub\x01short\x02")
    assert [(r.kind, r.group, r.msg_id) for r in records] == [
        ("Pub", "PG", "M1"),
        ("SubBefore", "CG", "M1"),
        ("SubAfter", "CG", "M1"),
    ]
    assert records[0].cost_ms == 3 and records[0].success is True
    assert records[1].request_id == records[2].request_id == "R1"
    assert records[2].success is False and records[2].timestamp_ms == 2007


def test_trace_reads_a_six_field_sub_after_of_the_cpp_client() -> None:
    (record,) = decode_trace_body("SubAfter\x01R9\x01M9\x0112\x01true\x01dKey\x02")
    assert (record.kind, record.msg_id, record.cost_ms, record.group) == ("SubAfter", "M9", 12, "")


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
