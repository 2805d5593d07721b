"""The operations report: sampled throughput and lag, the Spark table, and the PNG chart."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from orbitmq.model.message import Message
from orbitmq.spark.pipelines.ops_report import report_frame, sample_once, write_report
from tests.spark.conftest import Broker

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_ops_report_table_and_chart(spark: Any, orbit: Broker, tmp_path: Path) -> None:
    from orbitmq.client.blocking import BlockingAdminClient

    topic = orbit.new_topic("OpsReport", queues=2)
    orbit.produce([Message(topic, b"x") for _ in range(100)])
    admin = BlockingAdminClient(orbit.namesrv_addr)
    admin.start()
    try:
        queues = sorted(admin.topic_status(topic))
        for mq in queues:
            admin.update_consumer_offset("ops-group", mq, 10)
        first = sample_once(admin, [topic], ["ops-group"], int(time.time() * 1000) - 2000)
        orbit.produce([Message(topic, b"y") for _ in range(300)])
        second = sample_once(admin, [topic], ["ops-group"], int(time.time() * 1000))
    finally:
        admin.close()

    report = report_frame(spark, first + second).collect()
    topic_rows = [r for r in report if r.consumer_group == ""]
    assert [r.max_offset_total for r in sorted(topic_rows, key=lambda r: r.sample_ts)] == [100, 400]
    rate = [r.msgs_per_s for r in topic_rows if r.msgs_per_s is not None]
    # 300 messages written between samples at least 2 s apart.
    assert len(rate) == 1 and 10 < rate[0] <= 150
    lags = sorted(r.lag_total for r in report if r.consumer_group)
    assert lags == [100 - 2 * 10, 400 - 2 * 10]

    chart = write_report(report_frame(spark, first + second), str(tmp_path / "report"))
    assert chart.read_bytes().startswith(b"\x89PNG")
    csv_lines = "".join(
        p.read_text() for p in (tmp_path / "report" / "samples_csv").glob("*.csv")
    ).splitlines()
    assert csv_lines[0].startswith("sample_ts,topic,consumer_group") and len(csv_lines) == 5
    assert spark.read.parquet(str(tmp_path / "report" / "samples")).count() == 4


def _color_pixels(png: Path, color: str) -> int:
    """Pixels of ``png`` drawn in exactly ``color`` (lag lines have colors no topic line has)."""
    import numpy as np
    from matplotlib.colors import to_rgb
    from matplotlib.image import imread

    image = imread(str(png))[..., :3]
    return int(np.all(np.abs(image - np.array(to_rgb(color))) < 0.02, axis=-1).sum())


def test_ops_report_png_draws_a_lag_line_for_each_group_behind_even_uncommitted(
    spark: Any, orbit: Broker, tmp_path: Path
) -> None:
    from orbitmq.client.blocking import BlockingAdminClient
    from orbitmq.spark.pipelines.ops_report import GROUP_COLORS, collect_samples

    topic = orbit.new_topic("OpsLag", queues=2)
    orbit.produce([Message(topic, b"x") for _ in range(110)])
    admin = BlockingAdminClient(orbit.namesrv_addr)
    admin.start()
    try:
        queues = sorted(admin.topic_status(topic))
        # "ops-zero" committed 0 on one queue and never on the other: 110 behind.
        admin.update_consumer_offset("ops-zero", queues[0], 0)
        # "ops-half" committed half of each queue.
        for mq, status in admin.topic_status(topic).items():
            admin.update_consumer_offset("ops-half", mq, status.max_offset // 2)
    finally:
        admin.close()

    samples = collect_samples(orbit.namesrv_addr, None, ["ops-half", "ops-zero"], 3, 0.2)
    sampled_topics = {s.topic for s in samples}
    assert topic in sampled_topics
    internal = {"DefaultCluster", "DefaultCluster_REPLY_TOPIC", "broker-a", "SELF_TEST_TOPIC", "TBW102"}
    assert not sampled_topics & internal
    assert not {t for t in sampled_topics if t.startswith(("%RETRY%", "%DLQ%", "RMQ_SYS_", "rmq_sys_"))}
    lags = {(s.consumer_group, s.topic): s.lag_total for s in samples if s.consumer_group}
    assert lags[("ops-zero", topic)] == 110 and lags[("ops-half", topic)] == 55

    chart = write_report(report_frame(spark, samples), str(tmp_path / "report"))
    # Groups are drawn in sorted order: ops-half, then ops-zero; no third line.
    assert _color_pixels(chart, GROUP_COLORS[0]) > 300
    assert _color_pixels(chart, GROUP_COLORS[1]) > 300
    assert all(_color_pixels(chart, color) < 5 for color in GROUP_COLORS[2:])
