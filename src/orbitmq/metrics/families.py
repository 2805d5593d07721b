"""Prometheus metric families of a broker and a name server, built at scrape time.

Two sets of names, so that existing dashboards work unchanged (operations-features §3):

- RocketMQ 5.x's built-in metrics (§3.2): ``rocketmq_messages_in_total``,
  ``rocketmq_throughput_in_total``, ``rocketmq_messages_out_total``,
  ``rocketmq_throughput_out_total``, ``rocketmq_message_size``, ``rocketmq_consumer_lag_messages``,
  ``rocketmq_consumer_lag_latency``, ``rocketmq_send_to_dlq_messages_total``,
  ``rocketmq_rpc_latency``, ``rocketmq_storage_*``, ``rocketmq_*_connections``,
  ``rocketmq_topic_number``, ``rocketmq_consumer_group_number``, ``rocketmq_broker_permission``.
  Every series carries ``cluster``, ``node_type`` and ``node_id``.
- rocketmq-exporter's gauges (§3.1): ``rocketmq_producer_tps``, ``rocketmq_producer_offset``,
  ``rocketmq_producer_message_size``, ``rocketmq_consumer_tps``, ``rocketmq_consumer_offset``,
  ``rocketmq_group_diff``, ``rocketmq_broker_tps``, ``rocketmq_broker_qps`` and the
  ``rocketmq_brokeruntime_*`` gauges people chart (put/get totals and TPS, commit-log range and
  disk, dispatch and flush backlog).

Input is plain data: a :class:`RecorderSnapshot` (counted on the request path) and a
:class:`BrokerView` (read from the broker's tables on scrape). prometheus_client's
``*MetricFamily`` classes only carry the values; nothing here is registered globally.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from orbitmq.metrics.recorder import Histogram, RecorderSnapshot

__all__ = ["BrokerView", "LagRow", "NamesrvView", "broker_families", "namesrv_families"]


@dataclass(frozen=True, slots=True)
class LagRow:
    """One consumer group on one topic of this broker, summed over its queues."""

    group: str
    topic: str
    is_retry: bool
    is_system: bool
    lag_messages: int
    lag_latency_ms: int
    """Age of the oldest message not yet consumed (0 when nothing is behind)."""
    consumer_offset: int
    """Sum of the group's committed offsets over the topic's queues."""
    online_consumers: int
    msg_model: str
    """rocketmq-exporter's ``msgModel``: ``"1"`` clustering, ``"0"`` broadcasting."""


@dataclass(slots=True)
class BrokerView:
    """What a scrape reads from the broker's tables and store (see ``broker.metrics_view``)."""

    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    version: str
    boot_timestamp_ms: int
    permission: int
    topic_max_offsets: dict[str, int] = field(default_factory=dict)
    """Sum of the max queue offsets per topic (rocketmq_producer_offset)."""
    topic_number: int | None = None
    """Topics on this broker (None: as many as ``topic_max_offsets`` has, before any folding)."""
    system_topics: frozenset[str] = frozenset()
    lags: list[LagRow] = field(default_factory=list)
    group_number: int = 0
    storage_size_bytes: int = 0
    flush_behind_bytes: int = 0
    dispatch_behind_bytes: int = 0
    message_reserve_time_ms: int = 0
    commit_log_min_offset: int = 0
    commit_log_max_offset: int = 0
    disk_total_bytes: int = 0
    disk_free_bytes: int = 0
    producer_connections: dict[tuple[str, str], int] = field(default_factory=dict)
    """(language, version) -> connections."""
    consumer_connections: dict[tuple[str, str, str, str, bool], int] = field(default_factory=dict)
    """(group, language, version, consume_mode, is_system) -> connections."""


@dataclass(slots=True)
class NamesrvView:
    """What a scrape reads from the name server's route table."""

    node_id: str
    cluster_count: int
    broker_count: int
    topic_count: int


def _flag(value: bool) -> str:
    return "true" if value else "false"


