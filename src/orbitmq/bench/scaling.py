"""Throughput against the number of broker processes: how a node uses more than one core.

One OrbitMQ broker process uses about one core (one event loop, one interpreter). A host with
more cores runs several brokers sharing nothing, as ``orbitmq cluster --brokers N`` does
(docs/scaling.md), and clients spread over them: the producer round-robins over every
broker's queues, a consumer group divides all of them. This benchmark measures it: for
N = 1 .. ``--max-brokers`` (or each N of ``--broker-counts``, e.g. 1,2,4,8 on a large host; the
speed-up is then against the smallest) it starts a nameserver and N ASYNC_MASTER brokers
(free ports, a temporary directory each, all stopped at the end), creates one topic per
message size with ``--queues`` queues on each broker, and

- produce: ``--producers`` client processes (default ``--producers-per-broker`` × N), each
  ``--concurrency`` senders of batches of ``--batch-size``, for ``--duration-s`` seconds (or
  ``--count`` messages in all), at each ``--sizes``;
- consume: ``--consumers`` processes of one consumer group catch up on each topic's backlog
  (what the produce phase left), from the first offset, until every queue is read to its end.

Each row gives msgs/s, MB/s (bodies), the brokers' CPU seconds over the window (from
/proc/<pid>/stat), each broker's CPU utilisation, the brokers' and the clients' CPU
microseconds per message, the cores the host spent on other work meanwhile (/proc/stat busy
time minus this benchmark's: on a shared machine the rates depend on it, the CPU per message
much less) and the speed-up against N = 1 in the same phase. The first Ctrl-C stops the phase under way and
prints the rows measured so far; a second one quits at once (the servers are still stopped).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import multiprocessing.forkserver
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.context import ForkServerContext, ForkServerProcess
from pathlib import Path
from typing import Any

from orbitmq.bench._interrupt import INTERRUPTED_STATUS, stop_on_interrupt
from orbitmq.bench._scaling_clients import (
    ClientResult,
    ConsumeSpec,
    ProduceSpec,
    consume_process,
    produce_process,
)
from orbitmq.client.admin import AdminClient
from orbitmq.model.message import MessageQueue
from orbitmq.transport.runner import new_event_loop

__all__ = ["add_arguments", "run"]

_START_TIMEOUT_S = 60.0
_CLIENT_START_TIMEOUT_S = 60.0
_SETTLE_TIMEOUT_S = 20.0
_COMMIT_LOG_FILE_BYTES = 256 << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-brokers", type=int, default=os.cpu_count() or 1, help="largest N (default: this host's cores)"
    )
    parser.add_argument(
        "--broker-counts",
        default=None,
        help="the values of N, comma-separated, e.g. 1,2,4,8 (default: every N from 1 to --max-brokers)",
    )
    parser.add_argument("--sizes", default="1024,100", help="body sizes in bytes, comma-separated")
    parser.add_argument("--queues", type=int, default=8, help="queues of each topic on each broker")
    parser.add_argument("--duration-s", type=float, default=8.0, help="seconds of each produce phase")
    parser.add_argument(
        "--count", type=int, default=0, help="messages of each produce phase instead of a duration (0: no)"
    )
    parser.add_argument(
        "--producers", type=int, default=0, help="producer processes (0: --producers-per-broker x N)"
    )
    parser.add_argument("--producers-per-broker", type=int, default=2, help="producer processes per broker")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent senders in each producer")
    parser.add_argument("--batch-size", type=int, default=32, help="messages per batch request")
    parser.add_argument(
        "--consumers", type=int, default=0, help="consumer processes (0: as many as producers)"
    )
    parser.add_argument("--pull-batch-size", type=int, default=256, help="consumer pullBatchSize")
    parser.add_argument("--consume-max-s", type=float, default=60.0, help="longest consume phase in seconds")
    parser.add_argument("--no-consume", action="store_true", help="skip the consume phases")
    parser.add_argument(
        "--flush", choices=("sync", "async"), default="async", help="the brokers' flushDiskType"
    )
    parser.add_argument(
        "--keep-data", action="store_true", help="keep the temporary directories (their path is printed)"
    )


@dataclass(frozen=True, slots=True)
class _Window:
    """What the parent saw over a phase: its length, each broker's CPU, the host's busy CPU."""

    seconds: float
    broker_cpu_s: list[float]
    host_busy_s: float


@dataclass(slots=True)
class _Row:
    phase: str
    brokers: int
    clients: int
    messages: int
    elapsed_s: float
    body_bytes: int
    broker_cpu_s: list[float]
    client_cpu_s: float
    window: _Window
    errors: int
    note: str = ""

    @property
    def rate(self) -> float:
        return self.messages / max(self.elapsed_s, 1e-9)


@dataclass(slots=True)
class _Servers:
    """A nameserver and N brokers, each its own process; ``stop`` ends them all."""

    workdir: Path
    namesrv_addr: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    broker_names: list[str] = field(default_factory=list)

    @property
    def brokers(self) -> list[subprocess.Popen[bytes]]:
        return self.procs[1:]

    def start(self, count: int, flush: str) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ports = free_tcp_ports(1 + 2 * count)
        self.namesrv_addr = f"127.0.0.1:{ports[0]}"
        self._spawn(
            [sys.executable, "-m", "orbitmq.namesrv", "--listen-port", str(ports[0]),
             "--bind-address", "127.0.0.1"],
            self.workdir / "namesrv.log",
        )  # fmt: skip
        for index in range(count):
            name = f"broker-{index}"
            home = self.workdir / name
            home.mkdir(parents=True)
            conf = {
                "brokerClusterName": "ScalingCluster",
                "brokerName": name,
                "brokerId": 0,
                "brokerRole": "ASYNC_MASTER",
                "flushDiskType": "SYNC_FLUSH" if flush == "sync" else "ASYNC_FLUSH",
                "namesrvAddr": self.namesrv_addr,
                "listenPort": ports[1 + 2 * index],
                "haListenPort": ports[2 + 2 * index],
                "bindAddress": "127.0.0.1",
                "brokerIP1": "127.0.0.1",
                "storePathRootDir": str(home / "store"),
                "mapedFileSizeCommitLog": _COMMIT_LOG_FILE_BYTES,
            }
            conf_path = home / "broker.conf"
            conf_path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
            self._spawn([sys.executable, "-m", "orbitmq.broker", "-c", str(conf_path)], home / "broker.log")
            self.broker_names.append(name)

    def _spawn(self, command: list[str], log_path: Path) -> None:
        with open(log_path, "ab") as log:
            # A session of its own: Ctrl-C at the terminal reaches the benchmark, which stops it.
            self.procs.append(
                subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            )

    async def wait_registered(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        async with AdminClient(self.namesrv_addr) as admin:
            while time.monotonic() < deadline:
                for proc in self.procs:
                    if proc.poll() is not None:
                        raise RuntimeError(
                            f"a server exited with {proc.returncode}; logs under {self.workdir}"
                        )
                try:
                    table = (await admin.cluster_info()).broker_addr_table
                except OSError:
                    table = {}
                except Exception:  # noqa: BLE001 - the nameserver is still starting
                    table = {}
                if all(name in table and table[name].master_addr for name in self.broker_names):
                    return
                await asyncio.sleep(0.1)
        raise RuntimeError(
            f"the brokers did not register within {_START_TIMEOUT_S:g} s; logs under {self.workdir}"
        )

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def free_tcp_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 a moment ago (all held until all are found)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sockets.append(sock)
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _host_busy_s() -> float:
    """CPU seconds the host's cores have spent busy since boot (not idle, not waiting on I/O)."""
    try:
        ticks = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return 0.0
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (0.0 where /proc is not there)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Run:
    """One invocation: the rows measured so far, and what Ctrl-C sets."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
        # Client processes fork from a fresh server process that has imported the client once.
        self.context: ForkServerContext = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(["orbitmq.bench._scaling_clients"])
        self.stop_event = self.context.Event()
        self.interrupted = False
        self.rows: list[_Row] = []

    def interrupt(self) -> None:
        self.interrupted = True
        self.stop_event.set()

    async def measure(self, brokers: int, workdir: Path) -> None:
        servers = _Servers(workdir)
        try:
            servers.start(brokers, self.args.flush)
            # The fork server imports the client while the brokers start (the first time only).
            multiprocessing.forkserver.ensure_running()
            await servers.wait_registered()
            topics = {}
            async with AdminClient(servers.namesrv_addr) as admin:
                for size in self.sizes:
                    topics[size] = f"Scaling_{size}B_{os.getpid()}"
                    await admin.create_topic(topics[size], self.args.queues)
            for size in self.sizes:
                if self.interrupted:
                    return
                self.rows.append(await self._produce(servers, topics[size], size, brokers))
            for size in self.sizes:
                if self.interrupted or self.args.no_consume:
                    return
                self.rows.append(await self._consume(servers, topics[size], size, brokers))
        finally:
            servers.stop()

    def _clients(self, brokers: int) -> int:
        clients: int = self.args.producers or self.args.producers_per_broker * brokers
        return clients

    async def _produce(self, servers: _Servers, topic: str, size: int, brokers: int) -> _Row:
        args = self.args
        clients = self._clients(brokers)
        quota = [
            args.count // clients + (1 if index < args.count % clients else 0) for index in range(clients)
        ]
        specs = [
            ProduceSpec(
                servers.namesrv_addr,
                topic,
                size,
                args.batch_size,
                args.concurrency,
                args.duration_s if not args.count else 3600.0,
                quota[index],
                args.queues * brokers,
            )
            for index in range(clients)
        ]
        results, window = await self._drive(servers, produce_process, [(spec,) for spec in specs])
        return self._row(f"produce {_size_text(size)}", brokers, results, window)

    async def _consume(self, servers: _Servers, topic: str, size: int, brokers: int) -> _Row:
        args = self.args
        clients = args.consumers or self._clients(brokers)
        async with AdminClient(servers.namesrv_addr) as admin:
            queues = [
                MessageQueue(topic, name, queue_id)
                for name in servers.broker_names
                for queue_id in range(args.queues)
            ]
            targets = [await admin.max_offset(queue) for queue in queues]
        queue_index = {(queue.broker_name, queue.queue_id): slot for slot, queue in enumerate(queues)}
        progress = [self.context.Array("q", len(queues) + 1, lock=False) for _ in range(clients)]
        group = f"CG_SCALING_{size}_{brokers}_{os.getpid()}"
        spec = ConsumeSpec(
            servers.namesrv_addr, topic, group, args.pull_batch_size, queue_index, args.consume_max_s
        )

        def caught_up() -> bool:
            return all(
                max(shares[slot] for shares in progress) >= target for slot, target in enumerate(targets)
            )

        results, window = await self._drive(
            servers,
            consume_process,
            [(spec, shares) for shares in progress],
            until=caught_up,
            settled=lambda: sum(shares[len(queues)] for shares in progress) == len(queues),
        )
        row = self._row(f"consume {_size_text(size)}", brokers, results, window)
        backlog = sum(targets)
        if not caught_up():
            row.note = f"incomplete: the backlog was {backlog:,}"
        elif row.messages > backlog:
            row.note = f"{row.messages - backlog:,} read twice (rebalance)"
        return row

    async def _drive(
        self,
        servers: _Servers,
        target: Any,
        per_process: list[tuple[Any, ...]],
        until: Any = None,
        settled: Any = None,
    ) -> tuple[list[ClientResult], _Window]:
        """Start one process per item, wait until all are ready, measure their window.

        ``until`` ends the window early when true; ``settled`` must be true (a consumer group
        done rebalancing) before the window starts, or ``_SETTLE_TIMEOUT_S`` have passed.
        """
        ctx = self.context
        ready, results, start = ctx.Queue(), ctx.Queue(), ctx.Event()
        procs: list[ForkServerProcess] = [
            ctx.Process(target=target, args=(*item, ready, start, self.stop_event, results), daemon=True)
            for item in per_process
        ]
        collected: list[ClientResult] = []
        try:
            for proc in procs:
                proc.start()
            waiting = len(procs)
            deadline = time.monotonic() + _CLIENT_START_TIMEOUT_S
            while waiting and not self.interrupted:
                waiting -= _drain(ready)
                collected += _drain_results(results)  # a process that failed before it was ready
                if collected:
                    raise RuntimeError(f"a client process failed: {collected[0].first_error}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"client processes not ready within {_CLIENT_START_TIMEOUT_S:g} s")
                await asyncio.sleep(0.05)
            await self._settle(settled)
            cpu_started = [_cpu_s(proc.pid) for proc in servers.brokers]
            host_started, started = _host_busy_s(), time.monotonic()
            start.set()
            while len(collected) < len(procs):
                if until is not None and until():
                    self.stop_event.set()
                collected += _drain_results(results)
                if any(proc.exitcode not in (None, 0) for proc in procs) and len(collected) < len(procs):
                    raise RuntimeError("a client process died; see its output above")
                await asyncio.sleep(0.02)
            window = _Window(
                time.monotonic() - started,
                [
                    _cpu_s(proc.pid) - before
                    for proc, before in zip(servers.brokers, cpu_started, strict=True)
                ],
                _host_busy_s() - host_started,
            )
        finally:
            if not self.interrupted:
                self.stop_event.clear()
            for proc in procs:
                proc.join(10)
                if proc.is_alive():
                    proc.kill()
                    proc.join()
        return collected, window

    async def _settle(self, settled: Any) -> None:
        """Until ``settled()`` has held for a few checks in a row (or the timeout)."""
        if settled is None:
            return
        deadline = time.monotonic() + _SETTLE_TIMEOUT_S
        in_a_row = 0
        while in_a_row < 4 and time.monotonic() < deadline and not self.interrupted:
            in_a_row = in_a_row + 1 if settled() else 0
            await asyncio.sleep(0.05)

    @staticmethod
    def _row(phase: str, brokers: int, results: list[ClientResult], window: _Window) -> _Row:
        measured = [result for result in results if result.ended > 0]
        elapsed_s = (
            max(result.ended for result in measured) - min(result.started for result in measured)
            if measured
            else 0.0
        )
        errors = [result.first_error for result in results if result.first_error]
        return _Row(
            phase,
            brokers,
            len(results),
            sum(result.messages for result in results),
            elapsed_s,
            sum(result.bytes for result in results),
            window.broker_cpu_s,
            sum(result.cpu_s for result in results),
            window,
            sum(result.errors for result in results),
            f"errors, first: {errors[0]}" if errors else "",
        )


def _drain(queue: Any) -> int:
    count = 0
    while not queue.empty():
        queue.get()
        count += 1
    return count


def _drain_results(queue: Any) -> list[ClientResult]:
    items = []
    while not queue.empty():
        items.append(queue.get())
    return items


def _size_text(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def _other_work_cores(row: _Row) -> float:
    """Cores busy with anything but this benchmark's brokers and clients over the window."""
    seconds = max(row.window.seconds, 1e-9)
    return max(row.window.host_busy_s - sum(row.broker_cpu_s) - row.client_cpu_s, 0.0) / seconds


