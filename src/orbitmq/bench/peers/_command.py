"""OrbitMQ beside Apache RocketMQ 5.5.0, Apache Kafka (KRaft, one node) and Redis, in one run.

Every server is started by the benchmark on free ports of 127.0.0.1 with its data in a
temporary directory, and killed at the end (also after Ctrl-C): ``orbitmq standalone``,
Apache's NameServer + Broker and Kafka from the Maven artifacts pinned in this package's
``pom.xml`` (resolved into the repository's ``.cache/m2`` on first use; see ``_maven``), and
Debian's ``redis-server``. A peer that cannot run here (no ``java``/``mvn``, artifacts not
resolvable, no ``redis-server``) is skipped with one line saying why; the rest still run.

Three groups of workloads, each printed as a table with the ratio OrbitMQ / peer:

1. **Same Python client** (OrbitMQ's, over remoting) against OrbitMQ's broker and Apache's,
   and redis-py (with hiredis when installed) against Redis: batched produce of 1 KiB and 100
   B messages (``send_batch`` / pipelined XADD); sync single sends from 1, 16 and 64 senders;
   end-to-end latency p50/p99/p99.9 at a fixed rate every system sustains; a consumer
   catching up on the 100 B backlog (1M messages in the full run); the server's CPU seconds
   and peak RSS over the group.
2. **RocketMQ's own tools**, unchanged (``rocketmq-example``'s ``benchmark.Producer`` with the
   5.5.0 Java client, sync sends from 1, 16, 64 threads, both sizes; ``benchmark.Consumer``
   on the backlog), against Apache's broker and OrbitMQ's.
3. **Kafka's own tools** (``ProducerPerformance``, ``ConsumerPerformance``) against Kafka, beside
   OrbitMQ's best produce figure at the same size. Kafka's durability is the page cache, so it
   is always compared with OrbitMQ's ASYNC_FLUSH figures (the table says so).

Flush mode: ``--flush async`` (default; Redis ``appendfsync everysec``) or ``--flush sync``
(OrbitMQ and Apache's broker SYNC_FLUSH, Redis ``appendfsync always``). Topics have ``--queues``
queues (Kafka: partitions) on every side. The machine is shared, so a run's ratios are what to
read, not its absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib.util
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from subprocess import Popen

from orbitmq.bench._interrupt import INTERRUPTED_STATUS
from orbitmq.bench._peers import Phase, process_cpu_s
from orbitmq.bench._redis_peer import INSTALL_HINT, RedisServer, find_redis_server, hiredis_active
from orbitmq.bench._report import percentile
from orbitmq.bench._servers import start_standalone
from orbitmq.bench._topics import BenchTopic
from orbitmq.bench.peers import _clients
from orbitmq.bench.peers._jvm import JavaServer, rss_peak_mib, start_kafka, start_rocketmq
from orbitmq.bench.peers._maven import JavaMissing, classpath, java_missing
from orbitmq.bench.peers._profile import ServerProfile
from orbitmq.bench.peers._summary import APACHE, KAFKA, ORBIT, REDIS, Results, report
from orbitmq.bench.peers._tools import (
    kafka_consumer_perf,
    kafka_producer_perf,
    rocketmq_consumer,
    rocketmq_producer,
)
from orbitmq.client.producer import Producer
from orbitmq.transport.runner import new_event_loop

__all__ = ["add_arguments", "run"]

_QUICK = {
    "count_1k": 5_000,
    "backlog": 10_000,
    "send_seconds": 1.0,
    "rate": 200,
    "latency_seconds": 3.0,
    "tool_seconds": 14.0,
    "kafka_records": 50_000,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--flush", choices=("async", "sync"), default="async", help="OrbitMQ's and Apache's flush mode"
    )
    parser.add_argument("--peers", default="rocketmq,kafka,redis", help="peers to run, comma-separated")
    parser.add_argument(
        "--no-tools", action="store_true", help="skip the Java benchmark tools (group 2 and 3)"
    )
    parser.add_argument("--queues", type=int, default=4, help="queues (Kafka: partitions) per topic")
    parser.add_argument("--count-1k", type=int, default=200_000, help="1 KiB messages of the batched produce")
    parser.add_argument(
        "--backlog", type=int, default=1_000_000, help="100 B messages produced, then caught up"
    )
    parser.add_argument("--batch", type=int, default=500, help="messages per send_batch / XADD pipeline")
    parser.add_argument("--in-flight", type=int, default=4, help="send_batch calls outstanding")
    parser.add_argument("--senders", default="1,16,64", help="sync senders (threads) per series")
    parser.add_argument("--send-seconds", type=float, default=5.0, help="seconds of each sync-send series")
    parser.add_argument("--rate", type=int, default=1_000, help="msgs/s of the end-to-end latency series")
    parser.add_argument("--latency-seconds", type=float, default=10.0, help="seconds of the latency series")
    parser.add_argument(
        "--tool-seconds",
        type=float,
        default=16.0,
        help="seconds of each RocketMQ tool run after its start-up; its last report covers the last 9",
    )
    parser.add_argument(
        "--kafka-records", type=int, default=300_000, help="records per ProducerPerformance run"
    )
    parser.add_argument("--java", default="java", help="the java binary for the Java peers")
    parser.add_argument("--mvn", default="mvn", help="the mvn binary that resolves their artifacts")
    parser.add_argument("--redis-server", help="redis-server binary (default: found on PATH)")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="record the OrbitMQ server with py-spy (the profile extra) into DIR; print where its time went",
    )
    parser.add_argument("--quick", action="store_true", help="a short smoke run (small counts, 1-3 s series)")
    parser.add_argument(
        "--only",
        metavar="WORKLOADS",
        help="run only these workloads, comma-separated: sync (the sync single sends of the Python "
        "client and of RocketMQ's benchmark Producer), e2e (end-to-end latency at --rate)",
    )


class _Systems:
    """The servers of one run, each stopped by :meth:`close`."""

    def __init__(self) -> None:
        self.stack = ExitStack()
        self.orbit: tuple[Popen[bytes], int, int] | None = None
        self.apache: tuple[JavaServer, JavaServer] | None = None
        self.kafka: JavaServer | None = None
        self.redis: RedisServer | None = None
        self.rocketmq_classpath = ""
        self.kafka_classpath = ""

    def orbit_cpu(self) -> float:
        return process_cpu_s(self.orbit[0].pid) if self.orbit else 0.0

    def apache_cpu(self) -> float:
        return sum(server.cpu_s() for server in self.apache) if self.apache else 0.0

    def cpu_of(self, system: str) -> float:
        if system == ORBIT:
            return self.orbit_cpu()
        if system == APACHE:
            return self.apache_cpu()
        if system == KAFKA:
            return self.kafka.cpu_s() if self.kafka else 0.0
        return self.redis.cpu_s() if self.redis else 0.0

    def rss_of(self, system: str) -> float | None:
        if system == ORBIT and self.orbit:
            return rss_peak_mib(self.orbit[0].pid)
        if system == APACHE and self.apache:
            return sum(server.rss_peak_mib() for server in self.apache)
        if system == KAFKA and self.kafka:
            return self.kafka.rss_peak_mib()
        if system == REDIS and self.redis:
            return rss_peak_mib(self.redis.proc.pid)
        return None


_LABELS = {"rocketmq": "Apache RocketMQ", "kafka": "Apache Kafka"}


def _start(args: argparse.Namespace, workdir: Path, systems: _Systems) -> None:
    wanted = {name.strip() for name in args.peers.split(",") if name.strip()}
    flush_flag = "ASYNC_FLUSH" if args.flush == "async" else "SYNC_FLUSH"
    proc, namesrv_port, broker_port = start_standalone(workdir / "orbitmq", "--flush", args.flush)
    systems.orbit = (proc, namesrv_port, broker_port)

    def stop_orbit() -> None:
        proc.terminate()
        proc.wait(30)

    systems.stack.callback(stop_orbit)
    if args.only:
        wanted.discard("kafka")  # no workload --only names runs on Kafka
    java_peers = [name for name in ("rocketmq", "kafka") if name in wanted]
    missing = java_missing(args.java, args.mvn) if java_peers else None
    paths: dict[str, str] = {}
    for name in java_peers:  # resolved first: a first run fetches them before any server starts
        if missing:
            print(f"{_LABELS[name]} skipped: {missing} not found (install a JDK 17+ and Maven)", flush=True)
            continue
        try:
            paths[name] = classpath(name, args.mvn)
        except (JavaMissing, OSError) as exc:
            print(f"{_LABELS[name]} skipped: {exc}", flush=True)
    for name, path in paths.items():
        try:
            if name == "rocketmq":
                systems.rocketmq_classpath = path
                systems.apache = start_rocketmq(args.java, path, workdir / "rocketmq", flush_flag)
                for server in systems.apache:
                    systems.stack.callback(server.stop)
            else:
                systems.kafka_classpath = path
                systems.kafka = start_kafka(args.java, path, workdir / "kafka", args.queues)
                systems.stack.callback(systems.kafka.stop)
        except (RuntimeError, OSError) as exc:
            print(f"{_LABELS[name]} skipped: {exc}", flush=True)
    if "redis" in wanted:
        binary = find_redis_server(args.redis_server)
        if binary is None:
            print(f"Redis skipped: redis-server not found; {INSTALL_HINT}", flush=True)
        elif importlib.util.find_spec("redis") is None:
            print(f"Redis skipped: redis-py is not installed; {INSTALL_HINT}", flush=True)
        else:
            systems.redis = RedisServer(binary, workdir / "redis")
            systems.stack.callback(systems.redis.stop)
            if args.flush == "sync":
                systems.redis.set_fsync("always")


def run(args: argparse.Namespace) -> int:
    unknown = sorted({name.strip() for name in (args.only or "").split(",")} - {"", *_ONLY_CHOICES})
    if unknown:
        print(
            f"bench peers: --only takes {', '.join(_ONLY_CHOICES)}, not {', '.join(unknown)}", file=sys.stderr
        )
        return 2
    if args.quick:
        for key, value in _QUICK.items():
            setattr(args, key, value)
    hiredis = hiredis_active()
    load = os.getloadavg()
    print(
        f"bench peers: flush {args.flush.upper()}, {args.queues} queues/partitions per topic, "
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"redis-py with hiredis: {'active' if hiredis else 'NOT installed'}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="orbitmq-peers-") as tmp:
        workdir = Path(tmp)
        systems = _Systems()
        status = 0
        with systems.stack:
            _start(args, workdir, systems)
            results = Results()
            profile = None
            if args.profile and systems.orbit:
                Path(args.profile).mkdir(parents=True, exist_ok=True)
                profile = ServerProfile(systems.orbit[0].pid, Path(args.profile) / "orbitmq-server.raw")
                systems.stack.callback(profile.stop)
            try:
                _client_group(args, systems, results)
                if not args.no_tools:
                    _tools_group(args, systems, results, workdir)
            except KeyboardInterrupt:
                # The first Ctrl-C: the servers are stopped below, then what was measured is printed.
                print("\ninterrupted: stopping the servers and summarising", file=sys.stderr, flush=True)
                status = INTERRUPTED_STATUS
            if profile is not None:
                profile.stop()
        present = [
            name
            for name, up in (
                (ORBIT, systems.orbit),
                (APACHE, systems.apache),
                (KAFKA, systems.kafka),
                (REDIS, systems.redis),
            )
            if up
        ]
        report(args, present, results)
        if profile is not None:
            print("\n" + profile.summary(), flush=True)
    return status


# --- measuring --------------------------------------------------------------------------------


def _senders(args: argparse.Namespace) -> list[int]:
    return [int(value) for value in args.senders.split(",") if value.strip()]


_ONLY_CHOICES = ("sync", "e2e")


def _wanted(args: argparse.Namespace, workload: str) -> bool:
    """Whether ``workload`` runs: every one without ``--only``, else those it names."""
    only = getattr(args, "only", None)
    if not only:
        return True
    return workload in {name.strip() for name in only.split(",")}


def _client_group(args: argparse.Namespace, systems: _Systems, results: Results) -> None:
    targets: list[tuple[str, str]] = []
    if systems.orbit:
        targets.append((ORBIT, f"127.0.0.1:{systems.orbit[1]}"))
    if systems.apache:
        targets.append((APACHE, f"127.0.0.1:{systems.apache[0].port}"))
    for system, namesrv in targets:
        print(f"{system}: OrbitMQ's Python client workloads", flush=True)
        cpu_before = systems.cpu_of(system)
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(
                _orbit_client(args, system, namesrv, functools.partial(systems.cpu_of, system), results)
            )
        results.put("client-cpu", system, systems.cpu_of(system) - cpu_before)
        results.put("client-rss", system, systems.rss_of(system))
    if systems.redis:
        print("Redis: redis-py workloads", flush=True)
        cpu_before = systems.cpu_of(REDIS)
        _redis_client(args, systems.redis, results)
        results.put("client-cpu", REDIS, systems.cpu_of(REDIS) - cpu_before)
        results.put("client-rss", REDIS, systems.rss_of(REDIS))


def _put_percentiles(results: Results, key: str, system: str, samples: list[float]) -> None:
    for tag, fraction in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)):
        results.put(f"{key}-{tag}", system, percentile(samples, fraction))


async def _orbit_client(
    args: argparse.Namespace, system: str, namesrv: str, cpu: Callable[[], float], results: Results
) -> None:
    names = {name: f"Peers{name}" for name in ("Batch1k", "Batch100", "Sync", "Latency")}
    for topic in names.values():
        await BenchTopic(namesrv, topic, args.queues).create()
    producer = Producer("PG_PEERS", namesrv, instance_name=f"peers-{system.split()[0]}")
    await producer.start()
    try:
        # Warm-up, not measured: a JVM broker compiles its hot paths during the first seconds.
        await BenchTopic(namesrv, "PeersWarmUp", args.queues).create()
        await _clients.orbit_batches(
            producer, "PeersWarmUp", args.count_1k // 4, 1024, args.batch, args.in_flight, cpu
        )
        await _clients.orbit_senders(producer, "PeersWarmUp", 16, args.send_seconds, 1024)
        if _wanted(args, "batch"):
            phase = await _clients.orbit_batches(
                producer, names["Batch1k"], args.count_1k, 1024, args.batch, args.in_flight, cpu
            )
            results.put("batch-1k", system, phase.rate)
            phase = await _clients.orbit_batches(
                producer, names["Batch100"], args.backlog, 100, args.batch, args.in_flight, cpu
            )
            results.put("batch-100", system, phase.rate)
        for senders in _senders(args) if _wanted(args, "sync") else []:
            rate, samples = await _clients.orbit_senders(
                producer, names["Sync"], senders, args.send_seconds, 1024
            )
            results.put(f"sync-{senders}", system, rate)
            _put_percentiles(results, f"sync-{senders}-rt", system, samples)
        if _wanted(args, "e2e"):
            samples = await _clients.orbit_end_to_end(
                producer, namesrv, names["Latency"], "peers-latency", args.rate, args.latency_seconds, 1024
            )
            _put_percentiles(results, "e2e", system, samples)
            results.put("e2e-count", system, len(samples))
        if _wanted(args, "catch-up"):
            phase = await _clients.orbit_catch_up(
                namesrv, names["Batch100"], "peers-catch-up", args.backlog, cpu
            )
            _put_phase(results, "catch-up", system, phase, args.backlog)
    finally:
        await producer.shutdown()


def _put_phase(results: Results, key: str, system: str, phase: Phase, expected: int) -> None:
    results.put(key, system, phase.rate)
    results.put(f"{key}-steady", system, phase.steady_rate)
    if phase.count < expected:
        results.notes[f"{key}:{system}"] = f"{system} got {phase.count:,} of {expected:,}"


def _redis_client(args: argparse.Namespace, redis: RedisServer, results: Results) -> None:
    if args.only:
        _redis_only(args, redis, results)
        return
    results.put(
        "batch-1k", REDIS, _clients.redis_batches(redis, "peers:1k", args.count_1k, 1024, args.batch).rate
    )
    with redis.client() as client:
        client.delete("peers:1k")
    results.put(
        "batch-100", REDIS, _clients.redis_batches(redis, "peers:100", args.backlog, 100, args.batch).rate
    )
    for senders in _senders(args):
        rate, samples = _clients.redis_senders(redis, "peers:sync", senders, args.send_seconds, 1024)
        results.put(f"sync-{senders}", REDIS, rate)
        _put_percentiles(results, f"sync-{senders}-rt", REDIS, samples)
    samples = _clients.redis_end_to_end(redis, "peers:e2e", args.rate, args.latency_seconds, 1024)
    _put_percentiles(results, "e2e", REDIS, samples)
    results.put("e2e-count", REDIS, len(samples))
    phase = _clients.redis_catch_up(redis, "peers:100", args.backlog, 10_000)
    _put_phase(results, "catch-up", REDIS, phase, args.backlog)
    with redis.client() as client:
        client.delete("peers:100")


def _redis_only(args: argparse.Namespace, redis: RedisServer, results: Results) -> None:
    """The workloads ``--only`` names, on Redis."""
    for senders in _senders(args) if _wanted(args, "sync") else []:
        rate, samples = _clients.redis_senders(redis, "peers:sync", senders, args.send_seconds, 1024)
        results.put(f"sync-{senders}", REDIS, rate)
        _put_percentiles(results, f"sync-{senders}-rt", REDIS, samples)
    if _wanted(args, "e2e"):
        samples = _clients.redis_end_to_end(redis, "peers:e2e", args.rate, args.latency_seconds, 1024)
        _put_percentiles(results, "e2e", REDIS, samples)
        results.put("e2e-count", REDIS, len(samples))


def _tools_group(args: argparse.Namespace, systems: _Systems, results: Results, workdir: Path) -> None:
    logs = workdir / "tool-logs"
    logs.mkdir(exist_ok=True)
    # One report a second after the tool's first 10 s; each covers the 9 s before it.
    reports = max(1, round(args.tool_seconds) - 10)
    if systems.rocketmq_classpath and systems.orbit:
        targets = [(ORBIT, f"127.0.0.1:{systems.orbit[1]}")]
        if systems.apache:
            targets.append((APACHE, f"127.0.0.1:{systems.apache[0].port}"))
        for system, namesrv in targets:
            cpu_before = systems.cpu_of(system)
            for size in (1024, 100):
                topic = f"ToolBench{size}"
                asyncio.run(BenchTopic(namesrv, topic, args.queues).create())
                if size == 1024:
                    asyncio.run(BenchTopic(namesrv, "ToolBenchPC", args.queues).create())
                for threads in _senders(args) if _wanted(args, "sync") else []:
                    print(f"{system}: RocketMQ benchmark Producer, {size} B, {threads} threads", flush=True)
                    log = logs / f"producer-{system.split()[0]}-{size}-{threads}.log"
                    results.tools[(f"rmq-{size}-{threads}", system)] = rocketmq_producer(
                        args.java,
                        systems.rocketmq_classpath,
                        namesrv,
                        topic,
                        size,
                        threads,
                        reports,
                        log,
                    )
            if args.only:
                results.put("tools-cpu", system, systems.cpu_of(system) - cpu_before)
                results.put("tools-rss", system, systems.rss_of(system))
                continue
            print(f"{system}: RocketMQ benchmark Consumer beside a Producer (100 B, 16 threads)", flush=True)
            tag = system.split()[0]
            stop = threading.Event()
            with ThreadPoolExecutor(1) as pool:
                consumer = pool.submit(
                    rocketmq_consumer, args.java, systems.rocketmq_classpath, namesrv, "ToolBenchPC", 20, stop,
                    logs / f"consumer-{tag}.log",
                )  # fmt: skip
                try:
                    time.sleep(2)
                    results.tools[("rmq-pc-producer", system)] = rocketmq_producer(
                        args.java, systems.rocketmq_classpath, namesrv, "ToolBenchPC", 100, 16, reports,
                        logs / f"producer-pc-{tag}.log",
                    )  # fmt: skip
                finally:
                    stop.set()
                results.tools[("rmq-consumer", system)] = consumer.result()
            results.put("tools-cpu", system, systems.cpu_of(system) - cpu_before)
            results.put("tools-rss", system, systems.rss_of(system))
    if systems.kafka and not args.only:
        bootstrap = f"127.0.0.1:{systems.kafka.port}"
        print(
            f"Kafka: ProducerPerformance warm-up, {args.kafka_records // 4:,} records (not measured)",
            flush=True,
        )
        kafka_producer_perf(
            args.java, systems.kafka_classpath, bootstrap, "warmup", 1024, args.kafka_records // 4, 300,
            logs / "kafka-warm-up.log",
        )  # fmt: skip
        cpu_before = systems.cpu_of(KAFKA)
        for size in (1024, 100):
            print(f"Kafka: ProducerPerformance, {size} B, {args.kafka_records:,} records", flush=True)
            results.tools[(f"kafka-{size}", KAFKA)] = kafka_producer_perf(
                args.java, systems.kafka_classpath, bootstrap, f"perf{size}", size, args.kafka_records, 300,
                logs / f"kafka-producer-{size}.log",
            )  # fmt: skip
        print("Kafka: ConsumerPerformance on the 100 B backlog", flush=True)
        results.tools[("kafka-consumer", KAFKA)] = kafka_consumer_perf(
            args.java, systems.kafka_classpath, bootstrap, "perf100", args.kafka_records, 120,
            logs / "kafka-consumer.log",
        )  # fmt: skip
        results.put("tools-cpu", KAFKA, systems.cpu_of(KAFKA) - cpu_before)
        results.put("tools-rss", KAFKA, systems.rss_of(KAFKA))
