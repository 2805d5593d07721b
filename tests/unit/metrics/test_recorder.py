"""The metrics recorder and families: counts, buckets and rates, without a server.

Method: feed a :class:`Recorder` known sends, pulls, dead letters and request latencies with
explicit times, render the families to Prometheus text with prometheus_client, parse the text
back with prometheus_client's parser and compare every value.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from orbitmq.metrics import (
    BrokerView,
    LagRow,
    Recorder,
    broker_families,
    message_type_of,
    request_code_names,
    rpc_timer,
)
from orbitmq.metrics.recorder import Histogram
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand


def _parse(
    recorder: Recorder, view: BrokerView, now_ms: int
) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    snapshot = recorder.snapshot(now_ms)

    class Fixed(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            return broker_families(snapshot, view, request_code_names())

    registry = CollectorRegistry()
    registry.register(Fixed())
    text = generate_latest(registry).decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _get(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_histogram_observe_counts_each_bucket_up_to_its_bound() -> None:
    values = [10, 1024, 1025, 5000, 600_000, 5 * 1024 * 1024]
    histogram = Histogram((1024, 4096, 512 * 1024))
    for value in values:
        histogram.observe(value)
    assert histogram.counts == [2, 1, 1, 2]
    assert (histogram.total, histogram.count) == (sum(values), 6)


def test_recorder_batch_sizes_land_in_the_bucket_of_their_average() -> None:
    recorder = Recorder()
    recorder.count_in("T", "normal", 20 * 2000, 20)
    snapshot = recorder.snapshot(1)
    sizes = snapshot.message_size[("T", "normal", False)]
    assert sizes.counts[:2] == [0, 20]
    assert (sizes.count, sizes.total) == (20, 40_000)


def test_recorder_rates_span_the_last_minute() -> None:
    recorder = Recorder()
    recorder.sample(0)
    recorder.count_in("T", "normal", 3000, 30)
    recorder.sample(10_000)
    recorder.count_in("T", "normal", 3000, 30)
    snapshot = recorder.snapshot(20_000)
    assert snapshot.put_tps == {"T": 3.0}
    assert snapshot.broker_put_tps == 3.0
    # Samples older than the window fall out: only the last minute counts.
    for second in range(30, 200, 10):
        recorder.sample(second * 1000)
    assert recorder.snapshot(200_000).put_tps == {"T": 0.0}


def test_broker_families_render_counts_lag_and_latency() -> None:
    # Messages out are the broker's GROUP_GET_NUMS/GROUP_GET_SIZE, read on sample and scrape.
    out: dict[tuple[str, str], tuple[int, int]] = {}
    recorder = Recorder(lambda topic: topic.startswith("rmq_sys_"), lambda: out)
    recorder.sample(0)
    out[("Orders", "CG")] = (3, 2600)
    recorder.count_in("Orders", "normal", 200)
    recorder.count_in("Orders", "normal", 300)
    recorder.count_in("Orders", "normal", 2000)
    recorder.count_in("Orders", "delay", 50)
    recorder.count_in("rmq_sys_X", "normal", 50)
    recorder.count_dlq("CG", "Orders")
    recorder.count_rpc(310, 0, False, "success", 0.5)
    recorder.count_rpc(310, 0, False, "success", 50.0)
    view = BrokerView(
        "C1", "broker-a", 0, "127.0.0.1:10911", "OrbitMQ 0.1.0", 1, 6, topic_max_offsets={"Orders": 4}
    )
    view.lags = [LagRow("CG", "Orders", False, False, 1, 1500, 3, 2, "1")]
    samples = _parse(recorder, view, 10_000)
    normal = {"topic": "Orders", "message_type": "normal", "node_id": "broker-a", "cluster": "C1"}
    assert _get(samples, "rocketmq_messages_in_total", **normal) == 3
    assert _get(samples, "rocketmq_throughput_in_total", **normal) == 2500
    assert _get(samples, "rocketmq_message_size_bucket", le="1024.0", **normal) == 2
    assert _get(samples, "rocketmq_message_size_bucket", le="4096.0", **normal) == 3
    assert _get(samples, "rocketmq_messages_in_total", message_type="delay") == 1
    assert _get(samples, "rocketmq_messages_out_total", consumer_group="CG") == 3
    assert _get(samples, "rocketmq_send_to_dlq_messages_total", consumer_group="CG") == 1
    assert _get(samples, "rocketmq_rpc_latency_bucket", request_code="send_message_v2", le="1.0") == 1
    assert _get(samples, "rocketmq_rpc_latency_count", request_code="send_message_v2") == 2
    assert _get(samples, "rocketmq_consumer_lag_messages", consumer_group="CG") == 1
    assert _get(samples, "rocketmq_consumer_lag_latency", consumer_group="CG") == 1500
    assert _get(samples, "rocketmq_group_diff", group="CG", countOfOnlineConsumers="2", msgModel="1") == 1
    assert _get(samples, "rocketmq_producer_tps", topic="Orders") == 0.4
    assert _get(samples, "rocketmq_consumer_tps", topic="Orders", group="CG") == 0.3
    assert _get(samples, "rocketmq_producer_offset", topic="Orders") == 4
    assert _get(samples, "rocketmq_brokeruntime_msg_put_total_today_now") == 5
    assert _get(samples, "rocketmq_messages_in_total", topic="rmq_sys_X", is_system="true") == 1


def test_message_type_of_reads_the_properties_5x_labels_by() -> None:
    assert message_type_of({}) == "normal"
    assert message_type_of({"TRAN_MSG": "true"}) == "transaction"
    assert message_type_of({"DELAY": "3"}) == "delay"
    assert message_type_of({"TIMER_DELIVER_MS": "1"}) == "delay"
    assert message_type_of({"__SHARDINGKEY": "g"}) == "fifo"


def test_rpc_timer_labels_success_oneway_failure_and_long_polls() -> None:
    recorder = Recorder()
    timer = rpc_timer(recorder)
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {})
    ok = request.response(ResponseCode.SUCCESS)
    timer(RequestCode.SEND_MESSAGE_V2, ok, False, 400_000)  # 0.4 ms
    timer(RequestCode.SEND_MESSAGE_V2, ok, False, 4_000_000)  # 4 ms
    timer(RequestCode.SEND_MESSAGE_V2, None, False, 100_000)
    timer(RequestCode.SEND_MESSAGE_V2, request.response(ResponseCode.SYSTEM_ERROR), True, 100_000)
    found = request.response(ResponseCode.SUCCESS)
    timer(RequestCode.PULL_MESSAGE, found, False, 600_000_000)  # parked 600 ms
    timer(RequestCode.PULL_MESSAGE, found, False, 2_000_000)
    success = recorder.rpc_latency[(RequestCode.SEND_MESSAGE_V2, 0, False, "success")].to_ms()
    assert (success.counts[:3], success.count, success.total) == ([1, 0, 1], 2, 4.4)
    assert recorder.rpc_latency[(RequestCode.SEND_MESSAGE_V2, -1, False, "oneway")].to_ms().count == 1
    failed = recorder.rpc_latency[(RequestCode.SEND_MESSAGE_V2, 1, False, "process_request_failed")]
    assert failed.to_ms().count == 1
    assert recorder.rpc_latency[(RequestCode.PULL_MESSAGE, 0, True, "success")].to_ms().count == 1
    assert recorder.rpc_latency[(RequestCode.PULL_MESSAGE, 0, False, "success")].to_ms().count == 1


def _tracked_objects_made(action: Callable[[], object]) -> int:
    """How many objects the cyclic garbage collector tracks more after ``action()`` (the
    young generation's count, with collections held off meanwhile)."""
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        kept = action()
        made = gc.get_count()[0] - before
        del kept
    finally:
        gc.enable()
    return made


def test_recorder_captures_on_the_loop_make_no_object_per_topic() -> None:
    # The event loop's part of a scrape and of a rate sample copied the per-topic tables as
    # lists of pairs: 50,000 pairs per copy, promoted to the oldest generation while the scrape
    # runs, until a full collection walked every object of the broker for seconds.
    recorder = Recorder()
    for index in range(5_000):
        recorder.count_in(f"T{index}", "normal", 100)
    assert _tracked_objects_made(lambda: recorder.capture(1_000)) < 50
    assert _tracked_objects_made(recorder.capture_sample) < 50
