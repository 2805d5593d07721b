"""/metrics on a broker with thousands of topics: a bounded scrape that never stalls the broker.

Method: a broker with ``metricsMaxTopicLabels=20`` gets one message on each of 3,000 new
topics (created by the sends), then is scraped three times while a prober sends GET_MAX_OFFSET
every 5 ms. The scrape must stay small (20 topics one by one, the rest under
``topic="__other__"``) and still count every message, and no probe may wait long: at most
500 ms more than the slowest probe of the 3 s before the scrapes (generous for a loaded 2-core
machine, where a scrape that builds every topic's series on the broker's event loop holds it
for well over a second).
"""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from orbitmq.bench._metrics_scale import scrape_under_probe, send_to_topics
from tests.integration.metrics.test_metrics_endpoint import metrics_url
from tests.support.processes import start_broker

pytestmark = pytest.mark.integration

TOPICS = 3000
CAP = 20
PROBE_BOUND_MS = 500.0
SCRAPE_BOUND_BYTES = 200_000


def test_metrics_scrape_is_bounded_and_never_stalls_the_broker_with_thousands_of_topics(
    tmp_path: Path,
) -> None:
    broker = start_broker(
        tmp_path,
        None,
        metricsExporterType="PROM",
        metricsPromExporterPort=0,
        metricsPromExporterHost="127.0.0.1",
        metricsMaxTopicLabels=CAP,
        metricsMaxGroupLabels=CAP,
    )
    try:
        url = metrics_url(broker)
        asyncio.run(send_to_topics(broker.addr, TOPICS, "ScaleTopic"))
        # The prober first runs 3 s without scrapes: what the broker's own work costs right after
        # creating the topics (flushes, registration) is the reference the scrapes are held to.
        result = asyncio.run(scrape_under_probe(broker.addr, url, "ScaleTopic0", scrapes=3, idle_s=3.0))
        assert not result.scrape_errors, result.scrape_errors
        assert not result.probe_failures, result.probe_failures[:5]
        assert max(result.scrape_bytes) < SCRAPE_BOUND_BYTES, result.scrape_bytes
        assert result.probe_max_ms < PROBE_BOUND_MS + result.idle_probe_max_ms, (
            result.probe_max_ms,
            result.idle_probe_max_ms,
            result.scrape_s,
        )

        with urllib.request.urlopen(url, timeout=30) as response:
            text = response.read().decode()
        per_topic: dict[str, float] = {}
        topic_number = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "rocketmq_messages_in_total":
                    topic = sample.labels["topic"]
                    per_topic[topic] = per_topic.get(topic, 0) + sample.value
                if sample.name == "rocketmq_topic_number":
                    topic_number = sample.value
        assert "__other__" in per_topic
        assert len(per_topic) <= CAP + 1
        # Folding keeps the totals: every one of the sends is counted once.
        assert sum(per_topic.values()) == TOPICS
        assert topic_number >= TOPICS
    finally:
        broker.stop()
