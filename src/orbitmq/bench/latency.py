"""End-to-end delivery latency: send -> long-polling pull -> message in hand.

One process plays producer and consumer over real loopback connections to a broker (of a
temporary ``orbitmq standalone`` subprocess unless ``--namesrv`` names a running cluster;
the first broker of the benchmark's topic is measured). For each queue of a fresh topic a
consumer task keeps one long-polling PULL_MESSAGE parked; a producer sends ``--count``
messages one at a time at ``--rate`` per second, round-robin over the queues, and each
message's latency is the time from just before its SEND_MESSAGE is written to the moment its
pull response has been decoded. Percentiles are printed at the end, beside the target (p99
under 10 ms); the topic is removed afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

from orbitmq.bench._report import percentile, percentiles_text, verdict
from orbitmq.bench._servers import add_namesrv_argument, start_standalone
from orbitmq.bench._topics import BenchTopic
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SendMessageRequestHeader,
)
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.runner import new_event_loop

_SEQ = struct.Struct(">q")
PULL_SYS_FLAG_SUSPEND_AND_SUBSCRIPTION = 0x2 | 0x4
TARGET_P99_MS = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_namesrv_argument(parser)
    parser.add_argument("--count", type=int, default=3000, help="messages to send")
    parser.add_argument("--rate", type=float, default=500.0, help="messages per second")
    parser.add_argument("--queues", type=int, default=4, help="queues of the benchmark topic")
    parser.add_argument("--size", type=int, default=256, help="body bytes")


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="orbitmq-latency-") as workdir:
        server = None if args.namesrv else start_standalone(Path(workdir))
        namesrv = args.namesrv or f"127.0.0.1:{server[1]}"  # type: ignore[index]
        try:
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                latencies_ms = runner.run(_run(namesrv, args))
        finally:
            if server is not None:
                server[0].terminate()
                server[0].wait(30)
    return _report(latencies_ms, args)


async def _run(namesrv: str, args: argparse.Namespace) -> list[float]:
    bench_topic = BenchTopic(namesrv, f"LatencyBench_{os.getpid()}", args.queues)
    await bench_topic.create()
    try:
        broker = (await bench_topic.write_queues())[0][0]
        return await _measure(broker, bench_topic.topic, args)
    finally:
        await bench_topic.remove_created()


async def _measure(broker: str, topic: str, args: argparse.Namespace) -> list[float]:
    client = RemotingClient()
    sent_at: dict[int, int] = {}
    latencies_ns: list[int] = []
    done = asyncio.Event()
    consumers = [
        asyncio.create_task(
            _consume(client, broker, topic, queue_id, sent_at, latencies_ns, args.count, done)
        )
        for queue_id in range(args.queues)
    ]
    await asyncio.sleep(0.5)  # let every pull park on its empty queue
    body_pad = b"x" * max(0, args.size - _SEQ.size)
    interval_s = 1.0 / args.rate
    start = time.perf_counter()
    for seq in range(args.count):
        header = SendMessageRequestHeader(
            producer_group="PG_LATENCY",
            topic=topic,
            queue_id=seq % args.queues,
            born_timestamp=int(time.time() * 1000),
            properties="",
        )
        request = RemotingCommand.request(
            RequestCode.SEND_MESSAGE, header.to_ext(), _SEQ.pack(seq) + body_pad
        )
        sent_at[seq] = time.perf_counter_ns()
        reply = await client.invoke(broker, request)
        if reply.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"send {seq} failed: {reply.code} {reply.remark}")
        delay = start + (seq + 1) * interval_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
    try:
        await asyncio.wait_for(done.wait(), 30)
    finally:
        for task in consumers:
            task.cancel()
        await asyncio.gather(*consumers, return_exceptions=True)
        await client.close()
    return [value / 1e6 for value in latencies_ns]


async def _consume(
    client: RemotingClient,
    broker: str,
    topic: str,
    queue_id: int,
    sent_at: dict[int, int],
    latencies_ns: list[int],
    expected: int,
    done: asyncio.Event,
) -> None:
    queue_offset = 0
    while True:
        header = PullMessageRequestHeader(
            consumer_group="CG_LATENCY",
            topic=topic,
            queue_id=queue_id,
            queue_offset=queue_offset,
            max_msg_nums=32,
            sys_flag=PULL_SYS_FLAG_SUSPEND_AND_SUBSCRIPTION,
            suspend_timeout_millis=15000,
            subscription="*",
        )
        reply = await client.invoke(
            broker, RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext()), timeout_ms=30000
        )
        received_ns = time.perf_counter_ns()
        response = PullMessageResponseHeader.from_ext(reply.ext_fields)
        if reply.code == ResponseCode.SUCCESS:
            for message in decode_stored_messages(reply.body):
                (seq,) = _SEQ.unpack_from(message.body)
                latencies_ns.append(received_ns - sent_at[seq])
            if len(latencies_ns) >= expected:
                done.set()
        queue_offset = response.next_begin_offset


def _report(latencies_ms: list[float], args: argparse.Namespace) -> int:
    values = sorted(latencies_ms)
    if len(values) < args.count:
        print(f"only {len(values)} of {args.count} messages were delivered", file=sys.stderr)
        return 1
    print(
        f"end-to-end delivery latency, send -> long-polling pull, {args.count} messages of {args.size} B "
        f"at {args.rate:g}/s over {args.queues} queues"
    )
    print(f"  {percentiles_text(values, (0.5, 0.9, 0.99, 0.999))}  max {values[-1]:.3f} ms")
    p99 = percentile(values, 0.99)
    if p99 is None:
        print(f"  target p99 < {TARGET_P99_MS:g} ms: not judged (p99 needs 100 samples)")
        return 0
    print(f"  target p99 < {TARGET_P99_MS:g} ms: {verdict(p99 < TARGET_P99_MS)}")
    return 0
