"""``orbitmq cluster``: a local cluster in one command, for demos, tests and multi-core hosts.

One nameserver and ``--masters`` broker groups (``broker-a``, ``broker-b``, ...) of one master
and ``--slaves`` slaves each, every one its own process, on consecutive ports from
``--base-port`` (each broker takes two: its listenPort and its HA port, listenPort + 1), with
everything under one data directory::

    <data-dir>/namesrv.log
    <data-dir>/broker-a/0/broker.conf    the master's RocketMQ broker.conf (written here)
    <data-dir>/broker-a/0/broker.log
    <data-dir>/broker-a/0/store/         its CommitLog, ConsumeQueues, index, config
    <data-dir>/broker-a/1/...            its first slave (brokerId 1)

Masters start first; slaves start once the nameserver lists their master, so that their first
registration already names it. A broker that exits (killed, to try a failover) is reported and
the rest keep running; Ctrl-C (or SIGTERM) stops them all gracefully. ``--broker-conf KEY=VALUE``
adds a broker.conf line to every broker.

``--brokers N`` is the multi-core layout (docs/scaling.md): N independent ASYNC_MASTER brokers
without slaves, each a process of its own with its own store, sharing nothing but the
nameserver; one broker process uses about one core, so N brokers use N. ``--topic NAME``
(repeatable) creates a topic with ``--queues`` queues on every broker once they have all
registered, so clients spread a topic's sends and its consumer group's queues over all of them.

Like ``orbitmq standalone``, every process listens on 127.0.0.1 (the HA ports included) unless
``--bind-address`` says otherwise: no server authenticates anyone, so every interface is opt-in.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import string
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.status import Status

from orbitmq.errors import StoreLockedError
from orbitmq.store.dir_lock import lock_store_dir

__all__ = ["main"]

_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 20.0
_WILDCARD_ADDRESSES = ("0.0.0.0", "", "::")


@dataclass
class _Member:
    label: str
    role: str
    port: int
    ha_port: int | None
    workdir: Path
    args: list[str]
    proc: subprocess.Popen[bytes] | None = None
    reported: bool = False

    @property
    def log_path(self) -> Path:
        return self.workdir / ("namesrv.log" if self.ha_port is None else "broker.log")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orbitmq cluster",
        description="Run a nameserver and broker groups (a master and slaves each), or N independent "
        "brokers (--brokers N: one per core, docs/scaling.md), as local processes.",
    )
    parser.add_argument("--masters", type=int, default=None, help="broker groups (1)")
    parser.add_argument("--slaves", type=int, default=None, help="slaves per group (1)")
    parser.add_argument(
        "--brokers",
        type=int,
        default=None,
        help="N independent brokers (ASYNC_MASTER, no slave), one process each: one per core "
        "(instead of --masters/--slaves)",
    )
    parser.add_argument(
        "--role", choices=("sync", "async"), default=None, help="SYNC_MASTER or ASYNC_MASTER (sync)"
    )
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME",
        help="a topic to create on every master once they are up (repeatable)",
    )
    parser.add_argument("--queues", type=int, default=8, help="queues of each --topic on each broker (8)")
    parser.add_argument("--data-dir", default=".orbitmq-cluster", help="data directory (./.orbitmq-cluster)")
    parser.add_argument("--namesrv-port", type=int, default=9876, help="nameserver port (9876)")
    parser.add_argument("--base-port", type=int, default=10911, help="first broker port (10911)")
    parser.add_argument(
        "--bind-address",
        default="127.0.0.1",
        help="interface every process listens on (127.0.0.1: this host only; 0.0.0.0: every "
        "interface, without authentication)",
    )
    parser.add_argument(
        "--broker-ip", help="address clients and slaves use (the bind address; bound to 0.0.0.0, 127.0.0.1)"
    )
    parser.add_argument(
        "--broker-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker.conf line for every broker",
    )
    return parser


def _broker_name(index: int) -> str:
    letters = string.ascii_lowercase
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = letters[rest] + name
    return f"broker-{name}"


def _local_host(args: argparse.Namespace) -> str:
    """Where this command reaches its own processes: the bind address, or loopback for 0.0.0.0."""
    return "127.0.0.1" if args.bind_address in _WILDCARD_ADDRESSES else str(args.bind_address)


def _plan(args: argparse.Namespace) -> tuple[_Member, list[list[_Member]]]:
    data_dir = Path(args.data_dir).resolve()
    namesrv_addr = f"{_local_host(args)}:{args.namesrv_port}"
    namesrv = _Member(
        "namesrv",
        "NAMESRV",
        args.namesrv_port,
        None,
        data_dir,
        [sys.executable, "-m", "orbitmq.namesrv", "--listen-port", str(args.namesrv_port),
         "--bind-address", args.bind_address],
    )  # fmt: skip
    extra = dict(item.split("=", 1) for item in args.broker_conf)
    groups: list[list[_Member]] = []
    port = args.base_port
    for group_index in range(args.masters):
        name = _broker_name(group_index)
        members = []
        for broker_id in range(args.slaves + 1):
            role = "SLAVE" if broker_id else ("SYNC_MASTER" if args.role == "sync" else "ASYNC_MASTER")
            workdir = data_dir / name / str(broker_id)
            conf = {
                "brokerClusterName": "DefaultCluster",
                "brokerName": name,
                "brokerId": broker_id,
                "brokerRole": role,
                "namesrvAddr": namesrv_addr,
                "listenPort": port,
                "haListenPort": port + 1,
                "bindAddress": args.bind_address,
                "brokerIP1": args.broker_ip,
                "storePathRootDir": str(workdir / "store"),
                **extra,
            }
            workdir.mkdir(parents=True, exist_ok=True)
            conf_path = workdir / "broker.conf"
            conf_path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
            label = f"{name} {'master' if broker_id == 0 else f'slave {broker_id}'}"
            command = [sys.executable, "-m", "orbitmq.broker", "-c", str(conf_path)]
            members.append(_Member(label, role, port, port + 1, workdir, command))
            port += 2
        groups.append(members)
    return namesrv, groups


def _resolve_layout(args: argparse.Namespace) -> str | None:
    """Fill --masters, --slaves and --role from --brokers or their defaults; a problem or None."""
    if args.brokers is not None:
        given = [
            flag
            for flag, value in (("--masters", args.masters), ("--slaves", args.slaves))
            if value is not None
        ]
        if given:
            return f"--brokers is a layout of its own: give it without {' and '.join(given)}"
        if args.role == "sync":
            return "--brokers runs brokers without slaves, which a SYNC_MASTER needs: leave out --role sync"
        args.masters, args.slaves, args.role = args.brokers, 0, "async"
        return None
    args.masters = 1 if args.masters is None else args.masters
    args.slaves = 1 if args.slaves is None else args.slaves
    args.role = args.role or "sync"
    return None


def _check_args(args: argparse.Namespace) -> str | None:
    problem = _resolve_layout(args)
    if problem is not None:
        return problem
    if args.brokers is not None and args.brokers < 1:
        return "--brokers must be at least 1"
    if args.queues < 1:
        return "--queues must be at least 1"
    if args.masters < 1 or args.slaves < 0:
        return "--masters must be at least 1 and --slaves at least 0"
    last_port = args.base_port + 2 * args.masters * (args.slaves + 1) - 1
    if not 0 < args.base_port <= last_port <= 65535:
        return f"ports {args.base_port}..{last_port} are not all TCP ports"
    if args.base_port <= args.namesrv_port <= last_port:
        return f"the nameserver port {args.namesrv_port} is inside the brokers' ports {args.base_port}..{last_port}"
    for item in args.broker_conf:
        if "=" not in item or not item.split("=", 1)[0].strip():
            return f"--broker-conf {item!r} is not KEY=VALUE"
    return None


def _start(member: _Member) -> None:
    member.workdir.mkdir(parents=True, exist_ok=True)
    with open(member.log_path, "ab") as log:
        member.proc = subprocess.Popen(
            member.args, stdout=log, stderr=subprocess.STDOUT, cwd=member.workdir, start_new_session=True
        )


def _wait_listening(member: _Member, host: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        if member.proc is not None and member.proc.poll() is not None:
            raise RuntimeError(f"{member.label} exited with {member.proc.returncode}; see {member.log_path}")
        try:
            with socket.create_connection((host, member.port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{member.label} did not listen on port {member.port}; see {member.log_path}")


def _wait_registered(namesrv_addr: str, broker_names: set[str], deadline: float) -> None:
    """Until the nameserver lists a master (id 0) for every name in ``broker_names``."""
    from orbitmq.protocol.bodies import decode_cluster_info
    from orbitmq.protocol.codes import RequestCode, ResponseCode
    from orbitmq.protocol.command import RemotingCommand
    from orbitmq.transport.connection import RemotingClient

    async def poll() -> bool:
        client = RemotingClient()
        try:
            while time.monotonic() < deadline:
                request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {})
                response = await client.invoke(namesrv_addr, request)
                if response.code == ResponseCode.SUCCESS:
                    table = decode_cluster_info(response.body).broker_addr_table
                    if all(name in table and table[name].master_addr for name in broker_names):
                        return True
                await asyncio.sleep(0.1)
        finally:
            await client.close()
        return False

    if not asyncio.run(poll()):
        raise RuntimeError(f"the nameserver did not list the masters of {sorted(broker_names)} in time")


def _create_topics(namesrv_addr: str, topics: list[str], queue_nums: int) -> None:
    """Create each of ``topics`` with ``queue_nums`` queues on every master; waits for the routes."""
    from orbitmq.client.admin import AdminClient
    from orbitmq.errors import OrbitError

    async def create() -> None:
        async with AdminClient(namesrv_addr) as admin:
            for topic in topics:
                await admin.create_topic(topic, queue_nums)

    try:
        asyncio.run(create())
    except OrbitError as exc:
        raise RuntimeError(f"creating the topics {', '.join(topics)}: {exc}") from exc


class _StartProgress:
    """A rich spinner naming the start-up step on a terminal; nothing in a log or a pipe."""

    def __init__(self) -> None:
        console = Console()
        self._status: Status | None = console.status("starting") if console.is_terminal else None
        self._started = time.monotonic()

    def __enter__(self) -> _StartProgress:
        if self._status is not None:
            self._status.start()
        return self

    def step(self, text: str) -> None:
        if self._status is not None:
            self._status.update(f"{text} ({time.monotonic() - self._started:.0f} s)")

    def __exit__(self, *exc_info: object) -> None:
        if self._status is not None:
            self._status.stop()


def _print_table(
    namesrv: _Member,
    groups: list[list[_Member]],
    namesrv_host: str,
    broker_ip: str,
    topics: list[str],
    queue_nums: int,
) -> None:
    rows = [
        (
            "namesrv",
            "NAMESRV",
            f"{namesrv_host}:{namesrv.port}",
            "-",
            str(namesrv.proc.pid if namesrv.proc else "-"),
        )
    ]
    for members in groups:
        for member in members:
            rows.append(
                (
                    member.label,
                    member.role,
                    f"{broker_ip}:{member.port}",
                    f"{broker_ip}:{member.ha_port}",
                    str(member.proc.pid if member.proc else "-"),
                )
            )
    headers = ("process", "role", "address", "ha_address", "pid")
    widths = [max(len(header), *(len(row[i]) for row in rows)) for i, header in enumerate(headers)]
    for row in (headers, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    print(f"data, broker.conf files and logs under {namesrv.workdir}")
    for topic in topics:
        print(f"topic {topic}: {queue_nums} queues on each of {len(groups)} broker(s)")
    print(f"clients: namesrvAddr={namesrv_host}:{namesrv.port}; Ctrl-C stops the cluster", flush=True)


def _stop(members: list[_Member]) -> None:
    """SIGTERM every live member (brokers first), then SIGKILL what is still running."""
    for member in members:
        if member.proc is not None and member.proc.poll() is None:
            member.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    for member in members:
        if member.proc is None:
            continue
        try:
            member.proc.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            member.proc.kill()
            member.proc.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``orbitmq cluster``; returns the exit status."""
    args = build_parser().parse_args(argv)
    problem = _check_args(args)
    if problem is not None:
        print(f"orbitmq cluster: {problem}", file=sys.stderr)
        return 2
    host = _local_host(args)
    if args.broker_ip is None:
        args.broker_ip = host
    try:
        # Before the plan rewrites the broker.conf files of a cluster that may be running here.
        data_lock = lock_store_dir(Path(args.data_dir), "cluster data")
    except StoreLockedError as exc:
        print(f"orbitmq cluster: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(
            f"orbitmq cluster: cannot create the data directory {args.data_dir}: {exc} (pass --data-dir)",
            file=sys.stderr,
        )
        return 2
    try:
        return _run(args, host)
    finally:
        data_lock.release()


