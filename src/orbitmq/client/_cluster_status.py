"""Every broker of every cluster with its replication state, for ``orbitmq admin cluster list``.

The name server knows who is there (GET_BROKER_CLUSTER_INFO); each broker knows its own
replication (GET_BROKER_HA_STATUS, RocketMQ's HARuntimeInfo JSON). A slave's lag is the
master's view of it: the master lists one HA connection per slave, and a slave names the
local address of its connection (``haClientRuntimeInfo.localAddr``), which is that
connection's address on the master. :func:`member_statuses` joins the two (pure; no I/O).

A broker that does not answer, or does not serve GET_BROKER_HA_STATUS (a Java 4.x broker),
shows its address with unknown role and lag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orbitmq.model.route import MASTER_BROKER_ID, ClusterInfo

__all__ = ["MemberStatus", "member_statuses"]


@dataclass(frozen=True, slots=True)
class MemberStatus:
    """One broker of a group; None where it is unknown or does not apply (a master's lag)."""

    cluster: str
    broker_name: str
    broker_id: int
    address: str
    role: str | None
    max_offset: int | None
    lag_bytes: int | None  # master's max offset minus what this slave acknowledged
    lag_ms: int | None  # age of the oldest message this slave does not have yet
    in_sync: bool | None  # lag below haSlaveFallbehindMax on a live HA link
    state: str | None  # the slave's HA link state (STREAMING, CONNECTING, BEHIND_MASTER...)


def member_statuses(info: ClusterInfo, statuses: dict[str, dict[str, Any] | None]) -> list[MemberStatus]:
    """One row per broker address, sorted by cluster, broker name and id."""
    rows = []
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            broker = info.broker_addr_table.get(name)
            addrs = broker.broker_addrs if broker is not None else {}
            master = statuses.get(addrs.get(MASTER_BROKER_ID, ""))
            for broker_id, addr in sorted(addrs.items()):
                rows.append(_row(cluster, name, broker_id, addr, statuses.get(addr), master))
    return rows


def _row(
    cluster: str,
    name: str,
    broker_id: int,
    addr: str,
    status: dict[str, Any] | None,
    master: dict[str, Any] | None,
) -> MemberStatus:
    if status is None:
        return MemberStatus(cluster, name, broker_id, addr, None, None, None, None, None, None)
    role = str(status.get("brokerRole") or ("ASYNC_MASTER" if status.get("master") else "SLAVE"))
    client = status.get("haClientRuntimeInfo")
    if broker_id == MASTER_BROKER_ID or not isinstance(client, dict):
        max_offset = _int(status.get("masterCommitLogMaxOffset"))
        return MemberStatus(cluster, name, broker_id, addr, role, max_offset, None, None, None, None)
    max_offset = _int(client.get("maxOffset"))
    state = str(client.get("state", "")) or None
    connection = _connection_of(master, str(client.get("localAddr", "")))
    if connection is not None:
        return MemberStatus(
            cluster,
            name,
            broker_id,
            addr,
            role,
            max_offset,
            _int(connection.get("diff")),
            _lag_ms(connection.get("lagMs")),
            bool(connection.get("inSync")),
            state,
        )
    master_max = _int(master.get("masterCommitLogMaxOffset")) if master is not None else None
    lag = master_max - max_offset if master_max is not None and max_offset is not None else None
    return MemberStatus(cluster, name, broker_id, addr, role, max_offset, lag, None, False, state)


def _connection_of(master: dict[str, Any] | None, local_addr: str) -> dict[str, Any] | None:
    if master is None or not local_addr:
        return None
    for connection in master.get("haConnectionInfo") or ():
        if isinstance(connection, dict) and connection.get("addr") == local_addr:
            return connection
    return None


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _lag_ms(value: object) -> int | None:
    lag = _int(value)
    return lag if lag is not None and lag >= 0 else None