class _Families:
    """Builds families that all start with the same constant labels."""

    def __init__(self, names: list[str], values: list[str]) -> None:
        self.names = names
        self.values = values

    def counter(self, name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
        return CounterMetricFamily(name, doc, labels=self.names + labels)

    def gauge(self, name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=self.names + labels)

    def histogram(self, name: str, doc: str, labels: list[str]) -> HistogramMetricFamily:
        return HistogramMetricFamily(name, doc, labels=self.names + labels)

    def add(self, family: GaugeMetricFamily | CounterMetricFamily, labels: list[str], value: float) -> None:
        family.add_metric(self.values + labels, value)

    def add_histogram(self, family: HistogramMetricFamily, labels: list[str], histogram: Histogram) -> None:
        running = 0
        buckets: list[tuple[str, float]] = []
        for bound, count in zip(histogram.bounds, histogram.counts, strict=False):
            running += count
            buckets.append((repr(float(bound)), running))
        buckets.append(("+Inf", histogram.count))
        family.add_metric(self.values + labels, buckets, histogram.total)


def rpc_families(constants: _Families, snapshot: RecorderSnapshot, code_names: dict[int, str]) -> Metric:
    family = constants.histogram(
        "rocketmq_rpc_latency",
        "Remoting request handling time in milliseconds",
        ["protocol_type", "request_code", "response_code", "is_long_polling", "result"],
    )
    for (request_code, response_code, long_polling, result), histogram in sorted(
        snapshot.rpc_latency.items()
    ):
        labels = [
            "remoting",
            code_names.get(request_code, str(request_code)),
            str(response_code),
            _flag(long_polling),
            result,
        ]
        constants.add_histogram(family, labels, histogram)
    return family


def broker_families(
    snapshot: RecorderSnapshot, view: BrokerView, code_names: dict[int, str]
) -> Iterator[Metric]:
    """Every family of one broker: 5.x names first, then rocketmq-exporter's."""
    node = _Families(["cluster", "node_type", "node_id"], [view.cluster, "broker", view.broker_name])
    yield from _traffic(node, snapshot)
    yield from _lag(node, view)
    yield rpc_families(node, snapshot, code_names)
    yield from _broker_state(node, view)
    yield from _exporter(snapshot, view)


def _traffic(node: _Families, snapshot: RecorderSnapshot) -> Iterator[Metric]:
    messages_in = node.counter(
        "rocketmq_messages_in", "Messages produced", ["topic", "message_type", "is_system"]
    )
    bytes_in = node.counter(
        "rocketmq_throughput_in", "Message bytes produced", ["topic", "message_type", "is_system"]
    )
    sizes = node.histogram(
        "rocketmq_message_size", "Produced message size in bytes", ["topic", "message_type", "is_system"]
    )
    for (topic, message_type, is_system), (count, size) in sorted(snapshot.messages_in.items()):
        labels = [topic, message_type, _flag(is_system)]
        node.add(messages_in, labels, count)
        node.add(bytes_in, labels, size)
        node.add_histogram(sizes, labels, snapshot.message_size[(topic, message_type, is_system)])
    messages_out = node.counter(
        "rocketmq_messages_out", "Messages consumed", ["topic", "consumer_group", "is_system"]
    )
    bytes_out = node.counter(
        "rocketmq_throughput_out", "Message bytes consumed", ["topic", "consumer_group", "is_system"]
    )
    for (topic, group, is_system), (count, size) in sorted(snapshot.messages_out.items()):
        labels = [topic, group, _flag(is_system)]
        node.add(messages_out, labels, count)
        node.add(bytes_out, labels, size)
    dlq = node.counter(
        "rocketmq_send_to_dlq_messages",
        "Messages moved to the dead-letter queue",
        ["consumer_group", "topic", "is_system"],
    )
    for (group, topic, is_system), count in sorted(snapshot.send_to_dlq.items()):
        node.add(dlq, [group, topic, _flag(is_system)], count)
    yield from (messages_in, bytes_in, sizes, messages_out, bytes_out, dlq)


def _lag(node: _Families, view: BrokerView) -> Iterator[Metric]:
    labels = ["consumer_group", "topic", "is_retry", "is_system"]
    lag = node.gauge("rocketmq_consumer_lag_messages", "Messages not yet consumed by the group", labels)
    latency = node.gauge(
        "rocketmq_consumer_lag_latency", "Age in ms of the oldest message not yet consumed", labels
    )
    for row in view.lags:
        values = [row.group, row.topic, _flag(row.is_retry), _flag(row.is_system)]
        node.add(lag, values, row.lag_messages)
        node.add(latency, values, row.lag_latency_ms)
    yield from (lag, latency)


def _broker_state(node: _Families, view: BrokerView) -> Iterator[Metric]:
    storage = ["storage_type", "storage_medium"]
    local = ["local", "disk"]
    for name, doc, value in (
        ("rocketmq_storage_size", "Bytes of the commit log on disk", view.storage_size_bytes),
        ("rocketmq_storage_flush_behind_bytes", "Bytes written but not yet flushed", view.flush_behind_bytes),
        (
            "rocketmq_storage_dispatch_behind_bytes",
            "Bytes stored but not yet dispatched",
            view.dispatch_behind_bytes,
        ),
        (
            "rocketmq_storage_message_reserve_time",
            "Age in ms of the oldest stored message",
            view.message_reserve_time_ms,
        ),
    ):
        family = node.gauge(name, doc, storage)
        node.add(family, local, value)
        yield family
    producers = node.gauge(
        "rocketmq_producer_connections", "Producer connections", ["language", "version", "protocol_type"]
    )
    for (language, version), count in sorted(view.producer_connections.items()):
        node.add(producers, [language, version, "remoting"], count)
    consumers = node.gauge(
        "rocketmq_consumer_connections",
        "Consumer connections",
        ["consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"],
    )
    for (group, language, version, mode, is_system), count in sorted(view.consumer_connections.items()):
        node.add(consumers, [group, language, version, mode, "remoting", _flag(is_system)], count)
    yield from (producers, consumers)
    for name, doc, value in (
        (
            "rocketmq_topic_number",
            "Topics on this broker",
            len(view.topic_max_offsets) if view.topic_number is None else view.topic_number,
        ),
        ("rocketmq_consumer_group_number", "Consumer groups on this broker", view.group_number),
        ("rocketmq_broker_permission", "Broker permission bits (2 write, 4 read)", view.permission),
    ):
        family = node.gauge(name, doc, [])
        node.add(family, [], value)
        yield family


def _exporter(snapshot: RecorderSnapshot, view: BrokerView) -> Iterator[Metric]:
    """rocketmq-exporter's gauges (it polls admin requests; here they come from the broker itself)."""
    broker = [view.cluster, view.broker_name]
    topic_labels = ["cluster", "broker", "topic"]
    producer_tps = GaugeMetricFamily(
        "rocketmq_producer_tps", "Messages produced per second, last minute", labels=topic_labels
    )
    for topic, tps in sorted(snapshot.put_tps.items()):
        producer_tps.add_metric([*broker, topic], tps)
    producer_offset = GaugeMetricFamily(
        "rocketmq_producer_offset", "Sum of the topic's max queue offsets", labels=topic_labels
    )
    for topic, offset in sorted(view.topic_max_offsets.items()):
        producer_offset.add_metric([*broker, topic], offset)
    group_labels = ["cluster", "broker", "topic", "group"]
    consumer_tps = GaugeMetricFamily(
        "rocketmq_consumer_tps", "Messages consumed per second, last minute", labels=group_labels
    )
    for (topic, group), tps in sorted(snapshot.get_tps.items()):
        consumer_tps.add_metric([*broker, topic, group], tps)
    consumer_offset = GaugeMetricFamily(
        "rocketmq_consumer_offset", "Sum of the group's committed offsets", labels=group_labels
    )
    diff = GaugeMetricFamily(
        "rocketmq_group_diff",
        "Messages not yet consumed (clustering groups)",
        labels=["group", "topic", "countOfOnlineConsumers", "msgModel"],
    )
    for row in view.lags:
        consumer_offset.add_metric([*broker, row.topic, row.group], row.consumer_offset)
        if not row.is_retry:
            diff.add_metric(
                [row.group, row.topic, str(row.online_consumers), row.msg_model], row.lag_messages
            )
    broker_labels = ["cluster", "brokerIP", "broker"]
    broker_tps = GaugeMetricFamily("rocketmq_broker_tps", "Messages put per second", labels=broker_labels)
    broker_tps.add_metric([view.cluster, view.broker_addr, view.broker_name], snapshot.broker_put_tps)
    broker_qps = GaugeMetricFamily("rocketmq_broker_qps", "Messages got per second", labels=broker_labels)
    broker_qps.add_metric([view.cluster, view.broker_addr, view.broker_name], snapshot.broker_get_tps)
    yield from (producer_tps, producer_offset, consumer_tps, consumer_offset, diff, broker_tps, broker_qps)
    yield from _runtime(snapshot, view)


def _runtime(snapshot: RecorderSnapshot, view: BrokerView) -> Iterator[Metric]:
    labels = ["cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"]
    values = [
        view.cluster,
        view.broker_addr,
        view.broker_name,
        "MASTER" if view.broker_id == 0 else "SLAVE",
        str(view.boot_timestamp_ms),
        view.version,
    ]
    disk_ratio = 1 - view.disk_free_bytes / view.disk_total_bytes if view.disk_total_bytes else 0.0
    for suffix, value in (
        ("msg_put_total_today_now", snapshot.put_total),
        ("msg_gettotal_today_now", snapshot.get_total),
        ("put_tps60", snapshot.broker_put_tps),
        ("gettransfered_tps60", snapshot.broker_get_tps),
        ("commitlog_minoffset", view.commit_log_min_offset),
        ("commitlog_maxoffset", view.commit_log_max_offset),
        ("commitlog_disk_ratio", disk_ratio),
        ("commitlogdir_capacity_total", view.disk_total_bytes),
        ("commitlogdir_capacity_free", view.disk_free_bytes),
        ("dispatch_behind_bytes", view.dispatch_behind_bytes),
        ("remain_howmanydata_toflush", view.flush_behind_bytes),
    ):
        family = GaugeMetricFamily(
            f"rocketmq_brokeruntime_{suffix}", f"broker runtime {suffix}", labels=labels
        )
        family.add_metric(values, value)
        yield family


def namesrv_families(
    snapshot: RecorderSnapshot, view: NamesrvView, code_names: dict[int, str]
) -> Iterator[Metric]:
    """The name server's families: request latencies and the size of its route table."""
    node = _Families(["cluster", "node_type", "node_id"], ["", "namesrv", view.node_id])
    yield rpc_families(node, snapshot, code_names)
    for name, doc, value in (
        ("rocketmq_namesrv_cluster_number", "Clusters registered", view.cluster_count),
        ("rocketmq_namesrv_broker_number", "Broker groups registered", view.broker_count),
        ("rocketmq_topic_number", "Topics with a route", view.topic_count),
    ):
        family = node.gauge(name, doc, [])
        node.add(family, [], value)
        yield family
