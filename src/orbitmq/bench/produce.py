"""Producer throughput and latency: RocketMQ's benchmark producer for the OrbitMQ client.

``--concurrency`` sender tasks share one :class:`~orbitmq.client.Producer` on one event loop
(uvloop when installed). Each sender sends one message (``--batch-size 0``) or one batch of
``--batch-size`` messages and waits for the broker's answer before sending again. Every second
a line reports the messages/s, the average and maximum round trip and its p50 / p99 / p99.9
over that second; a summary over the whole run follows. Against a temporary
``orbitmq standalone`` unless ``--namesrv`` names a running cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from orbitmq.bench._credentials import add_credential_arguments, client_options
from orbitmq.bench._servers import start_standalone
from orbitmq.client.admin import AdminClient
from orbitmq.client.producer import Producer
from orbitmq.errors import OrbitError
from orbitmq.model.message import Message
from orbitmq.transport.runner import new_event_loop

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--namesrv", help="name servers host:port;... (default: start a temporary standalone)"
    )
    parser.add_argument("--topic", default=None, help="topic (default: a fresh OrbitBench_<pid>)")
    parser.add_argument("--queues", type=int, default=8, help="queues of the created topic (8)")
    parser.add_argument(
        "--concurrency", "--threads", dest="concurrency", type=int, default=1, help="concurrent senders (1)"
    )
    parser.add_argument("--size", type=int, default=100, help="body bytes (100)")
    parser.add_argument(
        "--batch-size", type=int, default=0, help="messages per batch request; 0 = single sends"
    )
    parser.add_argument("--duration-s", type=float, default=10.0, help="run time in seconds (10)")
    parser.add_argument("--count", type=int, default=0, help="stop after this many messages instead")
    parser.add_argument("--warmup-s", type=float, default=1.0, help="unreported warm-up time (1)")
    parser.add_argument(
        "--flush", choices=("sync", "async"), default="async", help="temporary broker flush (async)"
    )
    add_credential_arguments(parser)


@dataclass(slots=True)
class _Window:
    """Round trips (ms) and message count of one reporting interval."""

    messages: int = 0
    errors: int = 0
    rts_ms: list[float] = field(default_factory=list)


def _percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def _line(window: _Window, elapsed_s: float) -> str:
    values = sorted(window.rts_ms)
    average = sum(values) / len(values) if values else 0.0
    return (
        f"TPS {window.messages / elapsed_s:>10,.0f} msg/s | RT avg {average:7.3f} max {values[-1] if values else 0:8.3f}"
        f" | p50 {_percentile(values, 0.5):7.3f} p99 {_percentile(values, 0.99):7.3f}"
        f" p999 {_percentile(values, 0.999):8.3f} ms | errors {window.errors}"
    )


class _Bench:
    def __init__(self, producer: Producer, topic: str, args: argparse.Namespace) -> None:
        self.producer = producer
        self.topic = topic
        self.args = args
        self.body = os.urandom(args.size // 2 + 1).hex().encode()[: args.size]
        self.window = _Window()
        self.total = _Window()
        self.recording = False
        self.sent = 0
        self.stop = asyncio.Event()

    async def sender(self) -> None:
        args, topic, body = self.args, self.topic, self.body
        while not self.stop.is_set():
            started = time.perf_counter()
            try:
                if args.batch_size > 0:
                    await self.producer.send_batch([Message(topic, body) for _ in range(args.batch_size)])
                    count = args.batch_size
                else:
                    await self.producer.send(Message(topic, body))
                    count = 1
            except OrbitError as exc:
                self.window.errors += 1
                print(f"send failed: {exc}", file=sys.stderr)
                continue
            rt_ms = (time.perf_counter() - started) * 1000
            self.window.messages += count
            self.window.rts_ms.append(rt_ms)
            if self.recording:
                self.sent += count
                if args.count and self.sent >= args.count:
                    self.stop.set()

    async def report(self) -> None:
        tty = sys.stdout.isatty()
        await asyncio.sleep(self.args.warmup_s)
        self.window = _Window()
        self.recording = True
        started = last = time.perf_counter()
        while not self.stop.is_set():
            try:
                await asyncio.wait_for(self.stop.wait(), 1.0)
            except TimeoutError:
                pass
            now = time.perf_counter()
            window, self.window = self.window, _Window()
            self.total.messages += window.messages
            self.total.errors += window.errors
            self.total.rts_ms.extend(window.rts_ms)
            print(
                f"[{now - started:6.1f}s] {_line(window, now - last)}",
                flush=True,
                end="\n" if not tty else "\r\n",
            )
            last = now
            if not self.args.count and now - started >= self.args.duration_s:
                self.stop.set()
        self.elapsed_s = time.perf_counter() - started


async def _run_bench(namesrv_addr: str, args: argparse.Namespace) -> int:
    topic = args.topic or f"OrbitBench_{os.getpid()}"
    async with AdminClient(namesrv_addr, **client_options(args)) as admin:
        for _ in range(200):
            if (await admin.cluster_info()).broker_addr_table:
                break
            await asyncio.sleep(0.05)
        await admin.create_topic(topic, args.queues)
    async with Producer(
        "PG_BENCH", namesrv_addr, instance_name=f"bench-{os.getpid()}", **client_options(args)
    ) as producer:
        bench = _Bench(producer, topic, args)
        senders = [asyncio.create_task(bench.sender()) for _ in range(args.concurrency)]
        await bench.report()
        await asyncio.gather(*senders)
    mode = f"batches of {args.batch_size}" if args.batch_size else "single sends"
    print(
        f"summary: {args.size} B bodies, {mode}, {args.concurrency} concurrent sender(s), "
        f"{bench.elapsed_s:.1f} s, {bench.total.messages:,} messages"
    )
    print(f"  {_line(bench.total, bench.elapsed_s)}")
    return 1 if bench.total.errors else 0


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by ``args``; returns the exit status."""
    with tempfile.TemporaryDirectory(prefix="orbitmq-produce-") as workdir:
        server = None
        if not args.namesrv:
            server = start_standalone(Path(workdir), "--flush", args.flush)
        namesrv_addr = args.namesrv or f"127.0.0.1:{server[1]}"  # type: ignore[index]
        try:
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                return runner.run(_run_bench(namesrv_addr, args))
        finally:
            if server is not None:
                server[0].terminate()
                server[0].wait(30)
