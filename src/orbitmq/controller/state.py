"""The controller's replicated state: broker groups, masters, epochs and SyncStateSets.

Pure (no asyncio, no sockets, no clock): the consensus log (``consensus.py``) feeds every
node the same commands in the same order, and :meth:`ControllerState.apply` turns each into
the same result on every node, so the three controllers agree on who is master without this
module knowing how they agree.

Theory of operation (ha-replication.md §5.1, §5.4, §5.5).

A *broker group* is one ``brokerName``. The controller gives each replica a broker id on its
first registration (1, 2, ...; ids follow the replica's store, which keeps its id in a file,
not its address). Per group it keeps the master's id, the *master epoch* (bumped by every
election), the *SyncStateSet* (the replicas known to hold every acknowledged message) and its
own epoch.

Commands (dicts, as they travel through the log):

==============  ===========================================================================
``register``    a replica announces itself (id -1: give it the next id); its address is kept
``elect``       make ``brokerId`` master, if the group's master epoch is still
                ``expectedMasterEpoch`` (two elections decided on the same view: one wins);
                the new SyncStateSet is the new master alone. ``brokerId`` -1 leaves the
                group masterless and keeps the SyncStateSet (its members stay electable)
``alter_sss``   the master's new SyncStateSet, fenced by master id, master epoch and the
                SyncStateSet epoch it was computed from
==============  ===========================================================================

Who may become master is decided outside the log by :func:`choose_master` (the leader's
liveness view is local, as in RocketMQ): only live members of the SyncStateSet, unless unclean
election is enabled. The ``elect`` command then only checks that nothing changed meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["NO_MASTER", "BrokerGroup", "Candidate", "ControllerState", "Outcome", "choose_master"]

NO_MASTER = -1

# Controller response codes (ha-replication.md §5.3), repeated here to keep this module pure.
SUCCESS = 0
FENCED_MASTER_EPOCH = 2000
FENCED_SYNC_STATE_SET_EPOCH = 2001
INVALID_MASTER = 2002
INVALID_REPLICAS = 2003
MASTER_NOT_AVAILABLE = 2004
INVALID_REQUEST = 2005
BROKER_METADATA_NOT_EXIST = 2008


@dataclass(slots=True)
class BrokerGroup:
    """One broker group as every controller sees it."""

    cluster_name: str
    broker_name: str
    replicas: dict[int, str] = field(default_factory=dict)  # broker id -> remoting address
    ha_addresses: dict[int, str] = field(default_factory=dict)  # broker id -> HA address
    next_broker_id: int = 1
    master_id: int = NO_MASTER
    master_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    sync_state_set_epoch: int = 0

    @property
    def master_address(self) -> str:
        return self.replicas.get(self.master_id, "")

    def view(self) -> dict[str, Any]:
        """What a broker or an operator is told about the group."""
        return {
            "clusterName": self.cluster_name,
            "brokerName": self.broker_name,
            "masterBrokerId": self.master_id,
            "masterAddress": self.master_address,
            "masterHaAddress": self.ha_addresses.get(self.master_id, ""),
            "masterEpoch": self.master_epoch,
            "syncStateSet": sorted(self.sync_state_set),
            "syncStateSetEpoch": self.sync_state_set_epoch,
            "replicas": {str(broker_id): address for broker_id, address in sorted(self.replicas.items())},
        }


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of one command: a controller response code, a remark and the group's view."""

    code: int
    remark: str = ""
    broker_id: int = NO_MASTER
    group: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A live replica as the leader's heartbeats describe it."""

    broker_id: int
    epoch: int
    max_offset: int
    priority: int = 0


def choose_master(group: BrokerGroup, live: dict[int, Candidate], unclean: bool = False) -> int | None:
    """The replica that should be master now; None when the current master is fine.

    Returns ``NO_MASTER`` when the group needs a master and none may be elected (no live
    member of the SyncStateSet, unclean election disabled). A group that never had a master
    may take any live replica. Candidates are ordered by the
    highest epoch they have data of, then the highest max offset, then the lowest priority
    value, then the lowest id (ha-replication.md §5.4, ``DefaultElectPolicy``).
    """
    if group.master_id != NO_MASTER and group.master_id in live:
        return None
    pool = [candidate for broker_id, candidate in live.items() if broker_id in group.sync_state_set]
    first_election = group.master_epoch == 0 and not group.sync_state_set
    if not pool and (unclean or first_election):
        pool = [candidate for broker_id, candidate in live.items() if broker_id in group.replicas]
    if not pool:
        return NO_MASTER if group.master_id != NO_MASTER else None
    best = min(pool, key=lambda c: (-c.epoch, -c.max_offset, c.priority, c.broker_id))
    return best.broker_id


