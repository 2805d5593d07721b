"""Producer throughput and latency: RocketMQ's benchmark producer for the OrbitMQ client.

``--concurrency`` sender tasks share one :class:`~orbitmq.client.Producer` on one event loop
(uvloop when installed). Each sender sends one message (``--batch-size 0``) or one batch of
``--batch-size`` messages and waits for the broker's answer before sending again. Every second
a line reports the messages/s, the average and maximum round trip and its p50 / p99 / p99.9
over that second (a percentile needs enough samples, see ``bench._report``); a summary over the
whole run follows.

Reference, measured in the same run: the same requests (one message, or one batch of
``--batch-size``), encoded once and sent by as many tasks straight over the remoting
connection, for ``--reference-s`` seconds. The ratio shows what the producer's own work costs
(validation, message ids, queue choice, encoding). Target (batch sends of 100 B bodies):
200,000 msgs/s on one broker; single sends have no target.

Against a temporary ``orbitmq standalone`` unless ``--namesrv`` names a running cluster; there
the benchmark's topic is removed at the end unless it existed before.
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

from orbitmq.bench._credentials import add_credential_arguments, client_options, request_signer
from orbitmq.bench._interrupt import INTERRUPTED_STATUS, stop_on_interrupt
from orbitmq.bench._report import ProgressLine, percentiles_text, verdict
from orbitmq.bench._servers import add_namesrv_argument, start_standalone
from orbitmq.bench._topics import BenchTopic
from orbitmq.client.producer import Producer
from orbitmq.errors import ClientStateError, OrbitError
from orbitmq.model.message import Message
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import SendMessageRequestHeader
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.runner import new_event_loop

__all__ = ["add_arguments", "run"]

TARGET_BATCH_MSGS_PER_S = 200_000
"""One broker on the 2-core reference machine, batch sends of 100 B bodies."""
_PERCENTILES = (0.5, 0.99, 0.999)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_namesrv_argument(parser)
    parser.add_argument("--topic", default=None, help="topic (default: a fresh OrbitBench_<pid>)")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topic when it is created")
    parser.add_argument(
        "--concurrency", "--threads", dest="concurrency", type=int, default=1, help="concurrent senders"
    )
    parser.add_argument("--size", type=int, default=100, help="body bytes")
    parser.add_argument(
        "--batch-size", type=int, default=0, help="messages per batch request; 0 = single sends"
    )
    parser.add_argument("--duration-s", type=float, default=10.0, help="run time in seconds")
    parser.add_argument("--count", type=int, default=0, help="stop after this many messages instead (0: no)")
    parser.add_argument("--warmup-s", type=float, default=1.0, help="unreported warm-up time in seconds")
    parser.add_argument(
        "--reference-s", type=float, default=3.0, help="seconds of the raw-protocol reference run (0: none)"
    )
    parser.add_argument(
        "--flush", choices=("sync", "async"), default="async", help="flush mode of the temporary broker"
    )
    add_credential_arguments(parser)


@dataclass(slots=True)
class _Window:
    """Round trips (ms) and message count of one reporting interval."""

    messages: int = 0
    errors: int = 0
    rts_ms: list[float] = field(default_factory=list)


def _line(window: _Window, elapsed_s: float) -> str:
    values = sorted(window.rts_ms)
    average = sum(values) / len(values) if values else 0.0
    return (
        f"TPS {window.messages / elapsed_s:>10,.0f} msg/s | RT avg {average:7.3f} max {values[-1] if values else 0:8.3f}"
        f" ms | {percentiles_text(values, _PERCENTILES)} | errors {window.errors}"
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
        self.interrupted = False
        self.elapsed_s = 0.0
        self._failures_logged_at = 0.0
        self._failures_not_logged = 0

    def interrupt(self) -> None:
        """Ctrl-C: stop sending now; the run summarises what it measured so far."""
        self.interrupted = True
        self.stop.set()

    def _log_failure(self, exc: OrbitError) -> None:
        """One line per second at most: a broker that refuses everything must not flood the terminal."""
        now = time.monotonic()
        if now - self._failures_logged_at < 1.0:
            self._failures_not_logged += 1
            return
        more = f" (and {self._failures_not_logged:,} more failures)" if self._failures_not_logged else ""
        print(f"send failed: {exc}{more}", file=sys.stderr)
        self._failures_logged_at, self._failures_not_logged = now, 0

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
            except ClientStateError:
                break  # the producer was shut down under this sender: nothing more can be sent
            except OrbitError as exc:
                self.window.errors += 1
                self._log_failure(exc)
                await asyncio.sleep(0)  # a failure that needs no I/O must not starve the loop
                continue
            rt_ms = (time.perf_counter() - started) * 1000
            self.window.messages += count
            self.window.rts_ms.append(rt_ms)
            if self.recording:
                self.sent += count
                if args.count and self.sent >= args.count:
                    self.stop.set()

    async def report(self) -> None:
        progress = ProgressLine()
        try:
            await asyncio.wait_for(self.stop.wait(), self.args.warmup_s)
        except TimeoutError:
            pass
        self.window = _Window()
        self.recording = True
        started = last = time.perf_counter()
        try:
            await self._report_every_second(progress, started, last)
        finally:
            progress.end()
            self.elapsed_s = time.perf_counter() - started

    async def _report_every_second(self, progress: ProgressLine, started: float, last: float) -> None:
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
            progress.show(f"[{now - started:6.1f}s] {_line(window, now - last)}")
            last = now
            if not self.args.count and now - started >= self.args.duration_s:
                self.stop.set()


async def _run_bench(namesrv_addr: str, args: argparse.Namespace) -> int:
    bench_topic = BenchTopic(
        namesrv_addr,
        args.topic or f"OrbitBench_{os.getpid()}",
        args.queues,
        client_options=client_options(args),
    )
    await bench_topic.create()
    try:
        return await _measure(bench_topic, args)
    finally:
        await bench_topic.remove_created()


async def _measure(bench_topic: BenchTopic, args: argparse.Namespace) -> int:
    topic = bench_topic.topic
    async with Producer(
        "PG_BENCH", bench_topic.namesrv, instance_name=f"bench-{os.getpid()}", **client_options(args)
    ) as producer:
        bench = _Bench(producer, topic, args)
        undo = stop_on_interrupt(bench.interrupt)
        senders = [asyncio.create_task(bench.sender()) for _ in range(args.concurrency)]
        try:
            await bench.report()
            await asyncio.gather(*senders)
        finally:
            undo()
    mode = f"batches of {args.batch_size}" if args.batch_size else "single sends"
    how = f"interrupted after {bench.elapsed_s:.1f} s" if bench.interrupted else f"{bench.elapsed_s:.1f} s"
    print(
        f"summary: {args.size} B bodies, {mode}, {args.concurrency} concurrent sender(s), "
        f"{how}, {bench.total.messages:,} messages"
    )
    elapsed_s = max(bench.elapsed_s, 1e-9)
    print(f"  {_line(bench.total, elapsed_s)}")
    rate = bench.total.messages / elapsed_s
    if bench.interrupted:
        return INTERRUPTED_STATUS
    if args.reference_s > 0:
        reference = await _raw_reference(await bench_topic.write_queues(), topic, bench.body, args)
        print(
            f"  reference, the same requests straight over the connection: {reference:,.0f} msg/s; "
            f"producer / reference {rate / max(reference, 1e-9):.2f}"
        )
    if args.batch_size:
        met = rate >= TARGET_BATCH_MSGS_PER_S
        qualifier = "" if args.size == 100 else f" (set for 100 B bodies; these are {args.size} B)"
        print(f"  target >= {TARGET_BATCH_MSGS_PER_S:,} msg/s{qualifier}: {verdict(met)}")
    else:
        print(
            f"  target: none for single sends (>= {TARGET_BATCH_MSGS_PER_S:,} msg/s is set for batch sends)"
        )
    return 1 if bench.total.errors or not bench.total.messages else 0


async def _raw_reference(
    queues: list[tuple[str, int]], topic: str, body: bytes, args: argparse.Namespace
) -> float:
    """Messages/s of the same requests encoded once and sent straight over one connection per broker."""
    client = RemotingClient(signer=request_signer(args))
    sent = 0
    deadline = time.perf_counter() + args.reference_s

    def request(queue_id: int) -> RemotingCommand:
        header = SendMessageRequestHeader("PG_BENCH_RAW", topic, queue_id, batch=args.batch_size > 0)
        if args.batch_size:
            payload = encode_batch([(0, body, {})] * args.batch_size)
            return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header.to_ext(), payload)
        return RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext(), body)

    async def sender(index: int) -> None:
        nonlocal sent
        addr, queue_id = queues[index % len(queues)]
        template = request(queue_id)
        while time.perf_counter() < deadline:
            command = RemotingCommand.request(template.code, template.ext_fields, template.body)
            response = await client.invoke(addr, command, 10_000)
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"reference send refused: {response.code} {response.remark}")
            sent += max(args.batch_size, 1)

    started = time.perf_counter()
    try:
        await asyncio.gather(*(sender(index) for index in range(args.concurrency)))
    finally:
        await client.close()
    return sent / (time.perf_counter() - started)


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
