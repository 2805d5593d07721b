"""Three `orbitmq controller` processes on 127.0.0.1 (a quorum), and a client for their requests.

Each controller gets a free remoting port and a free Raft port; all share one
``controllerDLegerPeers``. Timings are shortened for tests through documented keys (Raft
election timeout 300-900 ms, election scan every 200 ms). The caller kills every process.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, free_port, write_conf

CONTROLLER_CONF: dict[str, object] = {
    "scanNotActiveBrokerInterval": 200,
    "raftElectionTimeoutMinMills": 300,
    "raftElectionTimeoutMaxMills": 900,
}


def start_controllers(tmp_path: Path, count: int = 3, **conf: object) -> list[ServerProcess]:
    raft_ports = [free_port() for _ in range(count)]
    peers = ";".join(f"n{index}-127.0.0.1:{port}" for index, port in enumerate(raft_ports))
    procs = []
    for index in range(count):
        name = f"controller-{index}"
        workdir = tmp_path / name
        workdir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        values = {
            "listenPort": port,
            "bindAddress": "127.0.0.1",
            "controllerDLegerPeers": peers,
            "controllerDLegerSelfId": f"n{index}",
            "controllerStorePath": str(workdir / "store"),
            **CONTROLLER_CONF,
            **conf,
        }
        conf_path = write_conf(workdir / "controller.conf", values)
        args = [sys.executable, "-m", "orbitmq.controller", "-c", str(conf_path)]
        procs.append(ServerProcess(name, args, port, workdir, tmp_path / f"{name}.log"))
    try:
        for proc in procs:
            proc.start()
    except BaseException:
        for proc in procs:
            proc.kill()
        raise
    return procs


async def call(addr: str, code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(addr, RemotingCommand.request(code, ext or {}, body), 3000)
    finally:
        await client.close()


def metadata(addr: str) -> dict[str, Any] | None:
    try:
        response = asyncio.run(call(addr, RequestCode.CONTROLLER_GET_METADATA_INFO))
    except Exception:
        return None
    result: dict[str, Any] = orjson.loads(response.body)
    return result


def wait_leader(procs: list[ServerProcess], timeout_s: float = 15.0) -> ServerProcess:
    """The controller that says it is the Raft leader (live processes only)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.proc is None or proc.proc.poll() is not None:
                continue
            info = metadata(proc.addr)
            if info is not None and info["isLeader"]:
                return proc
        time.sleep(0.05)
    raise AssertionError("no controller became leader:\n" + "\n".join(proc.log() for proc in procs))


def sync_state_data(addr: str) -> dict[str, Any]:
    response = asyncio.run(call(addr, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA))
    assert response.code == ResponseCode.SUCCESS, response.remark
    result: dict[str, Any] = orjson.loads(response.body)
    return result
