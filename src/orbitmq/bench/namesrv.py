"""The control plane at scale, by simulation: one name server, many simulated brokers, route QPS.

One ``orbitmq namesrv`` process (free port, temporary directory) is fed REGISTER_BROKER frames
built with :mod:`orbitmq.protocol`'s encoders, one TCP connection per simulated broker member
(the name server forgets a broker whose connection closes, so every connection stays open to
the end): ``--groups`` broker groups of ``--members`` (a master, id 0, and slaves), each group
hosting ``--topics-per-group`` topics, each topic hosted by ``--groups-per-topic`` groups (so a
route names several brokers, as a spread topic's does). Bodies are JSON, as a broker sends them
below 4 MiB; ``--compressed`` sends RocketMQ's compressed layout (``compressedRegister=true``).

Measured, in this order:

1. the first registration round: every member registers at once (wall time, until the last
   answer);
2. a re-registration round with unchanged data versions (what every broker sends every 30 s);
3. a round where every master bumps its data version (the name server rebuilds its queue data);
4. GET_ROUTEINFO_BY_TOPIC from ``--client-procs`` client processes, ``--connections`` each,
   ``--pipeline`` requests in flight per connection, for ``--duration-s`` seconds over every
   topic in turn. The clients send pre-encoded frames (JSON headers, as RocketMQ's Java and C++
   clients do) and read answers by their length prefix, checking each answer's code, so the
   client side costs little per query and the name server is what is measured.

Printed: each round's time, the name server's RSS before and after, queries/s, the name
server's CPU seconds per query (``/proc/<pid>/stat``) and what that makes one core's worth of
queries, with the target (>= 20,000 route queries/s on one core of this machine) and a verdict.
The verdict is on queries per name-server CPU second: on a shared 2-core machine the clients
take a core too, so the wall-clock rate reads low whenever the name server waits for them.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from threading import Barrier

from orbitmq.bench._report import verdict
from orbitmq.bench._servers import _free_ports
from orbitmq.model.route import DataVersion, TopicConfig
from orbitmq.protocol.bodies import (
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    encode_register_broker_body,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.headers import GetRouteInfoRequestHeader, RegisterBrokerRequestHeader

__all__ = ["add_arguments", "run"]

TARGET_QPS = 20_000
CLUSTER = "SimCluster"
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_SUCCESS_PREFIX = b'{"code":%d,' % ResponseCode.SUCCESS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--groups", type=int, default=200, help="simulated broker groups")
    parser.add_argument("--members", type=int, default=2, help="members per group (a master and slaves)")
    parser.add_argument("--topics-per-group", type=int, default=1000, help="topics each group hosts")
    parser.add_argument("--groups-per-topic", type=int, default=4, help="groups hosting each topic")
    parser.add_argument("--queues", type=int, default=8, help="read and write queues per topic")
    parser.add_argument("--compressed", action="store_true", help="send the compressed registration body")
    parser.add_argument("--client-procs", type=int, default=4, help="client processes for route queries")
    parser.add_argument("--connections", type=int, default=16, help="connections per client process")
    parser.add_argument("--pipeline", type=int, default=8, help="queries in flight per connection")
    parser.add_argument("--duration-s", type=float, default=10.0, help="seconds of route queries")
    parser.add_argument(
        "--quick", action="store_true", help="tiny counts (4 groups x 20 topics, 2 s of queries): a smoke run"
    )


# -- the name server process ---------------------------------------------------------------------


def _start_namesrv(workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    (port,) = _free_ports(1)
    conf = workdir / "namesrv.conf"
    conf.write_text(f"kvConfigPath={workdir / 'kvConfig.json'}\n")
    cmd = [
        sys.executable, "-m", "orbitmq.namesrv", "-c", str(conf),
        "--listen-port", str(port), "--bind-address", "127.0.0.1", "--log-level", "WARNING",
    ]  # fmt: skip
    log = open(workdir / "namesrv.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, cwd=workdir)
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    proc.wait(10)
    raise RuntimeError("the name server did not start within 30 s")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- simulated brokers ---------------------------------------------------------------------------


def _topic_names(args: argparse.Namespace) -> list[str]:
    count = max(1, args.groups * args.topics_per_group // max(1, args.groups_per_topic))
    return [f"SimTopic_{index:06d}" for index in range(count)]


def _group_topics(args: argparse.Namespace, group: int, names: list[str]) -> list[str]:
    """Group ``group``'s topics: a window of the topic list, so each topic lands on
    ``--groups-per-topic`` neighbouring groups."""
    start = group * args.topics_per_group // max(1, args.groups_per_topic)
    return [names[(start + offset) % len(names)] for offset in range(args.topics_per_group)]


def _register_frames(args: argparse.Namespace, names: list[str], version: int) -> list[bytes]:
    """One REGISTER_BROKER frame per simulated member, its topics stamped with ``version``."""
    frames = []
    for group in range(args.groups):
        table = {
            name: TopicConfig(topic_name=name, read_queue_nums=args.queues, write_queue_nums=args.queues)
            for name in _group_topics(args, group, names)
        }
        wrapper = TopicConfigSerializeWrapper(
            table, DataVersion(timestamp=1_700_000_000_000 + version, counter=version)
        )
        body = encode_register_broker_body(RegisterBrokerBody(wrapper), compressed=args.compressed)
        for member in range(args.members):
            header = RegisterBrokerRequestHeader(
                broker_name=f"sim-broker-{group:04d}",
                broker_addr=_member_addr(group, member, args.members),
                cluster_name=CLUSTER,
                broker_id=member,
                ha_server_addr=f"10.0.{group // 250}.{group % 250}:{10912 + member}",
                compressed=args.compressed,
                body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
            )
            frames.append(
                RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext(), body).encode()
            )
    return frames


def _member_addr(group: int, member: int, members: int) -> str:
    # Addresses nobody listens on: the name server only stores and hands them out.
    index = group * members + member
    return f"10.{1 + index // 62500}.{index // 250 % 250}.{index % 250}:10911"


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    length = int.from_bytes(await reader.readexactly(4), "big")
    return await reader.readexactly(length)


async def _register_round(
    streams: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]], frames: list[bytes]
) -> float:
    """Every member registers at once; seconds until the last answer. Raises on a refusal."""

    async def one(stream: tuple[asyncio.StreamReader, asyncio.StreamWriter], frame: bytes) -> None:
        reader, writer = stream
        writer.write(frame)
        answer = decode_command(await _read_frame(reader))
        if answer.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"REGISTER_BROKER answered {answer.code}: {answer.remark}")

    started = time.perf_counter()
    await asyncio.gather(*(one(stream, frame) for stream, frame in zip(streams, frames, strict=True)))
    return time.perf_counter() - started


# -- route query clients (separate processes) ----------------------------------------------------


def _query_frames(names: list[str]) -> list[bytes]:
    return [
        RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(name).to_ext()
        ).encode()
        for name in names
    ]


async def _query_connection(
    stream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    frames: list[bytes],
    first: int,
    pipeline: int,
    stop_at: float,
) -> tuple[int, int]:
    """Queries on one connection until ``stop_at`` (wall clock): (answers before then, errors)."""
    reader, writer = stream
    count = len(frames)
    next_index = first
    answered = errors = 0
    buffer = bytearray()
    try:
        writer.write(b"".join(frames[(next_index + i) % count] for i in range(pipeline)))
        next_index += pipeline
        in_flight = pipeline
        while in_flight:
            chunk = await reader.read(1 << 20)
            if not chunk:
                raise RuntimeError("the name server closed a query connection")
            buffer += chunk
            done = 0
            position = 0
            while len(buffer) - position >= 4:
                length = int.from_bytes(buffer[position : position + 4], "big")
                if len(buffer) - position - 4 < length:
                    break
                if not buffer.startswith(_SUCCESS_PREFIX, position + 8):
                    errors += 1
                position += 4 + length
                done += 1
            del buffer[:position]
            in_flight -= done
            now = time.time()
            if now <= stop_at:
                answered += done
            if now < stop_at and done:
                writer.write(b"".join(frames[(next_index + i) % count] for i in range(done)))
                next_index += done
                in_flight += done
    finally:
        writer.close()
    return answered, errors


def _query_process(
    port: int,
    names: list[str],
    proc_index: int,
    args: tuple[int, int, float],
    ready: Barrier,
    out: multiprocessing.Queue[tuple[int, int]],
) -> None:
    """One client process: encode every query, connect, wait for the others, query."""
    connections, pipeline, duration_s = args
    frames = _query_frames(names)

    async def main() -> list[tuple[int, int]]:
        streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(connections)]
        await asyncio.to_thread(ready.wait, 120)
        stop_at = time.time() + duration_s
        spread = len(frames) // max(1, connections)
        return await asyncio.gather(
            *(
                _query_connection(
                    stream, frames, (proc_index * 7919 + index * spread) % len(frames), pipeline, stop_at
                )
                for index, stream in enumerate(streams)
            )
        )

    results = asyncio.run(main())
    out.put((sum(r[0] for r in results), sum(r[1] for r in results)))


# -- the run -------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by ``args``; returns the exit status."""
    if args.quick:
        args.groups, args.topics_per_group, args.duration_s = 4, 20, 2.0
        args.client_procs, args.connections = min(args.client_procs, 2), min(args.connections, 4)
    names = _topic_names(args)
    members = args.groups * args.members
    print(
        f"simulating {args.groups} broker groups x {args.members} members x {args.topics_per_group:,} topics "
        f"({len(names):,} distinct topics, each on {args.groups_per_topic} groups, {args.queues} queues; "
        f"{'compressed' if args.compressed else 'JSON'} registration bodies)",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="orbitmq-namesrv-bench-") as workdir:
        proc, port = _start_namesrv(Path(workdir))
        try:
            return asyncio.run(_measure(args, proc.pid, port, names, members))
        finally:
            proc.terminate()
            proc.wait(30)


