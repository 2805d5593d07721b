"""The anchors' own benchmark tools, run unchanged as subprocesses, and what their output says.

- RocketMQ's ``org.apache.rocketmq.example.benchmark.Producer`` (``rocketmq-example``): ``-w``
  threads each sending synchronously in a loop; every ``-ri`` ms (asked for every second here)
  once it holds 10 one-second snapshots, it prints the send TPS over those 10, the average
  and the max round trip (ms). It runs until stopped; the benchmark stops it after
  ``seconds`` and takes its last line, which covers the last ~9 s (the JVM warmed up before).
- RocketMQ's ``benchmark.Consumer``: a ``DefaultMQPushConsumer`` with ``-w`` consume threads;
  the same way, the consume TPS and the average / max born-to-consume time (B2C, ms).
- Kafka's ``org.apache.kafka.tools.ProducerPerformance`` (one producer, asynchronous, its
  default batching) and ``ConsumerPerformance`` (one consumer from the earliest offset).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orbitmq.bench._peers import process_cpu_s
from orbitmq.bench.peers._jvm import TOOL_HEAP

__all__ = [
    "ToolResult",
    "kafka_consumer_perf",
    "kafka_producer_perf",
    "rocketmq_consumer",
    "rocketmq_producer",
]

# 5.5.0's lines: "Current Time: ... | Send TPS: 1234 | Max RT(ms): 5 | Average RT(ms):   0.812 | Send Failed: 0 | ..."
# The JVM's start, the client's and the first 10 one-second snapshots before a first report.
START_ALLOWANCE_S = 90.0
_PRODUCER_LINE = re.compile(
    r"Send TPS: (\d+) \| Max RT\(ms\): (\d+) \| Average RT\(ms\):\s*([\d.]+|NaN) \| Send Failed: (\d+)"
)
# "Current Time: ... | Consume TPS: 1234 | AVG(B2C) RT(ms):   1.2 | AVG(S2C) RT(ms): ... | MAX(B2C) RT(ms): 9 | ..."
_CONSUMER_LINE = re.compile(
    r"Consume TPS: (\d+) \| AVG\(B2C\) RT\(ms\):\s*([\d.]+|NaN) \|.*?MAX\(B2C\) RT\(ms\): (\d+)"
)
_KAFKA_PRODUCER = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency"
    r"(?:, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th)?"
)


@dataclass(slots=True)
class ToolResult:
    """One tool run: messages/s, latencies in ms where the tool gives them, failures, the
    tool's own CPU seconds, and its output's tail when it gave no figure."""

    rate: float | None
    avg_ms: float | None = None
    max_ms: float | None = None
    p99_ms: float | None = None
    failed: int = 0
    tool_cpu_s: float = 0.0
    note: str = ""


def _java(java: str, classpath: str, main: str, *args: str) -> list[str]:
    return [java, *TOOL_HEAP, "-Djava.net.preferIPv4Stack=true", "-cp", classpath, main, *args]


def _run_for(
    cmd: list[str], seconds: float, log: Path, until: Callable[[str], bool] | None = None
) -> tuple[str, float]:
    """Run ``cmd`` until ``until(output)`` holds, it exits, or ``seconds`` pass; its output and CPU seconds."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    cpu = 0.0
    try:
        deadline = time.monotonic() + seconds
        while proc.poll() is None and time.monotonic() < deadline:
            cpu = process_cpu_s(proc.pid) or cpu
            time.sleep(0.25)
            if until is not None and until(log.read_text(errors="replace")):
                break
        cpu = process_cpu_s(proc.pid) or cpu
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    return log.read_text(errors="replace"), cpu


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


def _number(text: str) -> float | None:
    return None if text == "NaN" else float(text)


def rocketmq_producer(
    java: str, classpath: str, namesrv: str, topic: str, size: int, threads: int, reports: int, log: Path
) -> ToolResult:
    """RocketMQ's benchmark Producer until it printed ``reports`` reports (one a second once
    its first 10 s are behind it); the last one's figures."""
    cmd = _java(
        java, classpath, "org.apache.rocketmq.example.benchmark.Producer",
        "-n", namesrv, "-t", topic, "-s", str(size), "-w", str(threads), "-ri", "1000",
    )  # fmt: skip
    text, cpu = _run_for(
        cmd, reports + START_ALLOWANCE_S, log, lambda out: len(_PRODUCER_LINE.findall(out)) >= reports
    )
    result = parse_rocketmq_producer(text)
    result.tool_cpu_s = cpu
    return result


