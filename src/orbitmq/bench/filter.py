"""Filtered pulls (SQL92 and TAG) beside unfiltered pulls of the same messages, in one run.

A temporary ``orbitmq standalone`` (``enablePropertyFilter=true``; or the running cluster
``-n/--namesrv`` names, whose brokers must have it on) gets ``--prefill`` messages over
``--queues`` queues through raw batch sends (a topic the benchmark created is removed at the
end); every message carries a ``price`` (0-99) and
a ``region`` property and one of four tags. Then each case reads every queue from offset 0 to
its end with plain PULL_MESSAGE requests of ``--pull-batch-size`` (records left undecoded, as
the broker's cost is what is measured), ``--rounds`` times (3), the cases interleaved within
each round in this order:

=============  =======================================================
case           subscription
=============  =======================================================
unfiltered     TAG ``*`` (the reference)
sql-all        SQL92 ``price >= 0 AND region IS NOT NULL`` (every message matches)
sql-quarter    SQL92 ``price < 50 AND region IN ('eu', 'us')`` (about a quarter)
tag-quarter    TAG ``TagA`` (a quarter, decided on the consume queue's tags hash)
=============  =======================================================

For each case it prints messages delivered per second and messages examined (queue offsets
passed) per second of its median round, and the ratio of examined msgs/s to the unfiltered
median's; the target is a ratio of at least 0.5 for the SQL92 cases. A round of 200,000
messages lasts about a tenth of a second, so one round alone swings by a tenth; the median of
interleaved rounds shrugs off a neighbour's burst. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from orbitmq.bench._report import verdict
from orbitmq.bench._servers import add_namesrv_argument, start_standalone
from orbitmq.bench._topics import BenchTopic
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    GetMaxOffsetRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.runner import new_event_loop

TARGET_RATIO = 0.5
_TOTAL_SIZE = struct.Struct(">i")
_PULL_FLAG_SUBSCRIPTION = 0x4
_CASES = (
    ("unfiltered", "TAG", "*"),
    ("sql-all", "SQL92", "price >= 0 AND region IS NOT NULL"),
    ("sql-quarter", "SQL92", "price < 50 AND region IN ('eu', 'us')"),
    ("tag-quarter", "TAG", "TagA"),
)
_REGIONS = ("eu", "us", "apac", "latam")
_TAGS = ("TagA", "TagB", "TagC", "TagD")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_namesrv_argument(parser)
    parser.add_argument("--prefill", type=int, default=200_000, help="messages stored before the runs")
    parser.add_argument("--queues", type=int, default=4, help="queues of the topic")
    parser.add_argument("--size", type=int, default=100, help="body bytes per message")
    parser.add_argument("--pull-batch-size", type=int, default=256, help="maxMsgNums per pull")
    parser.add_argument("--topic", default="BenchFilter", help="topic")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of all cases; medians are reported")


@dataclass(slots=True)
class _CaseResult:
    name: str
    delivered: int
    examined: int
    elapsed_s: float

    @property
    def delivered_per_s(self) -> float:
        return self.delivered / max(self.elapsed_s, 1e-9)

    @property
    def examined_per_s(self) -> float:
        return self.examined / max(self.elapsed_s, 1e-9)


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="orbitmq-filter-") as workdir:
        proc = None
        namesrv = args.namesrv
        if not namesrv:
            conf = Path(workdir) / "broker.conf"
            conf.write_text("enablePropertyFilter=true\n")
            proc, namesrv_port, _ = start_standalone(Path(workdir), "-c", str(conf))
            namesrv = f"127.0.0.1:{namesrv_port}"
        try:
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                results = runner.run(_bench(namesrv, args))
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)
    return _summary(results, args)


async def _bench(namesrv: str, args: argparse.Namespace) -> list[_CaseResult]:
    topic = BenchTopic(namesrv, args.topic, args.queues)
    await topic.create()
    client = RemotingClient()
    try:
        queues = await topic.write_queues()
        await _prefill(client, queues, args)
        rounds: dict[str, list[_CaseResult]] = {name: [] for name, _, _ in _CASES}
        for round_number in range(1, max(args.rounds, 1) + 1):
            for name, expression_type, expression in _CASES:
                result = await _read_all(client, queues, args, name, expression_type, expression)
                rounds[name].append(result)
                print(
                    f"round {round_number} {name:<12} {result.delivered:>9,} delivered in "
                    f"{result.elapsed_s:6.2f} s ({result.examined_per_s:,.0f} msgs/s examined)",
                    flush=True,
                )
        # Each case's median round by examined msgs/s.
        return [
            sorted(results, key=lambda result: result.examined_per_s)[len(results) // 2]
            for results in rounds.values()
        ]
    finally:
        await client.close()
        await topic.remove_created()


async def _prefill(client: RemotingClient, queues: list[tuple[str, int]], args: argparse.Namespace) -> None:
    body_bytes = b"x" * args.size
    in_flight: set[asyncio.Task[RemotingCommand]] = set()
    for start in range(0, args.prefill, 1000):
        count = min(1000, args.prefill - start)
        items = [
            (
                0,
                body_bytes,
                {
                    "price": str((start + index) % 100),
                    "region": _REGIONS[(start + index) // 100 % len(_REGIONS)],
                    "TAGS": _TAGS[(start + index) % len(_TAGS)],
                },
            )
            for index in range(count)
        ]
        broker, queue_id = queues[(start // 1000) % len(queues)]
        header_ext = SendMessageRequestHeader("bench", args.topic, queue_id, batch=True).to_ext()
        request = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header_ext, encode_batch(items))
        in_flight.add(asyncio.get_running_loop().create_task(client.invoke(broker, request, 30_000)))
        if len(in_flight) >= 8:
            _, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
    if in_flight:
        await asyncio.wait(in_flight)
    print(f"prefilled {args.prefill:,} messages of {args.size} B into {args.topic}", flush=True)


async def _read_all(
    client: RemotingClient,
    queues: list[tuple[str, int]],
    args: argparse.Namespace,
    name: str,
    expression_type: str,
    expression: str,
) -> _CaseResult:
    ends = []
    for broker, queue_id in queues:
        request = RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(args.topic, queue_id).to_ext()
        )
        ends.append(int((await client.invoke(broker, request)).ext_fields.get("offset", "0")))
    started = time.perf_counter()
    counts = await asyncio.gather(
        *(
            _read_queue(client, broker, args, queue_id, end, f"bench-{name}", expression_type, expression)
            for (broker, queue_id), end in zip(queues, ends, strict=True)
        )
    )
    return _CaseResult(name, sum(counts), sum(ends), time.perf_counter() - started)


async def _read_queue(
    client: RemotingClient,
    broker: str,
    args: argparse.Namespace,
    queue_id: int,
    end: int,
    group: str,
    expression_type: str,
    expression: str,
) -> int:
    delivered = 0
    queue_offset = 0
    while queue_offset < end:
        header = PullMessageRequestHeader(
            consumer_group=group,
            topic=args.topic,
            queue_id=queue_id,
            queue_offset=queue_offset,
            max_msg_nums=args.pull_batch_size,
            sys_flag=_PULL_FLAG_SUBSCRIPTION,
            subscription=expression,
            expression_type=expression_type,
        )
        response = await client.invoke(
            broker, RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        )
        if response.code == ResponseCode.SUCCESS:
            delivered += _count_records(response.body)
        elif response.code not in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_NOT_FOUND):
            raise SystemExit(
                f"pull of queue {queue_id} at {queue_offset} failed: {response.code} {response.remark}"
            )
        next_offset = int(response.ext_fields.get("nextBeginOffset", str(queue_offset)))
        if next_offset <= queue_offset:
            break
        queue_offset = next_offset
    return delivered


def _count_records(body: bytes) -> int:
    count = position = 0
    while position + 4 <= len(body):
        (total_size,) = _TOTAL_SIZE.unpack_from(body, position)
        if total_size <= 0:
            break
        position += total_size
        count += 1
    return count


def _summary(results: list[_CaseResult], args: argparse.Namespace) -> int:
    reference = results[0].examined_per_s
    print()
    print(f"{'case':<12} {'delivered':>10} {'msgs/s delivered':>17} {'msgs/s examined':>16} {'ratio':>6}")
    for result in results:
        ratio = result.examined_per_s / reference if reference else 0.0
        print(
            f"{result.name:<12} {result.delivered:>10,} {result.delivered_per_s:>17,.0f} "
            f"{result.examined_per_s:>16,.0f} {ratio:>5.2f}x"
        )
    sql = [
        result.examined_per_s / reference for result in results if result.name.startswith("sql") and reference
    ]
    print(
        f"SQL92 filtered pulls examine {min(sql, default=0):.2f}x the unfiltered msgs/s "
        f"({args.prefill:,} messages, {args.queues} queues, batches of {args.pull_batch_size}, "
        f"median of {max(args.rounds, 1)} rounds)"
    )
    print(f"  target >= {TARGET_RATIO}x: {verdict(bool(sql) and min(sql) >= TARGET_RATIO)}")
    return 0