def print_table(rows: list[_Row]) -> None:
    """The rows as an aligned table, each phase's speed-up against its row of the smallest N."""
    baseline: dict[str, float] = {}
    for row in sorted(rows, key=lambda row: row.brokers):  # the smallest N measured: 1 by default
        baseline.setdefault(row.phase, row.rate)
    headers = (
        "phase", "N", "clients", "messages", "msgs/s", "MB/s", "broker CPU s",
        "per-broker CPU %", "broker us/msg", "client us/msg", "other work", "speed-up",
    )  # fmt: skip
    lines = []
    for row in rows:
        elapsed_s = max(row.elapsed_s, 1e-9)
        base = baseline.get(row.phase)
        lines.append(
            (
                row.phase,
                str(row.brokers),
                str(row.clients),
                f"{row.messages:,}",
                f"{row.rate:,.0f}",
                f"{row.body_bytes / elapsed_s / 1e6:.1f}",
                f"{sum(row.broker_cpu_s):.1f}",
                " ".join(f"{100 * cpu / max(row.window.seconds, 1e-9):.0f}" for cpu in row.broker_cpu_s),
                f"{1e6 * sum(row.broker_cpu_s) / max(row.messages, 1):.1f}",
                f"{1e6 * row.client_cpu_s / max(row.messages, 1):.1f}",
                f"{_other_work_cores(row):.1f} cores",
                f"{row.rate / base:.2f}x" if base else "-",
            )
        )
    widths = [max(len(header), *(len(line[i]) for line in lines)) for i, header in enumerate(headers)]
    for line in (headers, *lines):
        print(
            "  ".join(
                cell.rjust(width) if i else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(line, widths, strict=True))
            )
        )
    for row in rows:
        if row.note:
            print(f"  {row.phase} N={row.brokers}: {row.note}")


