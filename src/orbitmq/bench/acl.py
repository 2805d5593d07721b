"""What ACL costs a producer: throughput with ACL off and on, measured in one run.

Two temporary ``orbitmq standalone`` servers run side by side: one without ACL, one with
``aclEnable=true`` whose producer account is an ordinary one (signature and topic permission
checked on every request, as for any application). Each workload of ``--batch-sizes`` (0 =
single sends; default single sends, then batches of 32) runs with ``--concurrency`` senders
against each server in alternating rounds (off, on, on, off, off, on, ...), so a noisy
neighbour on the machine hits both alike. The summary prints each side's median round
(messages/s) and the ratio of the medians beside the target (>= 0.90); a median shrugs off
the round a neighbour spoiled. A batch request is signed and checked once, whatever its message
count, so batches amortise the check; a single send pays it (and the producer's signing) per
message.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orbitmq.bench._servers import start_standalone
from orbitmq.client.admin import AdminClient
from orbitmq.client.producer import Producer
from orbitmq.errors import OrbitError
from orbitmq.model.message import Message
from orbitmq.transport.runner import new_event_loop

__all__ = ["add_arguments", "run"]

TARGET_RATIO = 0.90
ADMIN = ("benchadmin", "bench-admin-secret")
PRODUCER = ("benchproducer", "bench-producer-secret")
TOPIC = "OrbitBenchAcl"

_ACCOUNTS = f"""accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {PRODUCER[0]}
    secretKey: {PRODUCER[1]}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [{TOPIC}=PUB]
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent senders (16)")
    parser.add_argument("--size", type=int, default=100, help="body bytes (100)")
    parser.add_argument(
        "--batch-sizes", default="0,32", help="workloads: messages per request, 0 = single sends (0,32)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds per side (5)")
    parser.add_argument("--round-s", type=float, default=3.0, help="seconds per round (3)")
    parser.add_argument(
        "--warmup-s", type=float, default=1.0, help="unmeasured sending before each round (1)"
    )


async def _round(
    producer: Producer, args: argparse.Namespace, body: bytes, batch_size: int
) -> tuple[int, float, int]:
    """Send for ``--round-s`` after a warm-up; (messages, seconds, errors)."""
    stop = asyncio.Event()
    counted = {"messages": 0, "errors": 0, "on": False}

    async def sender() -> None:
        while not stop.is_set():
            try:
                if batch_size > 0:
                    await producer.send_batch([Message(TOPIC, body) for _ in range(batch_size)])
                    sent = batch_size
                else:
                    await producer.send(Message(TOPIC, body))
                    sent = 1
            except OrbitError as exc:
                counted["errors"] += 1
                print(f"send failed: {exc}", file=sys.stderr)
                await asyncio.sleep(0.05)
                continue
            if counted["on"]:
                counted["messages"] += sent

    tasks = [asyncio.create_task(sender()) for _ in range(args.concurrency)]
    await asyncio.sleep(args.warmup_s)
    counted["on"] = True
    started = time.perf_counter()
    await asyncio.sleep(args.round_s)
    counted["on"] = False
    elapsed = time.perf_counter() - started
    stop.set()
    await asyncio.gather(*tasks)
    return int(counted["messages"]), elapsed, int(counted["errors"])


async def _bench(off_namesrv: str, on_namesrv: str, args: argparse.Namespace) -> int:
    body = os.urandom(args.size // 2 + 1).hex().encode()[: args.size]
    sides: dict[str, tuple[str, dict[str, Any]]] = {
        "off": (off_namesrv, {}),
        "on": (on_namesrv, {"access_key": PRODUCER[0], "secret_key": PRODUCER[1]}),
    }
    for name, (namesrv, _) in sides.items():
        credentials = {"access_key": ADMIN[0], "secret_key": ADMIN[1]} if name == "on" else {}
        async with AdminClient(namesrv, **credentials) as admin:
            for _ in range(200):
                if (await admin.cluster_info()).broker_addr_table:
                    break
                await asyncio.sleep(0.05)
            await admin.create_topic(TOPIC, 8)
    producers = {
        name: Producer(
            f"PG_BENCH_ACL_{name}", namesrv, instance_name=f"bench-acl-{name}-{os.getpid()}", **options
        )
        for name, (namesrv, options) in sides.items()
    }
    errors = 0
    try:
        for producer in producers.values():
            await producer.start()
        for batch_size in [int(text) for text in args.batch_sizes.split(",") if text.strip()]:
            errors += await _workload(producers, args, body, batch_size)
    finally:
        for producer in producers.values():
            await producer.shutdown()
    return 1 if errors else 0


async def _workload(
    producers: dict[str, Producer], args: argparse.Namespace, body: bytes, batch_size: int
) -> int:
    mode = f"batches of {batch_size}" if batch_size else "single sends"
    print(
        f"{mode}: {args.size} B bodies, {args.concurrency} senders, {args.rounds} x {args.round_s:g} s per side"
    )
    rates: dict[str, list[float]] = {name: [] for name in producers}
    errors = 0
    for number in range(1, args.rounds + 1):
        # Alternate which side goes first, so a load that drifts within a round hits both alike.
        order = list(producers.items())
        for name, producer in order if number % 2 else reversed(order):
            messages, seconds, failed = await _round(producer, args, body, batch_size)
            rates[name].append(messages / seconds)
            errors += failed
            print(
                f"  round {number} ACL {name:>3}: {messages / seconds:>10,.0f} msg/s ({failed} errors)",
                flush=True,
            )
    rate = {name: statistics.median(values) for name, values in rates.items()}
    ratio = rate["on"] / rate["off"] if rate["off"] else 0.0
    verdict = "meets" if ratio >= TARGET_RATIO else "misses"
    print(f"  summary, {mode} (median round):")
    print(f"    ACL off: {rate['off']:>10,.0f} msg/s")
    print(f"    ACL on:  {rate['on']:>10,.0f} msg/s (signature and topic permission checked per request)")
    print(f"    ratio on/off: {ratio:.3f} ({verdict} the target >= {TARGET_RATIO:.2f})", flush=True)
    return errors


def run(args: argparse.Namespace) -> int:
    """Start both servers, run the rounds, print the comparison; returns the exit status."""
    with tempfile.TemporaryDirectory(prefix="orbitmq-acl-bench-") as workdir:
        off_dir, on_dir = Path(workdir) / "off", Path(workdir) / "on"
        accounts = on_dir / "data" / "conf" / "plain_acl.yml"
        accounts.parent.mkdir(parents=True)
        accounts.write_text(_ACCOUNTS)
        conf = on_dir / "broker.conf"
        conf.write_text("aclEnable=true\nbindAddress=127.0.0.1\n")
        off = start_standalone(off_dir)
        try:
            on = start_standalone(on_dir, "-c", str(conf))
            try:
                with asyncio.Runner(loop_factory=new_event_loop) as runner:
                    return runner.run(_bench(f"127.0.0.1:{off[1]}", f"127.0.0.1:{on[1]}", args))
            finally:
                on[0].terminate()
                on[0].wait(30)
        finally:
            off[0].terminate()
            off[0].wait(30)
