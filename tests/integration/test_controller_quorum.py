"""Three controller processes: Raft leader election (PySyncObj), replicated broker groups, elections."""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import orjson
import pytest

from orbitmq.protocol.codes import RequestCode, ResponseCode
from tests.support.controllers import call, metadata, start_controllers, sync_state_data, wait_leader

pytestmark = [pytest.mark.integration]


def _register(addr: str, broker_address: str, broker_id: int = -1) -> int:
    response = asyncio.run(
        call(
            addr,
            RequestCode.CONTROLLER_REGISTER_BROKER,
            {
                "clusterName": "DefaultCluster",
                "brokerName": "broker-a",
                "brokerId": str(broker_id),
                "brokerAddress": broker_address,
                "haAddress": broker_address,
            },
        )
    )
    assert response.code == ResponseCode.SUCCESS, response.remark
    return int(response.ext_fields["brokerId"])


def _heartbeat(
    addr: str, broker_id: int, max_offset: int, timeout_ms: int = 1500
) -> tuple[int, dict[str, object]]:
    response = asyncio.run(
        call(
            addr,
            RequestCode.BROKER_HEARTBEAT,
            {
                "clusterName": "DefaultCluster",
                "brokerName": "broker-a",
                "brokerAddr": f"127.0.0.1:{broker_id}",
                "brokerId": str(broker_id),
                "epoch": "0",
                "maxOffset": str(max_offset),
                "confirmOffset": str(max_offset),
                "heartbeatTimeoutMills": str(timeout_ms),
            },
        )
    )
    return response.code, (orjson.loads(response.body) if response.body else {})


def test_controller_quorum_elects_first_master_and_keeps_state_across_leader_loss(tmp_path: Path) -> None:
    procs = start_controllers(tmp_path)
    try:
        leader = wait_leader(procs)
        first = _register(leader.addr, "127.0.0.1:1001")
        second = _register(procs[0].addr, "127.0.0.1:1002")  # a follower forwards it to the leader
        assert (first, second) == (1, 2)
        # Both heartbeat; the first election of a group takes a live replica, the one furthest ahead.
        # The one ahead heartbeats first, so an election scan that runs between the two
        # heartbeats (a busy machine) finds the same answer; which of several live replicas
        # wins is tested in tests/unit/controller/test_state.py.
        deadline = time.monotonic() + 10
        view: dict[str, object] = {}
        while time.monotonic() < deadline:
            for proc in procs:
                _heartbeat(proc.addr, second, 500)
                _heartbeat(proc.addr, first, 100)
            code, view = _heartbeat(leader.addr, second, 500)
            if code == ResponseCode.SUCCESS and view["masterBrokerId"] == second:
                break
            time.sleep(0.1)
        assert (
            view["masterBrokerId"] == second and view["masterEpoch"] == 1 and view["syncStateSet"] == [second]
        )
        # A follower refuses to answer for the leader.
        follower = next(proc for proc in procs if proc is not leader)
        assert _heartbeat(follower.addr, first, 100)[0] == ResponseCode.CONTROLLER_NOT_LEADER
        # Kill the leader: the two others elect a new one that has the committed groups.
        leader.kill()
        started = time.monotonic()
        survivors = [proc for proc in procs if proc is not leader]
        new_leader = wait_leader(survivors)
        print(f"controller leader re-elected in {time.monotonic() - started:.2f} s")
        data = sync_state_data(new_leader.addr)
        (group,) = data["groups"]
        assert group["masterBrokerId"] == second and group["masterEpoch"] == 1
        assert set(group["replicas"]) == {str(first), str(second)}
    finally:
        for proc in procs:
            proc.kill()