async def _main(args: argparse.Namespace, counts: list[int], workdir: Path) -> int:
    run = _Run(args)
    undo = stop_on_interrupt(run.interrupt)
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    print(
        f"bench scaling: N = {', '.join(map(str, counts))} brokers on {cores} cores (load average {load:.2f} at start), "
        f"bodies {', '.join(_size_text(size) for size in run.sizes)}, {args.queues} queues per broker, "
        f"batches of {args.batch_size}, {args.concurrency} senders per producer process, "
        f"flush {args.flush}",
        flush=True,
    )
    try:
        for brokers in counts:
            if run.interrupted:
                break
            started = len(run.rows)
            await run.measure(brokers, workdir / f"n{brokers}")
            for row in run.rows[started:]:
                print(
                    f"  N={row.brokers} {row.phase}: {row.rate:,.0f} msgs/s over {row.elapsed_s:.1f} s",
                    flush=True,
                )
    finally:
        undo()
    print()
    print_table(run.rows)
    if run.interrupted:
        return INTERRUPTED_STATUS
    return (
        1
        if any(row.errors or row.note.startswith("incomplete") or not row.messages for row in run.rows)
        else 0
    )


def _positive_list(text: str) -> list[int]:
    """``"1,2,4"`` as [1, 2, 4]; [] when an item is not a positive integer."""
    try:
        values = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        return []
    return values if values and min(values) >= 1 else []


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by ``args``; returns the exit status."""
    if args.max_brokers < 1 or args.queues < 1 or args.batch_size < 1 or args.concurrency < 1:
        print(
            "bench scaling: --max-brokers, --queues, --batch-size and --concurrency must be at least 1",
            file=sys.stderr,
        )
        return 2
    sizes = _positive_list(args.sizes)
    if not sizes:
        print(f"bench scaling: --sizes {args.sizes!r} is not a list of positive byte counts", file=sys.stderr)
        return 2
    counts = (
        sorted(set(_positive_list(args.broker_counts)))
        if args.broker_counts is not None
        else list(range(1, args.max_brokers + 1))
    )
    if not counts:
        print(
            f"bench scaling: --broker-counts {args.broker_counts!r} is not a list of positive numbers",
            file=sys.stderr,
        )
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="orbitmq-scaling-"))
    try:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            return runner.run(_main(args, counts, workdir))
    except (RuntimeError, OSError) as exc:
        print(f"bench scaling: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep_data:
            print(f"data and logs kept under {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
