"""Joining the name server's members with each broker's HA status (``admin cluster list``).

Method: a cluster info with one group of a master and two slaves and HA status documents as
brokers return them; the slave whose link the master lists gets the master's view of its lag,
the one it does not list (disconnected) gets the offsets' difference and "not in sync", and a
broker that did not answer shows unknowns.
"""

from __future__ import annotations

from orbitmq.client._cluster_status import member_statuses
from orbitmq.model.route import BrokerData, ClusterInfo

INFO = ClusterInfo(
    broker_addr_table={
        "broker-a": BrokerData("C1", "broker-a", {0: "m:1", 1: "s1:1", 2: "s2:1"}),
        "broker-b": BrokerData("C1", "broker-b", {0: "b:1"}),
    },
    cluster_addr_table={"C1": {"broker-a", "broker-b"}},
)
MASTER = {
    "master": True,
    "brokerRole": "SYNC_MASTER",
    "masterCommitLogMaxOffset": 5000,
    "haConnectionInfo": [{"addr": "10.0.0.1:4001", "diff": 120, "lagMs": 35, "inSync": True}],
}


def _slave(local_addr: str, max_offset: int, state: str) -> dict[str, object]:
    client = {"maxOffset": max_offset, "localAddr": local_addr, "state": state}
    return {"master": False, "brokerRole": "SLAVE", "haClientRuntimeInfo": client}


def test_member_statuses_give_each_slave_its_masters_view() -> None:
    statuses = {
        "m:1": MASTER,
        "s1:1": _slave("10.0.0.1:4001", 4880, "STREAMING"),
        "s2:1": _slave("", 1000, "CONNECTING"),
        "b:1": None,
    }
    rows = {(row.broker_name, row.broker_id): row for row in member_statuses(INFO, statuses)}
    assert len(rows) == 4
    master = rows[("broker-a", 0)]
    assert (master.role, master.max_offset, master.lag_bytes, master.in_sync) == (
        "SYNC_MASTER",
        5000,
        None,
        None,
    )
    streaming = rows[("broker-a", 1)]
    assert (streaming.role, streaming.lag_bytes, streaming.lag_ms, streaming.in_sync) == (
        "SLAVE",
        120,
        35,
        True,
    )
    disconnected = rows[("broker-a", 2)]
    assert (disconnected.lag_bytes, disconnected.lag_ms, disconnected.in_sync) == (4000, None, False)
    assert disconnected.state == "CONNECTING"
    silent = rows[("broker-b", 0)]
    assert (silent.address, silent.role, silent.max_offset) == ("b:1", None, None)