class ControllerState:
    """Every broker group; changed only by :meth:`apply` (see the module docstring)."""

    def __init__(self) -> None:
        self.groups: dict[str, BrokerGroup] = {}

    def group(self, broker_name: str) -> BrokerGroup | None:
        return self.groups.get(broker_name)

    def apply(self, command: dict[str, Any]) -> Outcome:
        kind = command.get("type")
        if kind == "register":
            return self._register(command)
        if kind == "elect":
            return self._elect(command)
        if kind == "alter_sss":
            return self._alter_sync_state_set(command)
        return Outcome(INVALID_REQUEST, f"unknown controller command {kind!r}")

    def _register(self, command: dict[str, Any]) -> Outcome:
        name = str(command["brokerName"])
        group = self.groups.get(name)
        if group is None:
            group = BrokerGroup(str(command["clusterName"]), name)
            self.groups[name] = group
        broker_id = int(command["brokerId"])
        address = str(command["brokerAddress"])
        if broker_id <= 0:
            broker_id = group.next_broker_id
        group.next_broker_id = max(group.next_broker_id, broker_id + 1)
        for other_id, other_address in list(group.replicas.items()):
            if other_address == address and other_id != broker_id:
                # A replica whose store was emptied comes back under a new id at the same address.
                del group.replicas[other_id]
                group.ha_addresses.pop(other_id, None)
                group.sync_state_set.discard(other_id)
        group.replicas[broker_id] = address
        group.ha_addresses[broker_id] = str(command.get("haAddress", ""))
        return Outcome(SUCCESS, "", broker_id, group.view())

    def _elect(self, command: dict[str, Any]) -> Outcome:
        group = self.groups.get(str(command["brokerName"]))
        if group is None:
            return Outcome(BROKER_METADATA_NOT_EXIST, f"no broker group {command['brokerName']!r}")
        expected = int(command["expectedMasterEpoch"])
        if group.master_epoch != expected:
            return Outcome(
                FENCED_MASTER_EPOCH,
                f"master epoch is {group.master_epoch}, the election was decided at {expected}",
                group.master_id,
                group.view(),
            )
        new_master = int(command["brokerId"])
        if new_master == NO_MASTER:
            group.master_id = NO_MASTER
            return Outcome(MASTER_NOT_AVAILABLE, "no replica may become master", NO_MASTER, group.view())
        if new_master not in group.replicas:
            return Outcome(
                INVALID_MASTER, f"broker id {new_master} is not a replica", NO_MASTER, group.view()
            )
        group.master_id = new_master
        group.master_epoch += 1
        group.sync_state_set = {new_master}
        group.sync_state_set_epoch += 1
        return Outcome(SUCCESS, "", new_master, group.view())

    def _alter_sync_state_set(self, command: dict[str, Any]) -> Outcome:
        group = self.groups.get(str(command["brokerName"]))
        if group is None:
            return Outcome(BROKER_METADATA_NOT_EXIST, f"no broker group {command['brokerName']!r}")
        master_id = int(command["masterBrokerId"])
        if master_id != group.master_id:
            return Outcome(
                INVALID_MASTER, f"broker {master_id} is not the master", group.master_id, group.view()
            )
        if int(command["masterEpoch"]) != group.master_epoch:
            return Outcome(
                FENCED_MASTER_EPOCH, f"master epoch is {group.master_epoch}", group.master_id, group.view()
            )
        if int(command["syncStateSetEpoch"]) != group.sync_state_set_epoch:
            return Outcome(
                FENCED_SYNC_STATE_SET_EPOCH,
                f"SyncStateSet epoch is {group.sync_state_set_epoch}",
                group.master_id,
                group.view(),
            )
        new_set = {int(member) for member in command["syncStateSet"]}
        if master_id not in new_set or not new_set <= set(group.replicas):
            return Outcome(
                INVALID_REPLICAS,
                f"SyncStateSet {sorted(new_set)} must hold the master and replicas only",
                group.master_id,
                group.view(),
            )
        group.sync_state_set = new_set
        group.sync_state_set_epoch += 1
        return Outcome(SUCCESS, "", group.master_id, group.view())

    def views(self) -> list[dict[str, Any]]:
        return [group.view() for _, group in sorted(self.groups.items())]