async def _measure(args: argparse.Namespace, pid: int, port: int, names: list[str], members: int) -> int:
    rss_empty = _rss_mib(pid)
    first_frames = _register_frames(args, names, 1)
    print(f"registration body {len(first_frames[0]) / 1024:,.0f} KiB per member", flush=True)
    streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(members)]
    try:
        cpu_before = _cpu_s(pid)
        first_s = await _register_round(streams, first_frames)
        first_cpu = _cpu_s(pid) - cpu_before
        print(
            f"first registration round     {first_s:7.2f} s  ({members} members, name server CPU {first_cpu:.2f} s)"
        )
        cpu_before = _cpu_s(pid)
        same_s = await _register_round(streams, first_frames)
        same_cpu = _cpu_s(pid) - cpu_before
        print(f"re-registration, unchanged   {same_s:7.2f} s  (name server CPU {same_cpu:.2f} s)")
        bumped_frames = _register_frames(args, names, 2)
        cpu_before = _cpu_s(pid)
        bumped_s = await _register_round(streams, bumped_frames)
        bumped_cpu = _cpu_s(pid) - cpu_before
        print(f"re-registration, new version {bumped_s:7.2f} s  (name server CPU {bumped_cpu:.2f} s)")
        rss_loaded = _rss_mib(pid)
        print(f"name server RSS {rss_empty:.0f} MiB empty, {rss_loaded:.0f} MiB with every route", flush=True)
        return _query_phase(args, pid, port, names)
    finally:
        for _, writer in streams:
            writer.close()


