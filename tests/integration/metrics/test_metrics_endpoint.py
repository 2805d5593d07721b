"""/metrics of a broker and a name server against a known workload.

Method: a name server and a broker with ``metricsExporterType=PROM`` and
``metricsPromExporterPort=0`` (the bound port is read from the log line each server writes);
60 messages are produced to a one-queue topic (40 single sends, one batch of 20) with known
body sizes, a pull consumer reads exactly 25 of them and commits offset 25. The scrape is
parsed with prometheus_client's own text parser and every count, byte total and lag is
compared with what the workload did.
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from orbitmq.client import Message, Producer, PullConsumer
from orbitmq.client.admin import AdminClient
from orbitmq.model.message import MessageQueue
from tests.support.processes import ServerProcess, start_broker, start_namesrv, wait_route

pytestmark = pytest.mark.integration

TOPIC = "MetricsTopic"
GROUP = "CG_METRICS"
_URL = re.compile(r"metrics at (http://\S+/metrics)")


def metrics_url(server: ServerProcess, timeout_s: float = 15.0) -> str:
    """The /metrics address the server logged once it bound its port."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = _URL.search(server.log_path.read_text(errors="replace"))
        if found:
            return found.group(1)
        time.sleep(0.05)
    raise AssertionError(f"{server.name} never logged its metrics address:\n{server.log()[-3000:]}")


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of one scrape, keyed by (sample name, sorted labels)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def declared(url: str) -> set[str]:
    """Names of every family served, with or without samples (counters as ``<name>_total``)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = set()
    for family in text_string_to_metric_families(text):
        found.add(f"{family.name}_total" if family.type == "counter" else family.name)
    return found


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The one sample named ``name`` whose labels include ``labels``."""
    matches = [
        v
        for (sample, sample_labels), v in samples.items()
        if sample == name and labels.items() <= dict(sample_labels).items()
    ]
    assert len(matches) == 1, f"{name} {labels}: {len(matches)} samples"
    return matches[0]


async def _workload(namesrv: str, bodies: list[bytes]) -> None:
    async with AdminClient(namesrv) as admin:
        await admin.create_topic(TOPIC, queue_nums=1)
    async with Producer("PG_METRICS", namesrv) as producer:
        for body in bodies[:40]:
            await producer.send(Message(TOPIC, body))
        await producer.send_batch([Message(TOPIC, body) for body in bodies[40:]])
    consumer = PullConsumer(GROUP, namesrv)
    await consumer.start()
    try:
        mq = MessageQueue(TOPIC, "broker-a", 0)
        read = [m async for batch in consumer.pull_range(mq, 0, 25, max_msg_nums=10) for m in batch]
        assert len(read) == 25
        await consumer.commit_sync({mq: 25})
    finally:
        await consumer.shutdown()


def test_metrics_endpoint_counts_and_lag_match_the_workload(tmp_path: Path) -> None:
    namesrv = start_namesrv_with_metrics(tmp_path)
    broker = start_broker(
        tmp_path,
        namesrv.addr,
        metricsExporterType="PROM",
        metricsPromExporterPort=0,
        metricsPromExporterHost="127.0.0.1",
    )
    try:
        # The broker's port accepts connections a moment before its registration lands.
        wait_route(namesrv.addr, "TBW102", {"broker-a"})
        bodies = [b"x" * (100 + 37 * i) for i in range(40)] + [b"y" * 2000 for _ in range(20)]
        asyncio.run(_workload(namesrv.addr, bodies))
        samples = scrape(metrics_url(broker))
        node = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
        topic = {"topic": TOPIC, "message_type": "normal", "is_system": "false", **node}
        assert value(samples, "rocketmq_messages_in_total", **topic) == 60
        assert value(samples, "rocketmq_throughput_in_total", **topic) == sum(map(len, bodies))
        # 5.x buckets: 1 KiB holds the 40 small bodies with at most 1024 bytes.
        small = sum(1 for body in bodies if len(body) <= 1024)
        assert value(samples, "rocketmq_message_size_bucket", le="1024.0", **topic) == small
        assert value(samples, "rocketmq_message_size_count", **topic) == 60
        assert value(samples, "rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP) == 25
        assert value(samples, "rocketmq_throughput_out_total", topic=TOPIC, consumer_group=GROUP) > sum(
            map(len, bodies[:25])
        )
        assert value(samples, "rocketmq_consumer_lag_messages", topic=TOPIC, consumer_group=GROUP) == 35
        assert value(samples, "rocketmq_consumer_lag_latency", topic=TOPIC, consumer_group=GROUP) >= 0
        assert value(samples, "rocketmq_group_diff", topic=TOPIC, group=GROUP) == 35
        assert value(samples, "rocketmq_consumer_offset", topic=TOPIC, group=GROUP) == 25
        assert value(samples, "rocketmq_producer_offset", topic=TOPIC) == 60
        assert value(samples, "rocketmq_brokeruntime_msg_put_total_today_now") == 60
        assert value(samples, "rocketmq_producer_tps", topic=TOPIC) > 0
        sends = value(
            samples, "rocketmq_rpc_latency_count", request_code="send_message_v2", response_code="0"
        )
        batches = value(
            samples, "rocketmq_rpc_latency_count", request_code="send_batch_message", response_code="0"
        )
        assert (sends, batches) == (40, 1)
        assert value(samples, "rocketmq_topic_number", **node) >= 1
        assert value(samples, "rocketmq_storage_size", **node) > sum(map(len, bodies))

        names = scrape(metrics_url(namesrv))
        # Every series the Grafana dashboard in docs/ charts is served by one of the two.
        dashboard = (Path(__file__).parents[3] / "docs" / "grafana" / "orbitmq-dashboard.json").read_text()
        served = {name for name, _ in samples} | {name for name, _ in names} | declared(metrics_url(broker))
        charted = set(re.findall(r"rocketmq_[a-z0-9_]+", dashboard))
        assert charted and charted <= served, sorted(charted - served)
        assert value(names, "rocketmq_namesrv_broker_number") == 1
        assert value(names, "rocketmq_topic_number") >= 1
        routes = value(
            names, "rocketmq_rpc_latency_count", request_code="get_routeinfo_by_topic", response_code="0"
        )
        assert routes >= 1
    finally:
        broker.stop()
        namesrv.stop()


def start_namesrv_with_metrics(tmp_path: Path) -> ServerProcess:
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        "metricsExporterType=PROM\nmetricsPromExporterPort=0\nmetricsPromExporterHost=127.0.0.1\n"
    )
    return start_namesrv(tmp_path, "namesrv", "-c", str(conf))
