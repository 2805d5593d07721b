"""Timed-message benchmark: a million pending timers, then how late each one is delivered.

A temporary ``orbitmq standalone``, started here, receives ``--count`` messages in batches
(SEND_BATCH_MESSAGE, ``--batch`` per request, a few requests in flight), each with a
``TIMER_DELIVER_MS`` spread uniformly over ``[start + window-start, start + window-start +
window]``. Long-polling pulls on every queue of the topic collect the deliveries.

Printed at the end: the put rate; the broker's RSS once every timer is pending and its peak
(VmHWM); disk used by the timer structures and by the commit log; and the delivery lag,
lateness = the delivered record's store time (when the broker moved it to the topic) - its due
time, as p50 / p99 / max, with the count delivered early (must be 0) and the consumer-side
lag (arrival in this process - due time).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

from orbitmq.bench._report import percentiles_text
from orbitmq.bench._servers import start_standalone
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    CreateTopicRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.runner import new_event_loop

TOPIC = "BenchTimer"
PULL_SYS_FLAG_SUSPEND_AND_SUBSCRIPTION = 0x2 | 0x4
SENDS_IN_FLIGHT = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--count", type=int, default=1_000_000, help="timed messages")
    parser.add_argument("--window-start-s", type=float, default=60.0, help="earliest due time, s after start")
    parser.add_argument("--window-s", type=float, default=60.0, help="width of the due-time window, s")
    parser.add_argument(
        "--batch-size", "--batch", dest="batch", type=int, default=250, help="messages per send request"
    )
    parser.add_argument("--queues", type=int, default=4, help="queues of the topic")
    parser.add_argument("--size", type=int, default=32, help="body bytes")
    parser.add_argument("--precision-ms", type=int, default=1000, help="broker timerPrecisionMs")
    parser.add_argument("--keep", help="keep the broker's data in this directory instead of a temporary one")


def run(args: argparse.Namespace) -> int:
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        return _run_in(Path(args.keep), args)
    with tempfile.TemporaryDirectory(prefix="orbitmq-timer-") as workdir:
        return _run_in(Path(workdir), args)


def _run_in(workdir: Path, args: argparse.Namespace) -> int:
    conf = workdir / "timer.conf"
    conf.write_text(f"timerPrecisionMs={args.precision_ms}\nmapedFileSizeCommitLog={1 << 30}\n")
    proc, _, broker_port = start_standalone(workdir, "-c", str(conf))
    try:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            report = runner.run(_measure(f"127.0.0.1:{broker_port}", proc.pid, workdir, args))
    finally:
        proc.terminate()
        proc.wait(60)
    print(report)
    return 0 if "early 0 " in report else 1


async def _measure(broker_addr: str, pid: int, workdir: Path, args: argparse.Namespace) -> str:
    client = RemotingClient()
    try:
        header = CreateTopicRequestHeader(
            topic=TOPIC, read_queue_nums=args.queues, write_queue_nums=args.queues
        )
        await client.invoke(
            broker_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
        )
        lags: list[int] = []
        consumer_lags: list[int] = []
        stop = asyncio.Event()
        pullers = [
            asyncio.create_task(_pull_queue(client, broker_addr, queue_id, lags, consumer_lags, stop))
            for queue_id in range(args.queues)
        ]
        start_ms = time.time_ns() // 1_000_000
        put_s = await _produce(client, broker_addr, start_ms, args)
        rss_pending_kib = _proc_status_kib(pid, "VmRSS")
        anon_pending_kib = _proc_status_kib(pid, "RssAnon")
        print(
            f"put {args.count} timed messages in {put_s:.1f} s ({args.count / put_s:,.0f} msg/s); "
            f"broker RSS {rss_pending_kib / 1024:.0f} MiB ({anon_pending_kib / 1024:.0f} MiB anonymous) "
            "with every timer pending",
            flush=True,
        )
        due_last_ms = start_ms + int((args.window_start_s + args.window_s) * 1000)
        deadline = time.monotonic() + (due_last_ms - time.time() * 1000) / 1000 + 60
        while len(lags) < args.count and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        stop.set()
        for task in pullers:
            task.cancel()
        await asyncio.gather(*pullers, return_exceptions=True)
        return _report(args, put_s, pid, rss_pending_kib, workdir, lags, consumer_lags)
    finally:
        await client.close()


async def _produce(
    client: RemotingClient, broker_addr: str, start_ms: int, args: argparse.Namespace
) -> float:
    rng = random.Random(20261121)
    window_start_ms = start_ms + int(args.window_start_s * 1000)
    window_ms = int(args.window_s * 1000)
    body = b"t" * args.size
    semaphore = asyncio.Semaphore(SENDS_IN_FLIGHT)
    failures: list[str] = []

    async def send(batch_index: int, count: int) -> None:
        items = [
            (
                0,
                body,
                {
                    "UNIQ_KEY": f"T{batch_index:08d}{i:04d}",
                    "TIMER_DELIVER_MS": str(window_start_ms + rng.randrange(window_ms)),
                },
            )
            for i in range(count)
        ]
        header = SendMessageRequestHeader(
            producer_group="PG_BENCH_TIMER",
            topic=TOPIC,
            queue_id=batch_index % args.queues,
            born_timestamp=time.time_ns() // 1_000_000,
            batch=True,
        )
        request = RemotingCommand.request(
            RequestCode.SEND_BATCH_MESSAGE, header.to_ext(), encode_batch(items)
        )
        try:
            response = await client.invoke(broker_addr, request, 30_000)
            if response.code != ResponseCode.SUCCESS:
                failures.append(f"{response.code} {response.remark}")
        finally:
            semaphore.release()

    started = time.monotonic()
    tasks = []
    for batch_index, first in enumerate(range(0, args.count, args.batch)):
        await semaphore.acquire()
        tasks.append(asyncio.create_task(send(batch_index, min(args.batch, args.count - first))))
    await asyncio.gather(*tasks)
    if failures:
        raise RuntimeError(f"{len(failures)} batch sends failed, first: {failures[0]}")
    return time.monotonic() - started


async def _pull_queue(
    client: RemotingClient,
    broker_addr: str,
    queue_id: int,
    lags: list[int],
    consumer_lags: list[int],
    stop: asyncio.Event,
) -> None:
    queue_offset = 0
    while not stop.is_set():
        header = PullMessageRequestHeader(
            consumer_group="CG_BENCH_TIMER", topic=TOPIC, queue_id=queue_id, queue_offset=queue_offset,
            max_msg_nums=256, sys_flag=PULL_SYS_FLAG_SUSPEND_AND_SUBSCRIPTION, suspend_timeout_millis=5_000,
            subscription="*", expression_type="TAG",
        )  # fmt: skip
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        response = await client.invoke(broker_addr, request, 15_000)
        if response.code == ResponseCode.SUCCESS:
            arrived_ms = time.time_ns() // 1_000_000
            for message in decode_stored_messages(response.body, decode_body=False):
                due_ms = int(message.properties["TIMER_DELIVER_MS"])
                lags.append(message.store_timestamp - due_ms)
                consumer_lags.append(arrived_ms - due_ms)
        if "nextBeginOffset" in response.ext_fields:
            queue_offset = int(response.ext_fields["nextBeginOffset"])


def _report(
    args: argparse.Namespace,
    put_s: float,
    pid: int,
    rss_pending_kib: int,
    workdir: Path,
    lags: list[int],
    consumer_lags: list[int],
) -> str:
    lags.sort()
    consumer_lags.sort()
    store = workdir / "data" / "store"
    early = sum(1 for lag in lags if lag < 0)
    return "\n".join(
        [
            f"timer benchmark: {args.count:,} messages due {args.window_start_s:g}..{args.window_start_s + args.window_s:g} s ahead, "
            f"wheel slots of {args.precision_ms} ms",
            f"  put rate            {args.count / put_s:,.0f} msg/s ({put_s:.1f} s)",
            f"  broker memory       RSS {rss_pending_kib / 1024:.0f} MiB with all pending; peak {_proc_status_kib(pid, 'VmHWM') / 1024:.0f} MiB "
            "(file-backed pages of the mapped commit log count in RSS)",
            f"  disk                timer structures {_disk_mib(store / 'timer'):.1f} MiB; commit log {_disk_mib(store / 'commitlog'):.1f} MiB",
            f"  delivered           {len(lags):,} of {args.count:,}",
            f"  lateness (broker)   {percentiles_text(lags, (0.5, 0.99))}, "
            f"max {lags[-1] if lags else 0} ms, early {early} ",
            f"  lateness (consumer) {percentiles_text(consumer_lags, (0.5, 0.99))}, "
            f"max {consumer_lags[-1] if consumer_lags else 0} ms",
        ]
    )


def _proc_status_kib(pid: int, field: str) -> int:
    """A ``/proc/<pid>/status`` memory field in KiB (0 when unavailable). The broker runs in the
    standalone process, which is ``pid``."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _disk_mib(path: Path) -> float:
    """Allocated bytes (not apparent size: segments are sparse) under ``path``, in MiB."""
    total = 0
    for file in path.rglob("*"):
        if file.is_file():
            total += file.stat().st_blocks * 512
    return total / (1 << 20)