def _query_phase(args: argparse.Namespace, pid: int, port: int, names: list[str]) -> int:
    context = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[tuple[int, int]] = context.Queue()
    # The processes start, encode their queries and connect first; then all query at once.
    ready = context.Barrier(args.client_procs + 1)
    workers = [
        context.Process(
            target=_query_process,
            args=(port, names, index, (args.connections, args.pipeline, args.duration_s), ready, out),
        )
        for index in range(args.client_procs)
    ]
    for worker in workers:
        worker.start()
    ready.wait(120)
    cpu_before, wall_before = _cpu_s(pid), time.perf_counter()
    time.sleep(args.duration_s)
    cpu_s, wall_s = _cpu_s(pid) - cpu_before, time.perf_counter() - wall_before
    results = [out.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(30)
    answered = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    qps = answered / wall_s
    cpu_per_query = cpu_s / answered if answered else 0.0
    per_core = 1 / cpu_per_query if cpu_per_query else 0.0
    print(
        f"route queries: {answered:,} in {wall_s:.1f} s from {args.client_procs} client processes x "
        f"{args.connections} connections x {args.pipeline} in flight; {errors} answers not SUCCESS"
    )
    print(f"  {qps:,.0f} queries/s; name server busy {cpu_s / wall_s:.0%} of one core")
    print(f"  name server CPU {cpu_per_query * 1e6:.1f} us/query = {per_core:,.0f} queries per CPU second")
    print(f"  name server RSS {_rss_mib(pid):.0f} MiB after the queries (encoded routes cached)")
    print(
        f"target >= {TARGET_QPS:,} route queries/s on one core: {per_core:,.0f}/s {verdict(per_core >= TARGET_QPS)}"
    )
    return 1 if errors or not answered else 0
