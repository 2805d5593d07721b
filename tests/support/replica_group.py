"""A replicated broker group as real processes: one nameserver, a master (brokerId 0), slaves.

Every broker gets fixed ports chosen free at start (its listenPort and haListenPort), so a
restarted master or slave comes back where its peers and clients expect it. Intervals are
shortened through documented keys (registration 1 s, HA keep-alive 500 ms, reconnect 300 ms,
metadata copy 1 s) and segments are small, so the tests see several files. The caller kills
every process (``ReplicaGroup.kill_all``) in a ``finally``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, free_port, start_broker, start_namesrv

GROUP_CONF: dict[str, object] = {
    "registerNameServerPeriod": 1000,
    "haSendHeartbeatInterval": 500,
    "haHousekeepingInterval": 5000,
    "haReconnectInterval": 300,
    "slaveSyncInterval": 1000,
    "mapedFileSizeCommitLog": 4 * 1024 * 1024,
}


@dataclass
class ReplicaGroup:
    tmp_path: Path
    namesrv: ServerProcess
    master: ServerProcess
    slaves: list[ServerProcess] = field(default_factory=list)
    conf: dict[str, object] = field(default_factory=dict)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    def store_dir(self, proc: ServerProcess) -> Path:
        return proc.workdir / "store"

    def add_slave(self, broker_id: int, **conf: object) -> ServerProcess:
        """Start slave ``broker_id`` in its own directory (``slave-<id>``)."""
        slave = start_broker(
            self.tmp_path / f"slave-{broker_id}",
            self.namesrv.addr,
            name="broker-a",
            brokerRole="SLAVE",
            brokerId=broker_id,
            haListenPort=free_port(),
            **{**self.conf, **conf},
        )
        self.slaves.append(slave)
        return slave

    def kill_all(self) -> None:
        for proc in [*self.slaves, self.master, self.namesrv]:
            proc.kill()


def start_replica_group(
    tmp_path: Path, role: str = "SYNC_MASTER", slaves: int = 1, **conf: object
) -> ReplicaGroup:
    """A nameserver, master ``broker-a`` with ``role`` and ``slaves`` slaves (ids 1..n), all started."""
    merged = {**GROUP_CONF, **conf}
    namesrv = start_namesrv(tmp_path)
    group = ReplicaGroup(tmp_path, namesrv, namesrv, conf=merged)
    try:
        group.master = start_broker(
            tmp_path / "master",
            namesrv.addr,
            name="broker-a",
            brokerRole=role,
            haListenPort=free_port(),
            **merged,
        )
        for broker_id in range(1, slaves + 1):
            group.add_slave(broker_id)
    except BaseException:
        group.kill_all()
        raise
    return group


async def fetch_ha_status(addr: str) -> dict[str, Any]:
    """GET_BROKER_HA_STATUS of one broker (from a coroutine)."""
    client = RemotingClient()
    try:
        request = RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS, {})
        response = await client.invoke(addr, request, 5000)
    finally:
        await client.close()
    assert response.code == ResponseCode.SUCCESS, response.remark
    status: dict[str, Any] = orjson.loads(response.body)
    return status


def ha_status(addr: str) -> dict[str, Any]:
    """GET_BROKER_HA_STATUS of one broker (from plain code)."""
    return asyncio.run(fetch_ha_status(addr))


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def slave_max_offset(slave: ServerProcess) -> int:
    return int(ha_status(slave.addr)["haClientRuntimeInfo"]["maxOffset"])


def wait_caught_up(master: ServerProcess, slave: ServerProcess, timeout_s: float = 20.0) -> int:
    """Until the slave's max offset equals the master's; returns it."""
    reached: list[int] = []

    def caught_up() -> bool:
        master_max = int(ha_status(master.addr)["masterCommitLogMaxOffset"])
        reached[:] = [master_max]
        return slave_max_offset(slave) == master_max

    wait_for(caught_up, timeout_s, f"slave {slave.addr} to reach the master's max offset")
    return reached[0]


def commit_log_bytes(store_dir: Path, start: int, end: int) -> bytes:
    """The CommitLog bytes in [start, end) read from a store directory's segment files."""
    segments = sorted(
        (int(path.name), path) for path in (store_dir / "commitlog").iterdir() if path.name.isdigit()
    )
    chunks = []
    for segment_start, path in segments:
        data = path.read_bytes()
        low, high = max(start, segment_start), min(end, segment_start + len(data))
        if low < high:
            chunks.append(data[low - segment_start : high - segment_start])
    return b"".join(chunks)


def verify_store(store_dir: Path) -> str:
    """Run the offline verifier on a closed store; returns its output (raises when it fails)."""
    done = subprocess.run(
        [sys.executable, "-m", "orbitmq.store.verify", str(store_dir)], capture_output=True, timeout=120
    )
    output = done.stdout.decode() + done.stderr.decode()
    if done.returncode != 0:
        raise AssertionError(f"store verifier failed on {store_dir}:\n{output[-3000:]}")
    return output
