"""``bench peers`` reads the figures the anchors' own benchmark tools print: RocketMQ 5.5.0's
``benchmark.Producer`` / ``Consumer`` report lines and Kafka's ``ProducerPerformance`` /
``ConsumerPerformance`` summaries (lines as those tools print them), and says what the tool
printed last when it gave no figure."""

from __future__ import annotations

import subprocess
import sys

from orbitmq.bench.peers._tools import (
    parse_kafka_consumer,
    parse_kafka_producer,
    parse_rocketmq_consumer,
    parse_rocketmq_producer,
)

_PRODUCER = """topic: T, threadCount: 16, messageSize: 1024, keyEnable: false, propertySize: 0, tagCount: 0
 compressEnable: false, reportInterval: 1000
Current Time: 2026-11-28 19:35:07,016 | Send TPS: 981 | Max RT(ms): 946 | Average RT(ms):  16.201 | Send Failed: 0 | Response Failed: 0
Current Time: 2026-11-28 19:35:08,016 | Send TPS: 1153 | Max RT(ms): 946 | Average RT(ms):  13.714 | Send Failed: 2 | Response Failed: 0
"""
_CONSUMER = """Consumer Started.
Current Time: 2026-11-28 19:13:12,257 | Consume TPS: 0 | AVG(B2C) RT(ms):     NaN | AVG(S2C) RT(ms):     NaN | MAX(B2C) RT(ms): 0 | MAX(S2C) RT(ms): 0 | Consume Fail: 0
Current Time: 2026-11-28 19:13:13,257 | Consume TPS: 175 | AVG(B2C) RT(ms):  12.940 | AVG(S2C) RT(ms):  12.818 | MAX(B2C) RT(ms): 353 | MAX(S2C) RT(ms): 351 | Consume Fail: 0
"""
_KAFKA_PRODUCER = """5805 records sent, 1160.5 records/sec (1.13 MB/sec), 3457.3 ms avg latency, 5274.0 ms max latency.
50000 records sent, 3302.5 records/sec (3.23 MB/sec), 5340.59 ms avg latency, 7458.00 ms max latency, 5706 ms 50th, 7267 ms 95th, 7366 ms 99th, 7415 ms 99.9th.
"""
_KAFKA_CONSUMER = """start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-28 19:20:01:000, 2026-11-28 19:20:05:000, 48.8281, 12.2070, 50000, 12500.0000, 1500, 2500, 19.5312, 20000.0000
"""


def test_bench_peers_reads_the_last_report_of_rocketmqs_benchmark_producer() -> None:
    result = parse_rocketmq_producer(_PRODUCER)
    assert (result.rate, result.avg_ms, result.max_ms, result.failed) == (1153.0, 13.714, 946.0, 2)


def test_bench_peers_reads_the_last_report_of_rocketmqs_benchmark_consumer() -> None:
    result = parse_rocketmq_consumer(_CONSUMER)
    assert (result.rate, result.avg_ms, result.max_ms) == (175.0, 12.94, 353.0)
    idle = parse_rocketmq_consumer(_CONSUMER.splitlines()[1])
    assert idle.rate == 0.0 and idle.avg_ms is None


def test_bench_peers_reads_kafkas_perf_tool_summaries() -> None:
    produced = parse_kafka_producer(_KAFKA_PRODUCER)
    assert (produced.rate, produced.avg_ms, produced.max_ms, produced.p99_ms) == (
        3302.5,
        5340.59,
        7458.0,
        7366.0,
    )
    assert parse_kafka_consumer(_KAFKA_CONSUMER).rate == 20000.0


def test_bench_peers_says_what_a_tool_printed_last_when_it_gave_no_figure() -> None:
    result = parse_rocketmq_producer("topic: T, threadCount: 1\nException in thread main: connect failed\n")
    assert result.rate is None and result.note == "Exception in thread main: connect failed"
    assert parse_kafka_producer("").note == "no output"


def test_bench_peers_only_refuses_a_workload_it_does_not_know() -> None:
    """``--only`` names the workloads to run; a name it does not know is one line and exit 2, before any server."""
    done = subprocess.run(
        [sys.executable, "-m", "orbitmq.bench", "peers", "--only", "sync,batches"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--only takes sync, e2e, not batches" in done.stderr, done.stderr
    assert "bench peers: flush" not in done.stdout