def parse_rocketmq_producer(text: str) -> ToolResult:
    """The last report of RocketMQ's benchmark Producer in ``text``."""
    lines = _PRODUCER_LINE.findall(text)
    if not lines:
        return ToolResult(None, note=_tail(text))
    tps, max_rt, avg_rt, failed = lines[-1]
    return ToolResult(float(tps), _number(avg_rt), float(max_rt), failed=int(failed))


def rocketmq_consumer(
    java: str, classpath: str, namesrv: str, topic: str, threads: int, stop: threading.Event, log: Path
) -> ToolResult:
    """RocketMQ's benchmark Consumer (a new group) until ``stop`` is set; its last report."""
    cmd = _java(
        java, classpath, "org.apache.rocketmq.example.benchmark.Consumer",
        "-n", namesrv, "-t", topic, "-w", str(threads), "-g", f"bench_consumer_{topic}", "-p", "false",
        "-ri", "1000",
    )  # fmt: skip
    text, cpu = _run_for(cmd, 3600, log, lambda _: stop.is_set())
    result = parse_rocketmq_consumer(text)
    result.tool_cpu_s = cpu
    return result


def parse_rocketmq_consumer(text: str) -> ToolResult:
    """The last report of RocketMQ's benchmark Consumer in ``text``."""
    lines = _CONSUMER_LINE.findall(text)
    if not lines:
        return ToolResult(None, note=_tail(text))
    tps, avg_b2c, max_b2c = lines[-1]
    return ToolResult(float(tps), _number(avg_b2c), float(max_b2c))


def kafka_producer_perf(
    java: str, classpath: str, bootstrap: str, topic: str, size: int, count: int, seconds: float, log: Path
) -> ToolResult:
    """Kafka's ProducerPerformance: ``count`` records of ``size`` bytes as fast as it can."""
    cmd = _java(
        java, classpath, "org.apache.kafka.tools.ProducerPerformance",
        "--topic", topic, "--num-records", str(count), "--record-size", str(size), "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}",
    )  # fmt: skip
    text, cpu = _run_for(cmd, seconds, log)
    result = parse_kafka_producer(text)
    result.tool_cpu_s = cpu
    return result


def parse_kafka_producer(text: str) -> ToolResult:
    """ProducerPerformance's final line (the one with percentiles) in ``text``."""
    found = [match for match in _KAFKA_PRODUCER.finditer(text) if match.group(6)]
    if not found:
        return ToolResult(None, note=_tail(text))
    match = found[-1]
    return ToolResult(
        float(match.group(2)), float(match.group(4)), float(match.group(5)), float(match.group(8))
    )


def kafka_consumer_perf(
    java: str, classpath: str, bootstrap: str, topic: str, count: int, seconds: float, log: Path
) -> ToolResult:
    """Kafka's ConsumerPerformance: ``count`` records from the earliest offset, a new group."""
    cmd = _java(
        java, classpath, "org.apache.kafka.tools.ConsumerPerformance",
        "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(count),
        "--group", f"perf-{topic}", "--timeout", str(int(seconds * 1000)),
    )  # fmt: skip
    text, cpu = _run_for(cmd, seconds + 30, log)
    result = parse_kafka_consumer(text)
    result.tool_cpu_s = cpu
    return result


def parse_kafka_consumer(text: str) -> ToolResult:
    """ConsumerPerformance's CSV line in ``text``: its fetch rate (msgs/s) when it gives one."""
    for line in reversed(text.splitlines()):
        fields = [field.strip() for field in line.split(",")]
        if len(fields) >= 6 and re.fullmatch(r"[\d.]+", fields[5] or "x"):
            # start, end, MB, MB/s, nMsg, nMsg/s, rebalance ms, fetch ms, fetch MB/s, fetch nMsg/s
            rate = float(fields[9]) if len(fields) >= 10 and float(fields[9]) > 0 else float(fields[5])
            return ToolResult(rate)
    return ToolResult(None, note=_tail(text))
