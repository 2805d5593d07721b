"""The broker's /metrics switch: off by default, on a free port with metricsExporterType=PROM.

Method: in-process brokers (tests/unit/broker/_apps.py); the scrape runs on another thread,
as Prometheus' request does, so the families are built on the broker's loop through
SlicedCollector while that loop keeps serving.
"""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.unit.broker._apps import start_broker_app


def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_broker_metrics_are_off_by_default(tmp_path: Path) -> None:
    app = await start_broker_app(tmp_path)
    try:
        assert app.metrics_port is None
    finally:
        await app.shutdown()


async def test_broker_metrics_serve_families_built_on_the_broker_loop(tmp_path: Path) -> None:
    app = await start_broker_app(
        tmp_path, metricsExporterType="PROM", metricsPromExporterPort="0", metricsPromExporterHost="127.0.0.1"
    )
    try:
        assert app.metrics_port
        url = f"http://127.0.0.1:{app.metrics_port}/metrics"
        samples = await asyncio.to_thread(_scrape, url)
        assert samples["rocketmq_broker_permission"] == 6
        assert samples["rocketmq_topic_number"] >= 1  # the system topics
        assert samples["rocketmq_brokeruntime_msg_put_total_today_now"] == 0
    finally:
        await app.shutdown()
    assert app.metrics_port is None
