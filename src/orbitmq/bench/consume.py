"""Consume throughput (RocketMQ's benchmark Consumer): msgs/s and MB/s through the OrbitMQ client.

With ``--prefill N`` the topic first gets N messages of ``--size`` bytes through raw batch
sends to its queues on every broker, so the run is self-contained (a temporary ``orbitmq
standalone`` is started unless ``-n/--namesrv`` names a running cluster). Then a consumer reads
for ``--duration-s`` seconds or until ``--count`` messages (default: the prefill): ``--mode
pull`` polls a PullConsumer (``--raw`` leaves records undecoded and counts them from the
buffers), ``--mode push`` runs a PushConsumer with a no-op async listener. A progress line is
printed every second. With ``--live-rate R`` a background sender keeps producing R msgs/s
during the run, and the delivery latency (store timestamp -> in the consumer's hands) is
reported with average/max/p50/p99/p999. ``--compare-defaults`` reads the prefill with consumers
left at their defaults beside the tuned PushConsumer (``orbitmq.bench._consume_defaults``).

The summary judges the rate against the target (200,000 msgs/s); the exit status is 1 when
fewer messages than asked for were consumed. Topics the run created are removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orbitmq.bench._consume_defaults import (
    ConsumerRun,
    compare_defaults,
    defaults_groups,
    print_defaults_table,
)
from orbitmq.bench._credentials import add_credential_arguments, client_options, request_signer
from orbitmq.bench._interrupt import INTERRUPTED_STATUS, stop_on_interrupt
from orbitmq.bench._report import ProgressLine, percentiles_text, verdict
from orbitmq.bench._servers import add_namesrv_argument, start_standalone
from orbitmq.bench._topics import BenchTopic
from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.client.push_consumer import ConsumeResult, PushConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import MessageExt
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import SendMessageRequestHeader
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.runner import new_event_loop

_TOTAL_SIZE = struct.Struct(">i")
TARGET_MSGS_PER_S = 200_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_namesrv_argument(parser)
    parser.add_argument("--topic", default="BenchConsume", help="topic (created when missing)")
    parser.add_argument("--group", default="bench-consume", help="consumer group")
    parser.add_argument("--queues", type=int, default=4, help="queues of the topic when it is created")
    parser.add_argument("--size", type=int, default=100, help="body bytes of prefilled messages")
    parser.add_argument(
        "--prefill", type=int, default=1_000_000, help="messages produced before consuming (0: none)"
    )
    parser.add_argument("--count", type=int, default=0, help="stop after this many messages (0: the prefill)")
    parser.add_argument("--duration-s", type=float, default=60.0, help="longest run in seconds")
    parser.add_argument("--mode", choices=("pull", "push"), default="pull", help="consumer kind")
    parser.add_argument("--raw", action="store_true", help="pull mode: count records without decoding")
    parser.add_argument("--pull-batch-size", type=int, default=1000, help="maxMsgNums per pull")
    parser.add_argument(
        "--live-rate", type=float, default=0.0, help="msgs/s sent during the run, for delivery latency"
    )
    parser.add_argument(
        "--compare-defaults",
        action="store_true",
        help="read the prefill with consumers at their defaults and with the tuned PushConsumer "
        "(and the real C++, Java and Go clients'), one after the other; prints msgs/s and default/tuned ratios",
    )
    parser.add_argument("--no-cpp", action="store_true", help="--compare-defaults without the C++ client")
    parser.add_argument("--no-java", action="store_true", help="--compare-defaults without the Java client")
    parser.add_argument("--no-go", action="store_true", help="--compare-defaults without the Go client")
    parser.add_argument(
        "--rounds", type=int, default=1, help="--compare-defaults: rounds over the backlog (medians printed)"
    )
    add_credential_arguments(parser)


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="orbitmq-consume-") as workdir:
        server = None
        namesrv = args.namesrv
        if not namesrv:
            server, namesrv = _start_standalone(Path(workdir))
        try:
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                stats = runner.run(_run(namesrv, args, server.pid if server is not None else None))
        finally:
            if server is not None:
                server.terminate()
                server.wait(30)
    if isinstance(stats, list):
        return print_defaults_table(stats, args.count or args.prefill, args.size)
    return _summary(stats, args)


def _start_standalone(workdir: Path) -> tuple[Any, str]:
    proc, namesrv_port, _ = start_standalone(workdir)
    return proc, f"127.0.0.1:{namesrv_port}"


class _Stats:
    def __init__(self) -> None:
        self.count = 0
        self.bytes = 0
        self.started = time.monotonic()
        self.started_wall_ms = time.time() * 1000
        self.latencies_ms: list[float] = []
        self.interrupted = False  # Ctrl-C ended the run early
        self.stopped = asyncio.Event()

    def interrupt(self) -> None:
        self.interrupted = True
        self.stopped.set()

    def add(self, count: int, size_bytes: int) -> None:
        self.count += count
        self.bytes += size_bytes


async def _run(
    namesrv: str, args: argparse.Namespace, server_pid: int | None = None
) -> _Stats | list[list[ConsumerRun]]:
    groups = defaults_groups(args.rounds) if args.compare_defaults else (args.group,)
    bench_topic = BenchTopic(
        namesrv, args.topic, args.queues, groups=groups, client_options=client_options(args)
    )
    await bench_topic.create()
    try:
        queues = await bench_topic.write_queues()
        if args.prefill:
            await _prefill(queues, args)
        if args.compare_defaults:
            return await compare_defaults(namesrv, args.topic, args, server_pid)
        return await _bench(namesrv, queues, args)
    finally:
        await bench_topic.remove_created()


async def _bench(namesrv: str, queues: list[tuple[str, int]], args: argparse.Namespace) -> _Stats:
    stats = _Stats()
    goal = args.count or args.prefill or sys.maxsize
    sender = None
    if args.live_rate > 0:
        sender = asyncio.get_running_loop().create_task(_live_sender(queues[0][0], args))
    progress = ProgressLine()
    reporter = asyncio.get_running_loop().create_task(_progress(stats, progress))
    undo = stop_on_interrupt(stats.interrupt)
    try:
        if args.mode == "pull":
            await _run_pull(namesrv, args, stats, goal)
        else:
            await _run_push(namesrv, args, stats, goal)
    finally:
        undo()
        reporter.cancel()
        progress.end()
        if sender is not None:
            sender.cancel()
    return stats


async def _prefill(queues: list[tuple[str, int]], args: argparse.Namespace) -> None:
    """``--prefill`` messages in batches of 1,000, round-robin over every queue of every broker."""
    client = RemotingClient(signer=request_signer(args))
    try:
        body = encode_batch([(0, b"x" * args.size, {})] * 1000)
        in_flight: set[asyncio.Task[RemotingCommand]] = set()
        for start in range(0, args.prefill, 1000):
            addr, queue_id = queues[(start // 1000) % len(queues)]
            header_ext = SendMessageRequestHeader("bench", args.topic, queue_id, batch=True).to_ext()
            if args.prefill - start < 1000:
                body = encode_batch([(0, b"x" * args.size, {})] * (args.prefill - start))
            request = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header_ext, body)
            in_flight.add(asyncio.get_running_loop().create_task(client.invoke(addr, request, 30_000)))
            if len(in_flight) >= 8:
                done, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                _check_sends(done, args.topic)
        if in_flight:
            done, _ = await asyncio.wait(in_flight)
            _check_sends(done, args.topic)
        print(f"prefilled {args.prefill} messages of {args.size} B into {args.topic}", flush=True)
    finally:
        await client.close()


def _check_sends(done: set[asyncio.Task[RemotingCommand]], topic: str) -> None:
    for task in done:
        response = task.result()
        if response.code != ResponseCode.SUCCESS:
            raise SystemExit(f"prefill of {topic} refused: {response.code} {response.remark}")


async def _live_sender(broker: str, args: argparse.Namespace) -> None:
    """Send ``--live-rate`` messages per second, paced by a schedule rather than by sleeps."""
    client = RemotingClient(signer=request_signer(args))
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        for index in itertools.count():
            delay_s = started + index / args.live_rate - loop.time()
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            header = SendMessageRequestHeader("bench", args.topic, -1, born_timestamp=int(time.time() * 1000))
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext(), b"y" * args.size)
            await client.invoke(broker, request)
    finally:
        await client.close()


async def _run_pull(namesrv: str, args: argparse.Namespace, stats: _Stats, goal: int) -> None:
    consumer = PullConsumer(
        args.group,
        namesrv,
        pull_batch_size=args.pull_batch_size,
        pull_threshold_for_queue=args.pull_batch_size * 4,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **client_options(args),
    )
    await consumer.subscribe(args.topic)
    await consumer.start()
    deadline = time.monotonic() + args.duration_s
    try:
        while stats.count < goal and time.monotonic() < deadline and not stats.stopped.is_set():
            if args.raw:
                for batch in await consumer.poll_raw(500):
                    count, size = _count_records(batch.body)
                    stats.add(count, size)
            else:
                messages = await consumer.poll(500)
                _record(stats, messages, args.live_rate > 0)
    finally:
        await consumer.shutdown()


def _count_records(body: bytes) -> tuple[int, int]:
    count = 0
    position = 0
    length = len(body)
    while position + 4 <= length:
        (total_size,) = _TOTAL_SIZE.unpack_from(body, position)
        if total_size <= 0:
            break
        position += total_size
        count += 1
    return count, length


def _record(stats: _Stats, messages: list[MessageExt], live: bool) -> None:
    stats.add(len(messages), sum(len(m.body) for m in messages))
    if live:
        now_ms = time.time() * 1000
        # Only messages the live sender stored during this run; older ones measure backlog.
        stats.latencies_ms += [
            now_ms - m.store_timestamp
            for m in messages
            if m.body[:1] == b"y" and m.store_timestamp >= stats.started_wall_ms
        ]


async def _run_push(namesrv: str, args: argparse.Namespace, stats: _Stats, goal: int) -> None:
    live = args.live_rate > 0
    done = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        _record(stats, messages, live)
        if stats.count >= goal:
            done.set()
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        args.group,
        namesrv,
        listener,
        pull_batch_size=min(args.pull_batch_size, 1024),
        consume_message_batch_max_size=256,
        consume_thread_min=1,
        consume_thread_max=4,
        pull_threshold_for_queue=4 * args.pull_batch_size,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **client_options(args),
    )
    consumer.subscribe(args.topic)
    await consumer.start()
    waits = [asyncio.ensure_future(done.wait()), asyncio.ensure_future(stats.stopped.wait())]
    try:
        await asyncio.wait(waits, timeout=args.duration_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
        await consumer.shutdown()


async def _progress(stats: _Stats, progress: ProgressLine) -> None:
    last_count, last_bytes = 0, 0
    while True:
        await asyncio.sleep(1.0)
        count, size = stats.count, stats.bytes
        elapsed = time.monotonic() - stats.started
        progress.show(
            f"[{elapsed:6.1f} s] {count - last_count:>9,} msgs/s  {(size - last_bytes) / 1e6:7.2f} MB/s  "
            f"total {count:,}"
        )
        last_count, last_bytes = count, size


def _summary(stats: _Stats, args: argparse.Namespace) -> int:
    elapsed = max(time.monotonic() - stats.started, 1e-9)
    rate = stats.count / elapsed
    print(
        f"consumed {stats.count:,} messages ({stats.bytes / 1e6:.1f} MB of {'records' if args.raw else 'bodies'}) in {elapsed:.2f} s: "
        f"{rate:,.0f} msgs/s, {stats.bytes / 1e6 / elapsed:.2f} MB/s (mode {args.mode}{' raw' if args.raw else ''})"
    )
    if stats.interrupted:
        print(f"  interrupted after {elapsed:.1f} s: no verdict", file=sys.stderr)
        return INTERRUPTED_STATUS
    print(f"  target >= {TARGET_MSGS_PER_S:,} msgs/s: {verdict(rate >= TARGET_MSGS_PER_S)}")
    if stats.latencies_ms:
        values = sorted(stats.latencies_ms)
        print(
            f"  delivery latency over {len(values)} live messages: avg {sum(values) / len(values):.2f} ms, "
            f"max {values[-1]:.2f} ms, {percentiles_text(values, (0.5, 0.99, 0.999))}"
        )
    wanted = args.count or args.prefill
    if stats.count == 0 or (wanted and stats.count < wanted):
        print(
            f"consumed {stats.count:,} of {wanted or 'any'} messages within {args.duration_s:g} s",
            file=sys.stderr,
        )
        return 1
    return 0
