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

The two servers differ only in ACL: both start from a ``broker.conf`` (``aclEnable=false`` and
``true``) with the same other keys, and the ACL side's producer signs. Beside throughput each
side's CPU time per message is printed (the benchmark process and the server, from
``/proc``): on a machine shared with other work throughput follows the neighbours, while the
CPU a message costs shows what ACL itself adds.
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
from orbitmq.errors import ClientStateError, OrbitError
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


def _server_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (None where /proc is not there)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _round(
    producer: Producer, args: argparse.Namespace, body: bytes, batch_size: int, server_pid: int
) -> tuple[int, float, int, float, float | None]:
    """Send for ``--round-s`` after a warm-up.

    Returns:
        Messages, seconds, errors, this process's CPU seconds and the server's (None if unknown).
    """
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
            except ClientStateError:
                break  # shut down under it (Ctrl-C): sending again would fail at once, forever
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
    started, client_cpu, server_cpu = time.perf_counter(), time.process_time(), _server_cpu_s(server_pid)
    await asyncio.sleep(args.round_s)
    counted["on"] = False
    elapsed = time.perf_counter() - started
    client_cpu = time.process_time() - client_cpu
    server_after = _server_cpu_s(server_pid)
    server_used = None if server_cpu is None or server_after is None else server_after - server_cpu
    stop.set()
    await asyncio.gather(*tasks)
    return int(counted["messages"]), elapsed, int(counted["errors"]), client_cpu, server_used


async def _bench(servers: dict[str, tuple[str, int]], args: argparse.Namespace) -> int:
    """Run every workload against ``servers``: side -> (name-server address, server pid)."""
    body = os.urandom(args.size // 2 + 1).hex().encode()[: args.size]
    sides: dict[str, tuple[str, dict[str, Any]]] = {
        "off": (servers["off"][0], {}),
        "on": (servers["on"][0], {"access_key": PRODUCER[0], "secret_key": PRODUCER[1]}),
    }
    pids = {name: pid for name, (_, pid) in servers.items()}
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
            errors += await _workload(producers, pids, args, body, batch_size)
    finally:
        for producer in producers.values():
            await producer.shutdown()
    return 1 if errors else 0


async def _workload(
    producers: dict[str, Producer],
    pids: dict[str, int],
    args: argparse.Namespace,
    body: bytes,
    batch_size: int,
) -> int:
    mode = f"batches of {batch_size}" if batch_size else "single sends"
    print(
        f"{mode}: {args.size} B bodies, {args.concurrency} senders, {args.rounds} x {args.round_s:g} s per side"
    )
    rates: dict[str, list[float]] = {name: [] for name in producers}
    cpu_us: dict[str, dict[str, list[float]]] = {name: {"benchmark": [], "server": []} for name in producers}
    errors = 0
    for number in range(1, args.rounds + 1):
        # Alternate which side goes first, so a load that drifts within a round hits both alike.
        order = list(producers.items())
        for name, producer in order if number % 2 else reversed(order):
            messages, seconds, failed, client_s, server_s = await _round(
                producer, args, body, batch_size, pids[name]
            )
            rates[name].append(messages / seconds)
            errors += failed
            cpu = ""
            if messages:
                cpu_us[name]["benchmark"].append(client_s / messages * 1e6)
                cpu = f"; CPU per message: benchmark {client_s / messages * 1e6:,.1f} us"
                if server_s is not None:
                    cpu_us[name]["server"].append(server_s / messages * 1e6)
                    cpu += f", server {server_s / messages * 1e6:,.1f} us"
            print(
                f"  round {number} ACL {name:>3}: {messages / seconds:>10,.0f} msg/s ({failed} errors{cpu})",
                flush=True,
            )
    rate = {name: statistics.median(values) for name, values in rates.items()}
    ratio = rate["on"] / rate["off"] if rate["off"] else 0.0
    verdict = "meets" if ratio >= TARGET_RATIO else "misses"
    print(f"  summary, {mode} (median round):")
    print(f"    ACL off: {rate['off']:>10,.0f} msg/s")
    print(f"    ACL on:  {rate['on']:>10,.0f} msg/s (signature and topic permission checked per request)")
    print(f"    ratio on/off: {ratio:.3f} ({verdict} the target >= {TARGET_RATIO:.2f})")
    for name in producers:
        spent = {part: statistics.median(values) for part, values in cpu_us[name].items() if values}
        if spent:
            text = ", ".join(f"{part} {value:,.1f} us" for part, value in spent.items())
            print(
                f"    CPU per message, ACL {name} (median round): {text} (total {sum(spent.values()):,.1f} us)"
            )
    sys.stdout.flush()
    return errors


def run(args: argparse.Namespace) -> int:
    """Start both servers, run the rounds, print the comparison; returns the exit status."""
    with tempfile.TemporaryDirectory(prefix="orbitmq-acl-bench-") as workdir:
        off_dir, on_dir = Path(workdir) / "off", Path(workdir) / "on"
        accounts = on_dir / "data" / "conf" / "plain_acl.yml"
        accounts.parent.mkdir(parents=True)
        accounts.write_text(_ACCOUNTS)
        confs = {}
        for name, directory in (("off", off_dir), ("on", on_dir)):
            # The same file on both sides but for aclEnable, so ACL is the only difference.
            confs[name] = directory / "broker.conf"
            directory.mkdir(parents=True, exist_ok=True)
            confs[name].write_text(
                f"aclEnable={'true' if name == 'on' else 'false'}\nbindAddress=127.0.0.1\n"
            )
        off = start_standalone(off_dir, "-c", str(confs["off"]))
        try:
            on = start_standalone(on_dir, "-c", str(confs["on"]))
            try:
                servers = {
                    "off": (f"127.0.0.1:{off[1]}", off[0].pid),
                    "on": (f"127.0.0.1:{on[1]}", on[0].pid),
                }
                with asyncio.Runner(loop_factory=new_event_loop) as runner:
                    return runner.run(_bench(servers, args))
            finally:
                on[0].terminate()
                on[0].wait(30)
        finally:
            off[0].terminate()
            off[0].wait(30)
