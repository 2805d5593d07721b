"""What /metrics costs a producer: produce throughput with the broker's metrics on and off.

Two temporary ``orbitmq standalone`` servers run side by side, one with ``--no-metrics`` (the
reference), one serving ``/metrics`` on a free port and scraped once a second during its
rounds (as Prometheus would, much more often than its usual 15 s). Rounds alternate between
them (off, on, off, on, ...), each ``--round-s`` long with ``--concurrency`` senders on one
client event loop, so drift of the shared machine hits both alike. Printed: each round's
msg/s and the server's CPU time per message (from ``/proc/<pid>/stat``: on a shared machine
throughput swings with other load, CPU per message much less), the medians, and the ratios
on/off for single sends and for batches (target: throughput >= 0.95 x).

With ``--topics N`` it measures /metrics at scale instead: one ``orbitmq standalone`` with
metrics on gets one message on each of N new topics (created by the sends), then is scraped
``--scrapes`` times while a prober asks the broker GET_MAX_OFFSET every 5 ms. Printed: the
topic creation rate, each scrape's time and bytes, the broker's RSS before and after, and the
prober's slowest answer, first for ``--idle-s`` without scrapes, then during the scrapes
(target: no request waits more than 100 ms). ``--quick`` is that case with 2,000
topics and three scrapes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from orbitmq.bench._metrics_scale import scrape_under_probe, send_to_topics
from orbitmq.bench._servers import start_standalone
from orbitmq.client.admin import AdminClient
from orbitmq.client.producer import Producer
from orbitmq.errors import OrbitError
from orbitmq.model.message import Message
from orbitmq.transport.runner import new_event_loop

__all__ = ["add_arguments", "run"]

TARGET_RATIO = 0.95


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=5, help="rounds per server and mode (5)")
    parser.add_argument("--round-s", type=float, default=2.0, help="seconds per round (2)")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent senders (16)")
    parser.add_argument("--size", type=int, default=100, help="body bytes (100)")
    parser.add_argument(
        "--batch-size", type=int, default=32, help="messages per batch in the batch mode (32)"
    )
    parser.add_argument(
        "--topics", type=int, default=0, help="measure scrapes with this many topics instead (e.g. 50000)"
    )
    parser.add_argument("--scrapes", type=int, default=5, help="scrapes in the --topics case (5)")
    parser.add_argument(
        "--idle-s", type=float, default=10.0, help="probe this long without scrapes first, for reference (10)"
    )
    parser.add_argument("--quick", action="store_true", help="the --topics case with 2,000 topics, 3 scrapes")
    parser.add_argument(
        "--max-labels",
        type=int,
        default=None,
        help="the --topics case's metricsMaxTopicLabels and metricsMaxGroupLabels (the broker's default)",
    )


SCRAPE_TARGET_MS = 100.0
STOP_TIMEOUT_S = 180.0


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _scale(broker_addr: str, url: str, pid: int, args: argparse.Namespace) -> int:
    rss_before = _rss_mb(pid)
    started = time.perf_counter()
    await send_to_topics(broker_addr, args.topics, "MetricsScale")
    creation_s = time.perf_counter() - started
    print(
        f"{args.topics:,} topics created by sends in {creation_s:.1f} s"
        f" ({args.topics / creation_s:,.0f} topics/s)"
    )
    rss_sent = _rss_mb(pid)
    result = await scrape_under_probe(broker_addr, url, "MetricsScale0", args.scrapes, idle_s=args.idle_s)
    rss_after = _rss_mb(pid)
    for index, (seconds, size) in enumerate(zip(result.scrape_s, result.scrape_bytes, strict=True)):
        slowest = result.probe_max_ms_by_scrape[index] if index < len(result.probe_max_ms_by_scrape) else 0.0
        print(
            f"scrape {index + 1}: {seconds * 1000:8.1f} ms  {size:>12,} bytes  slowest other request {slowest:7.1f} ms"
        )
    for error in result.scrape_errors:
        print(f"scrape failed: {error}")
    print(
        f"summary: {args.topics:,} topics, created at {args.topics / creation_s:,.0f} topics/s,"
        f" {len(result.scrape_s)}/{args.scrapes} scrapes answered,"
        f" median {statistics.median(result.scrape_s) * 1000 if result.scrape_s else 0:.1f} ms,"
        f" largest {max(result.scrape_bytes, default=0):,} bytes"
    )
    print(
        f"  broker RSS: {rss_before:.0f} MB at start, {rss_sent:.0f} MB after the sends, {rss_after:.0f} MB after the scrapes"
    )
    print(
        f"  prober: {result.idle_probes} requests in {args.idle_s:g} s before the scrapes, slowest"
        f" {result.idle_probe_max_ms:.1f} ms (the broker without scrapes)"
    )
    print(
        f"  prober: {result.probes} requests during the scrapes, slowest {result.probe_max_ms:.1f} ms,"
        f" {len(result.probe_failures)} failed"
    )
    if result.probe_ms:
        ordered = sorted(result.probe_ms)
        print(
            f"  prober: during the scrapes median {statistics.median(ordered):.1f} ms,"
            f" 99th percentile {ordered[min(len(ordered) - 1, len(ordered) * 99 // 100)]:.1f} ms;"
            f" the prober's own loop ran up to {result.prober_late_max_ms:.1f} ms late"
            f" (load average {os.getloadavg()[0]:.1f})"
        )
    slowest_ms = max(result.probe_max_ms, result.idle_probe_max_ms)
    met = not result.scrape_errors and not result.probe_failures and slowest_ms <= SCRAPE_TARGET_MS
    verdict = "meets" if met else "misses"
    print(
        f"  verdict: {verdict} the target (every scrape answered, no request over {SCRAPE_TARGET_MS:g} ms"
        " with or without scrapes)"
    )
    return 0


def _run_scale(args: argparse.Namespace) -> int:
    if args.quick:
        args.topics, args.scrapes, args.idle_s = 2000, 3, 2.0
    with tempfile.TemporaryDirectory(prefix="orbitmq-metrics-scale-") as workdir:
        root = Path(workdir)
        log_path = root / "scale.log"
        extra: list[str] = []
        if args.max_labels is not None:
            conf = root / "scale.conf"
            conf.write_text(
                f"metricsMaxTopicLabels={args.max_labels}\nmetricsMaxGroupLabels={args.max_labels}\n"
            )
            extra = ["-c", str(conf)]
        proc, _, broker_port = start_standalone(
            root / "scale", "--metrics-port", "0", "--namesrv-metrics-port", "0", *extra, log_path=log_path
        )
        try:
            url = _metrics_url(log_path)
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                return runner.run(_scale(f"127.0.0.1:{broker_port}", url, proc.pid, args))
        finally:
            # Stopping flushes every queue and writes the tables: with 50,000 topics on a loaded
            # machine that can take a minute; the figures are printed already.
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                print(f"the broker did not stop within {STOP_TIMEOUT_S:g} s: killed")
                proc.kill()
                proc.wait(30)


async def _produce(producer: Producer, topic: str, args: argparse.Namespace, batch: int) -> float:
    body = b"m" * args.size
    stop_at = time.perf_counter() + args.round_s
    sent = 0

    async def sender() -> None:
        nonlocal sent
        while time.perf_counter() < stop_at:
            try:
                if batch:
                    await producer.send_batch([Message(topic, body) for _ in range(batch)])
                    sent += batch
                else:
                    await producer.send(Message(topic, body))
                    sent += 1
            except OrbitError as exc:
                print(f"send failed: {exc}")

    started = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(args.concurrency)))
    return sent / (time.perf_counter() - started)


async def _scrape_loop(url: str, stop: asyncio.Event) -> int:
    scrapes = 0
    while not stop.is_set():
        await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read())
        scrapes += 1
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass
    return scrapes


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _bench(servers: dict[str, tuple[str, str | None, int]], args: argparse.Namespace) -> int:
    producers: dict[str, Producer] = {}
    for name, (namesrv, _, _) in servers.items():
        async with AdminClient(namesrv) as admin:
            for _ in range(200):
                if (await admin.cluster_info()).broker_addr_table:
                    break
                await asyncio.sleep(0.05)
            await admin.create_topic("MetricsBench", 8)
        producers[name] = Producer("PG_METRICS_BENCH", namesrv, instance_name=f"bench-{name}")
        await producers[name].start()
    results: dict[tuple[str, str], list[float]] = {}
    cpu_per_message: dict[tuple[str, str], list[float]] = {}
    try:
        for mode, batch in (("single", 0), ("batch", args.batch_size)):
            for name in servers:  # warm-up round, not reported
                await _produce(producers[name], "MetricsBench", args, batch)
            for round_index in range(args.rounds):
                for name, (_, url, pid) in servers.items():
                    stop = asyncio.Event()
                    scraper = asyncio.create_task(_scrape_loop(url, stop)) if url else None
                    cpu_before = _cpu_s(pid)
                    tps = await _produce(producers[name], "MetricsBench", args, batch)
                    cpu_us = (_cpu_s(pid) - cpu_before) * 1e6 / max(tps * args.round_s, 1)
                    stop.set()
                    scrapes = await scraper if scraper else 0
                    results.setdefault((mode, name), []).append(tps)
                    cpu_per_message.setdefault((mode, name), []).append(cpu_us)
                    print(
                        f"{mode:6} round {round_index + 1} metrics {name:3}: {tps:>10,.0f} msg/s"
                        f"  server CPU {cpu_us:6.1f} us/msg  scrapes {scrapes}"
                    )
    finally:
        for producer in producers.values():
            await producer.shutdown()
    print(
        f"summary: {args.size} B bodies, {args.concurrency} senders, {args.rounds} x {args.round_s:g} s rounds"
    )
    worst = float("inf")
    for mode in ("single", "batch"):
        off = statistics.median(results[(mode, "off")])
        on = statistics.median(results[(mode, "on")])
        ratio = on / off if off else 0.0
        worst = min(worst, ratio)
        cpu_off = statistics.median(cpu_per_message[(mode, "off")])
        cpu_on = statistics.median(cpu_per_message[(mode, "on")])
        print(f"  {mode:6} median off {off:>10,.0f} msg/s  on {on:>10,.0f} msg/s  ratio on/off {ratio:.3f}")
        print(
            f"  {mode:6} server CPU off {cpu_off:6.1f} us/msg  on {cpu_on:6.1f} us/msg"
            f"  throughput ratio by CPU off/on {cpu_off / cpu_on if cpu_on else 0:.3f}"
        )
    verdict = "meets" if worst >= TARGET_RATIO else "misses"
    print(f"  verdict: worst ratio {worst:.3f} {verdict} the target {TARGET_RATIO}")
    return 0


def _metrics_url(log_path: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"broker \S+ metrics at (http://\S+/metrics)", log_path.read_text(errors="replace"))
        if found:
            return found.group(1)
        time.sleep(0.05)
    raise RuntimeError(f"the metrics server never logged its address in {log_path}")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by ``args``; returns the exit status."""
    if args.topics or args.quick:
        return _run_scale(args)
    with tempfile.TemporaryDirectory(prefix="orbitmq-metrics-") as workdir:
        root = Path(workdir)
        off = start_standalone(root / "off")
        log_path = root / "on.log"
        on = start_standalone(
            root / "on", "--metrics-port", "0", "--namesrv-metrics-port", "0", log_path=log_path
        )
        try:
            servers = {
                "off": (f"127.0.0.1:{off[1]}", None, off[0].pid),
                "on": (f"127.0.0.1:{on[1]}", _metrics_url(log_path), on[0].pid),
            }
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                return runner.run(_bench(servers, args))
        finally:
            for proc in (off[0], on[0]):
                proc.terminate()
                proc.wait(30)