def test_controller_elects_only_from_sync_state_set(tmp_path: Path) -> None:
    procs = start_controllers(tmp_path)
    try:
        leader = wait_leader(procs)
        master = _register(leader.addr, "127.0.0.1:2001")
        slave = _register(leader.addr, "127.0.0.1:2002")

        def beat_all(ids: list[int]) -> dict[str, object]:
            view: dict[str, object] = {}
            for broker_id in ids:
                for proc in procs:
                    code, answer = _heartbeat(proc.addr, broker_id, 1000 + broker_id)
                    if code == ResponseCode.SUCCESS:
                        view = answer
            return view

        deadline = time.monotonic() + 10
        view = beat_all([master])
        while view.get("masterBrokerId") != master and time.monotonic() < deadline:
            time.sleep(0.1)
            view = beat_all([master])
        assert view["masterBrokerId"] == master
        # The slave is not in the SyncStateSet: with the master silent, it must not be elected.
        silent_since = time.monotonic()
        while time.monotonic() - silent_since < 3.0:
            view = beat_all([slave])
            time.sleep(0.1)
        assert view["masterBrokerId"] == -1, view
        assert view["syncStateSet"] == [master]
        # The master returns: it is a SyncStateSet member, so it is elected again, at a new epoch.
        deadline = time.monotonic() + 10
        while view.get("masterBrokerId") != master and time.monotonic() < deadline:
            view = beat_all([master, slave])
            time.sleep(0.1)
        assert view["masterBrokerId"] == master and view["masterEpoch"] == 2
        # The master adds the slave to the SyncStateSet (fenced by the epochs it read).
        response = asyncio.run(
            call(
                leader.addr,
                RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                {
                    "brokerName": "broker-a",
                    "masterBrokerId": str(master),
                    "masterEpoch": "1",
                    "syncStateSetEpoch": str(view["syncStateSetEpoch"]),
                },
                orjson.dumps({"syncStateSet": [master, slave]}),
            )
        )
        assert response.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
        response = asyncio.run(
            call(
                leader.addr,
                RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                {
                    "brokerName": "broker-a",
                    "masterBrokerId": str(master),
                    "masterEpoch": str(view["masterEpoch"]),
                    "syncStateSetEpoch": str(view["syncStateSetEpoch"]),
                },
                orjson.dumps({"syncStateSet": [master, slave]}),
            )
        )
        assert response.code == ResponseCode.SUCCESS, response.remark
        assert orjson.loads(response.body)["syncStateSet"] == [master, slave]
    finally:
        for proc in procs:
            proc.kill()


@pytest.mark.slow
def test_controller_leader_election_time(tmp_path: Path) -> None:
    """Figures only (printed): how long the quorum is without a leader after the leader dies."""
    procs = start_controllers(tmp_path)
    try:
        timings = []
        for _ in range(2):
            leader = wait_leader(procs)
            leader.kill()
            started = time.monotonic()
            wait_leader([proc for proc in procs if proc is not leader])
            timings.append(time.monotonic() - started)
            leader.start()
        print(
            f"controller leader election after a kill: {', '.join(f'{t:.2f}' for t in timings)} s "
            f"(median {statistics.median(timings):.2f} s)"
        )
        assert all(metadata(proc.addr) is not None for proc in procs)
    finally:
        for proc in procs:
            proc.kill()


def test_namesrv_embeds_controller_when_enabled(tmp_path: Path) -> None:
    import sys

    from tests.support.processes import ServerProcess, free_ports, write_conf

    port, raft_port = free_ports(2)
    conf = write_conf(
        tmp_path / "namesrv.conf",
        {
            "listenPort": port,
            "enableControllerInNamesrv": True,
            "controllerDLegerPeers": f"n0-127.0.0.1:{raft_port}",
            "controllerDLegerSelfId": "n0",
            "controllerStorePath": str(tmp_path / "controller"),
            "scanNotActiveBrokerInterval": 200,
        },
    )
    args = [sys.executable, "-m", "orbitmq.namesrv", "-c", str(conf)]
    namesrv = ServerProcess("namesrv", args, port, tmp_path / "namesrv", tmp_path / "namesrv.log").start()
    try:
        assert wait_leader([namesrv]) is namesrv
        assert _register(namesrv.addr, "127.0.0.1:3001") == 1
        # Still a name server: it answers a cluster-info request.
        response = asyncio.run(call(namesrv.addr, RequestCode.GET_BROKER_CLUSTER_INFO))
        assert response.code == ResponseCode.SUCCESS
    finally:
        namesrv.kill()
