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
