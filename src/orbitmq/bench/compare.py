"""OrbitMQ beside Redis Streams, each through its own Python client, same workload, same run.

Starts a temporary ``redis-server`` (Debian's package; see ``bench._redis_peer`` for its
settings) and two temporary ``orbitmq standalone`` servers (ASYNC_FLUSH, and SYNC_FLUSH for the
sync-latency series), all on free ports of 127.0.0.1 with data in a temporary directory, all
stopped at the end. Each of ``--runs`` runs, on a fresh stream and topic:

1. produce ``--count`` messages of ``--size`` bytes, acknowledged as stored: redis-py pipelined
   XADD batches against OrbitMQ's ``send_batch`` with ``--in-flight`` batches outstanding;
2. consume them all from the start: XREADGROUP (one XACK per batch) against a PushConsumer,
   and XREAD against a PullConsumer poll loop, each timed from its start-up (connect, group,
   rebalance) to the last message, and again from the first message ("steady");
3. ``--latency-count`` sequential publishes, each awaited: AOF ``everysec`` against
   ASYNC_FLUSH, then ``appendfsync always`` against SYNC_FLUSH.

Printed: medians over the runs of msgs/s, MB/s (bodies), p50/p99/p99.9, the ratio
OrbitMQ/Redis on each line (above 1 is better for rates, below 1 for latencies), and the CPU
seconds the server process and this client process spent in each phase (``/proc/<pid>/stat``,
``time.process_time``). Without ``redis-server`` (or redis-py) the Redis peer is skipped with
a message saying how to install it, and OrbitMQ's figures are printed alone. Exit status 1
when a consumer got fewer messages than were produced.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen

from orbitmq.bench._orbit_peer import (
    orbit_consume_pull,
    orbit_consume_push,
    orbit_produce,
    orbit_sync_latency,
)
from orbitmq.bench._peers import Phase, process_cpu_s
from orbitmq.bench._redis_peer import (
    INSTALL_HINT,
    RedisServer,
    find_redis_server,
    hiredis_active,
    redis_consume_group,
    redis_consume_xread,
    redis_produce,
    redis_sync_latency,
)
from orbitmq.bench._report import percentile
from orbitmq.bench._servers import start_standalone
from orbitmq.bench._topics import BenchTopic
from orbitmq.client.producer import Producer
from orbitmq.transport.runner import new_event_loop

__all__ = ["add_arguments", "run"]

_PERCENTILES = (0.5, 0.99, 0.999)
_QUEUES = 4
_QUICK = {"count": 2_000, "runs": 1, "latency_count": 200}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--count", type=int, default=200_000, help="messages produced and consumed per run")
    parser.add_argument("--size", type=int, default=100, help="body bytes")
    parser.add_argument("--runs", type=int, default=3, help="runs; the figures printed are their medians")
    parser.add_argument("--latency-count", type=int, default=2_000, help="sequential publishes per series")
    parser.add_argument("--batch", type=int, default=1_000, help="messages per XADD pipeline / send_batch")
    parser.add_argument("--in-flight", type=int, default=4, help="OrbitMQ send_batch calls outstanding")
    parser.add_argument("--read-count", type=int, default=10_000, help="COUNT of each XREAD / XREADGROUP")
    parser.add_argument("--redis-server", help="redis-server binary (default: found on PATH)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: {_QUICK['count']:,} messages, {_QUICK['latency_count']} publishes, 1 run",
    )


@dataclass
class _Results:
    phases: dict[tuple[str, str], list[Phase]] = field(default_factory=dict)
    latencies: dict[tuple[str, str], list[list[float]]] = field(default_factory=dict)

    def phase(self, name: str, peer: str, value: Phase) -> None:
        self.phases.setdefault((name, peer), []).append(value)

    def latency(self, name: str, peer: str, samples: list[float]) -> None:
        self.latencies.setdefault((name, peer), []).append(sorted(samples))


def run(args: argparse.Namespace) -> int:
    if args.quick:
        for key, value in _QUICK.items():
            setattr(args, key, value)
    body = os.urandom(args.size // 2 + 1).hex().encode()[: args.size]
    results = _Results()
    with tempfile.TemporaryDirectory(prefix="orbitmq-compare-") as workdir:
        redis = _start_redis(args, Path(workdir) / "redis")
        servers: list[tuple[Popen[bytes], int, int]] = []
        try:
            servers.append(start_standalone(Path(workdir) / "async", "--flush", "async"))
            servers.append(start_standalone(Path(workdir) / "sync", "--flush", "sync"))
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                producers = runner.run(_start_producers(servers))
                try:
                    for index in range(args.runs):
                        if redis is not None:
                            _redis_run(redis, index, body, args, results)
                        runner.run(_orbit_run(servers, producers, index, body, args, results))
                        print(f"run {index + 1} of {args.runs} done", flush=True)
                finally:
                    runner.run(_shutdown(producers))
        finally:
            for proc, _, _ in servers:
                proc.terminate()
                proc.wait(30)
            if redis is not None:
                redis.stop()
    return _report(results, redis.version if redis else None, args)


def _start_redis(args: argparse.Namespace, workdir: Path) -> RedisServer | None:
    binary = find_redis_server(args.redis_server)
    if binary is None:
        print(f"redis-server not found: the Redis Streams peer is skipped; {INSTALL_HINT}", flush=True)
        return None
    if importlib.util.find_spec("redis") is None:
        print(f"redis-py is not installed: the Redis Streams peer is skipped; {INSTALL_HINT}", flush=True)
        return None
    return RedisServer(binary, workdir)


async def _start_producers(servers: Sequence[tuple[Popen[bytes], int, int]]) -> list[Producer]:
    producers = []
    for index, (_, namesrv_port, _) in enumerate(servers):
        producer = Producer("PG_COMPARE", f"127.0.0.1:{namesrv_port}", instance_name=f"compare-{index}")
        await producer.start()
        producers.append(producer)
    return producers


async def _shutdown(producers: list[Producer]) -> None:
    for producer in producers:
        await producer.shutdown()


def _redis_run(redis: RedisServer, index: int, body: bytes, args: argparse.Namespace, out: _Results) -> None:
    key = f"compare:{index}"
    out.phase("produce", "redis", redis_produce(redis, key, args.count, body, args.batch))
    out.phase("consume-group", "redis", redis_consume_group(redis, key, "bench", args.count, args.read_count))
    out.phase("consume-read", "redis", redis_consume_xread(redis, key, args.count, args.read_count))
    with redis.client() as client:
        client.delete(key)
    out.latency("async", "redis", redis_sync_latency(redis, f"{key}:lat", args.latency_count, body))
    redis.set_fsync("always")
    try:
        out.latency("sync", "redis", redis_sync_latency(redis, f"{key}:lat", args.latency_count, body))
    finally:
        redis.set_fsync("everysec")


async def _orbit_run(
    servers: Sequence[tuple[Popen[bytes], int, int]],
    producers: Sequence[Producer],
    index: int,
    body: bytes,
    args: argparse.Namespace,
    out: _Results,
) -> None:
    topic = f"CompareBench_{index}"
    latency_topic = f"CompareLatency_{index}"
    namesrvs = [f"127.0.0.1:{port}" for _, port, _ in servers]
    pid = servers[0][0].pid

    def cpu() -> float:
        return process_cpu_s(pid)

    for namesrv, name in ((namesrvs[0], topic), (namesrvs[0], latency_topic), (namesrvs[1], latency_topic)):
        await BenchTopic(namesrv, name, _QUEUES).create()
    out.phase(
        "produce",
        "orbit",
        await orbit_produce(producers[0], topic, args.count, body, args.batch, args.in_flight, cpu),
    )
    group = f"compare-push-{index}"
    out.phase("consume-group", "orbit", await orbit_consume_push(namesrvs[0], topic, group, args.count, cpu))
    group = f"compare-pull-{index}"
    out.phase("consume-read", "orbit", await orbit_consume_pull(namesrvs[0], topic, group, args.count, cpu))
    out.latency(
        "async", "orbit", await orbit_sync_latency(producers[0], latency_topic, args.latency_count, body)
    )
    out.latency(
        "sync", "orbit", await orbit_sync_latency(producers[1], latency_topic, args.latency_count, body)
    )


_PHASES = (
    ("produce", "produce, acked as stored", "pipelined XADD", "send_batch"),
    ("consume-group", "consume, group", "XREADGROUP+XACK", "PushConsumer"),
    ("consume-read", "consume, plain", "XREAD", "PullConsumer poll"),
)
_LATENCIES = (
    ("async", "sync publish", "AOF everysec", "ASYNC_FLUSH"),
    ("sync", "sync publish", "AOF always", "SYNC_FLUSH"),
)


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def _median_of(phases: Sequence[Phase], rate_of: Callable[[Phase], float | None]) -> float | None:
    values = [value for phase in phases if (value := rate_of(phase)) is not None]
    return statistics.median(values) if values else None


def _ratio(orbit: float | None, redis: float | None) -> str:
    return f"{orbit / redis:.2f}x" if orbit is not None and redis else "n/a"


def _rate_text(rate: float | None, size: int) -> str:
    """Messages/s and MB/s of bodies (``size`` bytes each)."""
    return "n/a" if rate is None else f"{rate:>9,.0f} msgs/s {rate * size / 1e6:7.2f} MB/s"


def _report(results: _Results, redis_version: str | None, args: argparse.Namespace) -> int:
    redis_name = f"Redis {redis_version}" if redis_version else "Redis (skipped)"
    print(
        f"\nOrbitMQ beside {redis_name} Streams, Python clients, {args.count:,} x {args.size} B, "
        f"medians of {args.runs} run(s); ratio = OrbitMQ / Redis"
    )
    print(f"redis-py with hiredis: {'active' if hiredis_active() else 'NOT installed'}")
    width = 44
    print(f"{'':<34}{'Redis Streams':<{width}}{'OrbitMQ':<{width}}ratio")
    status = 0
    for name, label, redis_how, orbit_how in _PHASES:
        redis_phases = results.phases.get((name, "redis"), [])
        orbit_phases = results.phases.get((name, "orbit"), [])
        if any(phase.count < args.count for phase in orbit_phases + redis_phases):
            status = 1
        rows: list[tuple[str, Callable[[Phase], float | None]]] = [("", lambda p: p.rate)]
        if name != "produce":
            rows = [(" (with start-up)", lambda p: p.rate), (" (steady)", lambda p: p.steady_rate)]
        for suffix, rate_of in rows:
            orbit_rate = _median_of(orbit_phases, rate_of)
            redis_rate = _median_of(redis_phases, rate_of)
            print(
                f"{label + suffix:<34}{_rate_text(redis_rate, args.size):<{width}}"
                f"{_rate_text(orbit_rate, args.size):<{width}}{_ratio(orbit_rate, redis_rate)}"
            )
        print(
            f"{'  ' + redis_how + ' / ' + orbit_how:<34}{_cpu_text(redis_phases):<{width}}{_cpu_text(orbit_phases)}"
        )
    for name, label, redis_how, orbit_how in _LATENCIES:
        redis_series = results.latencies.get((name, "redis"), [])
        orbit_series = results.latencies.get((name, "orbit"), [])
        for fraction in _PERCENTILES:
            redis_ms = _median_percentile(redis_series, fraction)
            orbit_ms = _median_percentile(orbit_series, fraction)
            tag = f"p{fraction * 100:g}"
            print(
                f"{label + ' ' + tag:<34}{_ms_text(redis_ms, redis_how):<{width}}{_ms_text(orbit_ms, orbit_how):<{width}}"
                f"{_ratio(orbit_ms, redis_ms)}"
            )
    if status:
        print("a consumer got fewer messages than were produced")
    return status


def _cpu_text(phases: Sequence[Phase]) -> str:
    if not phases:
        return "n/a"
    server = _median([phase.server_cpu_s for phase in phases])
    client = _median([phase.client_cpu_s for phase in phases])
    return f"CPU s: server {server:.2f}, client {client:.2f}"


def _median_percentile(series: Sequence[list[float]], fraction: float) -> float | None:
    values = [value for samples in series if (value := percentile(samples, fraction)) is not None]
    return _median(values) if values else None


def _ms_text(value: float | None, how: str) -> str:
    return "n/a" if value is None else f"{value:8.3f} ms ({how})"