def _run(args: argparse.Namespace, host: str) -> int:
    namesrv, groups = _plan(args)
    brokers = [member for members in groups for member in members]
    everyone = [*reversed(brokers), namesrv]  # stop order: slaves, masters, nameserver
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with _StartProgress() as progress:
            deadline = time.monotonic() + _START_TIMEOUT_S
            progress.step("starting the nameserver")
            _start(namesrv)
            _wait_listening(namesrv, host, deadline)
            masters = [members[0] for members in groups]
            progress.step(f"starting {len(masters)} master(s)")
            for member in masters:
                _start(member)
            for member in masters:
                _wait_listening(member, host, deadline)
            progress.step("waiting for the masters' registrations")
            _wait_registered(
                f"{host}:{namesrv.port}", {_broker_name(i) for i in range(len(groups))}, deadline
            )
            slaves = [member for members in groups for member in members[1:]]
            progress.step(f"starting {len(slaves)} slave(s)")
            for member in slaves:
                _start(member)
            for member in slaves:
                _wait_listening(member, host, deadline)
            if args.topic:
                progress.step(f"creating {len(args.topic)} topic(s) on {len(masters)} master(s)")
                _create_topics(f"{host}:{namesrv.port}", args.topic, args.queues)
        _print_table(namesrv, groups, host, args.broker_ip, args.topic, args.queues)
        while not stopping:
            for member in everyone:
                if member.proc is not None and member.proc.poll() is not None and not member.reported:
                    member.reported = True
                    print(
                        f"{member.label} (pid {member.proc.pid}) exited with {member.proc.returncode}",
                        flush=True,
                    )
            if all(member.reported for member in everyone):
                return 1
            time.sleep(0.2)
        print("stopping the cluster", flush=True)
        _stop(everyone[:-1])
        _stop(everyone[-1:])
        started = [member for member in everyone if member.proc is not None]
        print(
            f"stopped {len(started)} processes; data, broker.conf files and logs are kept under "
            f"{namesrv.workdir}",
            flush=True,
        )
        return 0
    except RuntimeError as exc:
        print(f"orbitmq cluster: {exc}", file=sys.stderr)
        return 1
    finally:
        # Brokers first: they unregister from the nameserver as they stop.
        _stop(everyone[:-1])
        _stop(everyone[-1:])
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
