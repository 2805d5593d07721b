"""Replication cost: produce with no slave, to an ASYNC_MASTER and to a SYNC_MASTER, in one run.

Each setup is a fresh set of processes on free ports in a temporary directory: a nameserver,
the master, and (but for the first) one slave. One OrbitMQ producer with ``--concurrency``
sends in flight (64) sends ``--size`` byte messages for ``--duration-s`` after a warm-up; the
benchmark prints messages/s and the send round trip's p50 / p99 per setup. During the
ASYNC_MASTER run it samples the master's GET_BROKER_HA_STATUS every 100 ms: the slave's lag
in bytes and in milliseconds (age of the oldest message it does not hold yet).

The three setups run one after the other, ``--rounds`` times (interleaved, so a busy moment
of the machine does not land on one setup only); each line is one run, the summary takes each
setup's median. The reference is ASYNC_MASTER measured in the same run; the target is
SYNC_MASTER at 0.7x its throughput or more (group transfer: one acknowledgement serves every
send in flight). The figures are printed, never asserted: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from orbitmq.bench._report import percentiles_text, verdict
from orbitmq.client import SendStatus
from orbitmq.client.admin import AdminClient
from orbitmq.client.producer import Producer
from orbitmq.errors import ClientStateError, OrbitError
from orbitmq.model.message import Message
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.runner import new_event_loop

__all__ = ["add_arguments", "run"]

TARGET_SYNC_RATIO = 0.7
_START_TIMEOUT_S = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--concurrency", type=int, default=64, help="sends in flight (64)")
    parser.add_argument("--size", type=int, default=512, help="body bytes (512)")
    parser.add_argument("--duration-s", type=float, default=10.0, help="measured time per setup (10)")
    parser.add_argument("--warmup-s", type=float, default=2.0, help="unmeasured time per setup (2)")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topic (8)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of the three setups, interleaved; medians reported (3)"
    )


@dataclass
class _Result:
    name: str
    messages: int = 0
    errors: int = 0
    not_ok: int = 0
    elapsed_s: float = 0.0
    rts_ms: list[float] = field(default_factory=list)
    lag_bytes: list[int] = field(default_factory=list)
    lag_ms: list[int] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.messages / self.elapsed_s if self.elapsed_s else 0.0


def _round_trips(result: _Result) -> str:
    return f"send {percentiles_text(sorted(result.rts_ms), (0.5, 0.99), decimals=2)}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"a server exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listened on 127.0.0.1:{port} within {_START_TIMEOUT_S:g} s")


class _Setup:
    """The processes of one measured setup."""

    def __init__(self, workdir: Path, role: str, with_slave: bool) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        namesrv_port = _free_port()
        self.namesrv_addr = f"127.0.0.1:{namesrv_port}"
        self._spawn(
            [sys.executable, "-m", "orbitmq.namesrv", "--listen-port", str(namesrv_port)], namesrv_port
        )
        self.master_addr = self._broker(workdir / "master", role, 0)
        if with_slave:
            self._broker(workdir / "slave", "SLAVE", 1)

    def _spawn(self, cmd: list[str], port: int) -> None:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ)
        )
        self.procs.append(proc)
        _wait_port(port, proc)

    def _broker(self, directory: Path, role: str, broker_id: int) -> str:
        port = _free_port()
        directory.mkdir(parents=True)
        conf = {
            "brokerName": "broker-bench",
            "brokerId": broker_id,
            "brokerRole": role,
            "namesrvAddr": self.namesrv_addr,
            "listenPort": port,
            "haListenPort": _free_port(),
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": directory / "store",
            "registerNameServerPeriod": 1000,
        }
        conf_path = directory / "broker.conf"
        conf_path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
        self._spawn(
            [sys.executable, "-m", "orbitmq.broker", "-c", str(conf_path), "--log-level", "WARNING"], port
        )
        return f"127.0.0.1:{port}"

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def _ha_status(client: RemotingClient, addr: str) -> dict[str, object]:
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS, {}), 3000)
    if response.code != ResponseCode.SUCCESS:
        return {}
    status: dict[str, object] = orjson.loads(response.body)
    return status


async def _wait_ready(setup: _Setup, with_slave: bool, topic: str, queues: int) -> None:
    async with AdminClient(setup.namesrv_addr) as admin:
        for _ in range(300):
            if (await admin.cluster_info()).broker_addr_table:
                break
            await asyncio.sleep(0.05)
        await admin.create_topic(topic, queues)
    client = RemotingClient()
    try:
        for _ in range(300):
            status = await _ha_status(client, setup.master_addr)
            if not with_slave or status.get("inSyncSlaveNums"):
                return
            await asyncio.sleep(0.05)
    finally:
        await client.close()
    raise RuntimeError("the slave did not connect to its master")


async def _measure(setup: _Setup, result: _Result, args: argparse.Namespace, sample_lag: bool) -> None:
    topic = f"ReplicationBench_{os.getpid()}"
    await _wait_ready(setup, result.name != "no slave", topic, args.queues)
    body = os.urandom(args.size // 2 + 1).hex().encode()[: args.size]
    recording = False
    stop = asyncio.Event()

    async def sender(producer: Producer) -> None:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                sent = await producer.send(Message(topic, body))
            except ClientStateError:
                break  # shut down under it (Ctrl-C): sending again would fail at once, forever
            except OrbitError:
                result.errors += 1
                await asyncio.sleep(0)  # a failure without I/O must not starve the loop
                continue
            if recording:
                result.rts_ms.append((time.perf_counter() - started) * 1000)
                result.messages += 1
                result.not_ok += sent.status is not SendStatus.OK

    async def sample(client: RemotingClient) -> None:
        while not stop.is_set():
            status = await _ha_status(client, setup.master_addr)
            for connection in status.get("haConnectionInfo") or []:  # type: ignore[attr-defined]
                result.lag_bytes.append(int(connection["diff"]))
                if int(connection["lagMs"]) >= 0:
                    result.lag_ms.append(int(connection["lagMs"]))
            await asyncio.sleep(0.1)

    client = RemotingClient()
    async with Producer(
        "PG_REPLICATION_BENCH", setup.namesrv_addr, instance_name=f"bench-{os.getpid()}"
    ) as producer:
        senders = [asyncio.create_task(sender(producer)) for _ in range(args.concurrency)]
        await asyncio.sleep(args.warmup_s)
        recording = True
        sampler = asyncio.create_task(sample(client)) if sample_lag else None
        started = time.perf_counter()
        await asyncio.sleep(args.duration_s)
        recording = False
        result.elapsed_s = time.perf_counter() - started
        stop.set()
        await asyncio.gather(*senders, *([sampler] if sampler else []))
    await client.close()


def _run_setup(name: str, role: str, with_slave: bool, args: argparse.Namespace) -> _Result:
    result = _Result(name)
    with tempfile.TemporaryDirectory(prefix="orbitmq-replication-") as workdir:
        setup = _Setup(Path(workdir), role, with_slave)
        try:
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                runner.run(_measure(setup, result, args, sample_lag=role == "ASYNC_MASTER" and with_slave))
        finally:
            setup.stop()
    print(
        f"{name:<14} {result.rate:>10,.0f} msg/s | {_round_trips(result)} | not SEND_OK {result.not_ok}"
        f" | errors {result.errors}",
        flush=True,
    )
    return result


def _median(results: list[_Result]) -> _Result:
    return sorted(results, key=lambda result: result.rate)[len(results) // 2]


def run(args: argparse.Namespace) -> int:
    """Run the three setups ``--rounds`` times; returns 1 when a send failed."""
    print(
        f"replication: {args.concurrency} sends in flight, {args.size} B bodies, {args.duration_s:g} s per setup "
        f"after {args.warmup_s:g} s warm-up, {args.rounds} round(s); nameserver, master and slave processes "
        "on this machine"
    )
    runs: dict[str, list[_Result]] = {"no slave": [], "ASYNC_MASTER": [], "SYNC_MASTER": []}
    for _ in range(max(args.rounds, 1)):
        runs["no slave"].append(_run_setup("no slave", "ASYNC_MASTER", False, args))
        runs["ASYNC_MASTER"].append(_run_setup("ASYNC_MASTER", "ASYNC_MASTER", True, args))
        runs["SYNC_MASTER"].append(_run_setup("SYNC_MASTER", "SYNC_MASTER", True, args))
    no_slave, async_master, sync_master = (_median(results) for results in runs.values())
    print("medians:")
    for result in (no_slave, async_master, sync_master):
        print(f"  {result.name:<14} {result.rate:>10,.0f} msg/s | {_round_trips(result)}")
    lag_bytes = [value for result in runs["ASYNC_MASTER"] for value in result.lag_bytes]
    lag_ms = [value for result in runs["ASYNC_MASTER"] for value in result.lag_ms]
    if lag_bytes:
        print(
            f"ASYNC_MASTER replication lag under load: bytes {percentiles_text(sorted(lag_bytes), (0.5, 0.99), 'B', 0)}"
            f" max {max(lag_bytes):,} B | {percentiles_text(sorted(lag_ms), (0.5, 0.99), decimals=0)}"
            f" max {max(lag_ms, default=0)} ms"
        )
    ratio = sync_master.rate / async_master.rate if async_master.rate else 0.0
    print(
        f"SYNC_MASTER / ASYNC_MASTER throughput: {ratio:.2f} (target >= {TARGET_SYNC_RATIO}: "
        f"{verdict(ratio >= TARGET_SYNC_RATIO)}); "
        f"ASYNC_MASTER / no slave: {async_master.rate / no_slave.rate if no_slave.rate else 0:.2f}"
    )
    failed = sum(result.errors for results in runs.values() for result in results)
    failed += sum(result.not_ok for result in runs["SYNC_MASTER"])
    return 1 if failed else 0
