"""The name server's routing state: which brokers are alive and which topics they host.

This module owns RocketMQ's ``RouteInfoManager`` tables and their rules, and nothing else: no
I/O, no asyncio, no clock. Time comes in as ``now_ms`` arguments and connections as opaque
integer ids, so every rule can be tested without an event loop.

Tables (RocketMQ names):

=====================  =====================================================================
``topic_queue_table``  topic -> broker name -> QueueData (queues that broker hosts for it)
``broker_addr_table``  broker name -> BrokerData (cluster, broker id -> client-facing address)
``cluster_addr_table`` cluster name -> set of broker names
``broker_live_table``  broker address -> liveness (last registration, data version, connection)
=====================  =====================================================================

Rules (remoting-protocol §2.17-§2.18):

- A registration adds the broker to its cluster and records ``broker_id -> broker_addr``; the
  same address under another id is dropped first (a slave promoted to master).
- Only a master (id 0) publishes queue data, and only when its data version changed or on its
  first registration: then its queue data is replaced by its topic table, and topics missing
  from the table lose that broker's queues.
- A broker that has not registered for ``expiry_ms``, or whose connection closed, is removed.
  Queue data belongs to a broker *name*, so it goes only when the name's last address goes.
- A topic has a route only while it has both queue data and broker data.

A master's new table is usually its previous one and a few topics: the handler works out, off
the event loop, which topics changed against the table the name server last published for that
broker (:func:`topic_table_changes`), and the registration applies just those, as long as
nothing else touched that broker's queue data meanwhile (otherwise it replaces them all). At
50,000 topics replacing everything held the event loop half a second per registration.

``version`` counts changes to what a route lookup returns (queue data and broker addresses);
a re-registration that changes neither leaves it alone, so answers derived from routes (the
handlers' encoded route bodies) stay valid until it moves.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from orbitmq.model.route import (
    MASTER_BROKER_ID,
    PERM_WRITE,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicRouteData,
)

__all__ = [
    "BROKER_CHANNEL_EXPIRED_MS",
    "BrokerLiveInfo",
    "RegisterResult",
    "RouteTable",
    "TopicTableChanges",
    "topic_table_changes",
]

BROKER_CHANNEL_EXPIRED_MS = 120_000
"""A broker silent for this long is considered dead (RocketMQ's BROKER_CHANNEL_EXPIRED_TIME)."""


@dataclass(slots=True)
class BrokerLiveInfo:
    """What the name server remembers of one broker address between registrations."""

    last_update_ms: int
    data_version: DataVersion
    connection_id: int | None
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """Answer to a registration: for a slave, where its master's HA service listens."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(frozen=True, slots=True)
class TopicTableChanges:
    """How a master's new topic table differs from ``base``, the one last published for it."""

    base: Mapping[str, TopicConfig]
    changed: dict[str, TopicConfig]
    removed: list[str]


def topic_table_changes(
    base: Mapping[str, TopicConfig], table: Mapping[str, TopicConfig]
) -> TopicTableChanges:
    """The topics of ``table`` new or different from ``base``, and those gone (any thread: both
    tables are left as they are)."""
    changed = {name: config for name, config in table.items() if base.get(name) != config}
    removed = [name for name in base if name not in table]
    return TopicTableChanges(base, changed, removed)


class RouteTable:
    """RocketMQ's route tables with its registration, expiry and lookup rules."""

    def __init__(self, *, delete_topic_with_broker_registration: bool = False) -> None:
        # RocketMQ's deleteTopicWithBrokerRegistration: a master's registration with a new data
        # version drops the topics it no longer lists. Off by default, as in RocketMQ: a Java
        # broker registers a topic it just created on its own, with a new data version.
        self.delete_topic_with_broker_registration = delete_topic_with_broker_registration
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        # Controller mode: the highest master epoch a group's id-0 registration carried. A master
        # registering with a lower one was deposed (it was paused, say): it may not take id 0 back.
        self.master_epochs: dict[str, int] = {}
        # Broker name -> the topic table its queue data was last published from, while nothing
        # else has changed that queue data (a base for TopicTableChanges).
        self._published: dict[str, Mapping[str, TopicConfig]] = {}
        self.version = 0
        """Bumped whenever a route lookup's answer may change (see the module docstring)."""

    # -- registration ------------------------------------------------------------------------

    def fenced_master(self, broker_name: str, broker_id: int, master_epoch: int | None) -> int | None:
        """The epoch that fences this id-0 registration out (None: it may register)."""
        if broker_id != MASTER_BROKER_ID or master_epoch is None:
            return None
        known = self.master_epochs.get(broker_name, 0)
        if master_epoch < known:
            return known
        self.master_epochs[broker_name] = master_epoch
        return None

    def register_broker(
        self,
        cluster: str,
        broker_name: str,
        broker_addr: str,
        broker_id: int,
        ha_addr: str,
        topic_config_table: Mapping[str, TopicConfig] | None,
        data_version: DataVersion,
        connection_id: int | None,
        now_ms: int,
        changes: TopicTableChanges | None = None,
    ) -> RegisterResult:
        """Record a broker's registration (REGISTER_BROKER) and, for a master, its topics.

        ``changes``, worked out against :meth:`published_table`, lets a publication apply only
        what changed (module docstring); without them, or when they are stale, every topic's
        queue data is replaced.
        """
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        broker_data = self.broker_addr_table.get(broker_name)
        first_registration = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster=cluster, broker_name=broker_name)
            self.broker_addr_table[broker_name] = broker_data
        # A promoted slave re-registers its address under id 0: forget its old id.
        stale_ids = [i for i, a in broker_data.broker_addrs.items() if a == broker_addr and i != broker_id]
        for stale_id in stale_ids:
            del broker_data.broker_addrs[stale_id]
        previous_addr = broker_data.broker_addrs.get(broker_id)
        broker_data.broker_addrs[broker_id] = broker_addr
        first_registration = first_registration or previous_addr is None
        if stale_ids or previous_addr != broker_addr:
            self.version += 1

        # Compare versions before the live table records the new one.
        publishes = first_registration or self.is_data_version_changed(broker_addr, data_version)
        if topic_config_table is not None and broker_id == MASTER_BROKER_ID and publishes:
            if changes is not None and self._published.get(broker_name) is changes.base:
                self._apply_changes(broker_name, changes)
            else:
                self._replace_queue_data(broker_name, topic_config_table)
            self._published[broker_name] = topic_config_table

        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            last_update_ms=now_ms,
            data_version=data_version,
            connection_id=connection_id,
            ha_server_addr=ha_addr,
        )
        return self._register_result(broker_data, broker_id)

    def published_table(self, broker_name: str) -> Mapping[str, TopicConfig] | None:
        """The topic table this broker's queue data was last published from, if nothing changed
        that queue data since (never modified: a base to work changes out against)."""
        return self._published.get(broker_name)

    def _apply_changes(self, broker_name: str, changes: TopicTableChanges) -> None:
        self.version += 1
        shared: dict[tuple[int, int, int, int], QueueData] = {}
        table = self.topic_queue_table
        for topic, config in changes.changed.items():
            layout = (config.read_queue_nums, config.write_queue_nums, config.perm, config.topic_sys_flag)
            queue_data = shared.get(layout)
            if queue_data is None:
                queue_data = shared[layout] = QueueData(broker_name, *layout)
            table.setdefault(topic, {})[broker_name] = queue_data
        if not self.delete_topic_with_broker_registration:
            return  # as _replace_queue_data: a topic left out of a registration is kept
        for topic in changes.removed:
            self._remove_queue_data(topic, broker_name)

    def _replace_queue_data(self, broker_name: str, topic_config_table: Mapping[str, TopicConfig]) -> None:
        # QueueData is frozen: topics with the same layout share one (a broker's 100,000
        # topics have a handful of layouts, and this runs on the event loop).
        self.version += 1
        shared: dict[tuple[int, int, int, int], QueueData] = {}
        table = self.topic_queue_table
        for topic, config in topic_config_table.items():
            layout = (config.read_queue_nums, config.write_queue_nums, config.perm, config.topic_sys_flag)
            queue_data = shared.get(layout)
            if queue_data is None:
                queue_data = shared[layout] = QueueData(broker_name, *layout)
            by_broker = table.get(topic)
            if by_broker is None:
                table[topic] = {broker_name: queue_data}
            else:
                by_broker[broker_name] = queue_data
        if not self.delete_topic_with_broker_registration:
            return
        # A topic the master no longer lists (deleted on the broker) loses this broker's queues.
        for topic in [t for t, by_broker in self.topic_queue_table.items() if broker_name in by_broker]:
            if topic not in topic_config_table:
                self._remove_queue_data(topic, broker_name)

    def _register_result(self, broker_data: BrokerData, broker_id: int) -> RegisterResult:
        if broker_id == MASTER_BROKER_ID:
            return RegisterResult()
        master_addr = broker_data.broker_addrs.get(MASTER_BROKER_ID)
        if master_addr is None:
            return RegisterResult()
        master_live = self.broker_live_table.get(master_addr)
        if master_live is None:
            return RegisterResult()
        return RegisterResult(ha_server_addr=master_live.ha_server_addr, master_addr=master_addr)

    def unregister_broker(self, cluster: str, broker_name: str, broker_addr: str, broker_id: int) -> bool:
        """Forget one broker address (UNREGISTER_BROKER); True if it was known."""
        known = self.broker_live_table.pop(broker_addr, None) is not None
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None and broker_data.broker_addrs.get(broker_id) == broker_addr:
            del broker_data.broker_addrs[broker_id]
            self.version += 1
            known = True
            if not broker_data.broker_addrs:
                self._remove_broker_name(broker_name, cluster)
        return known

    # -- data versions -----------------------------------------------------------------------

    def is_data_version_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        """True when the broker's topic table differs from what it last registered (or is unknown)."""
        live = self.broker_live_table.get(broker_addr)
        return live is None or live.data_version != data_version

    def published_version(self, broker_name: str, broker_addr: str, broker_id: int) -> DataVersion | None:
        """The data version of this broker's last registration, when another registration of
        the same version would publish nothing (not its first under this name and id)."""
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None or broker_data.broker_addrs.get(broker_id) != broker_addr:
            return None
        return self.data_version_of(broker_addr)

    def data_version_of(self, broker_addr: str) -> DataVersion | None:
        """The data version the broker last registered, or None if it is not alive."""
        live = self.broker_live_table.get(broker_addr)
        return None if live is None else live.data_version

    def touch(self, broker_addr: str, now_ms: int) -> None:
        """Record that a live broker checked in without re-registering (QUERY_DATA_VERSION)."""
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_ms = now_ms

    # -- expiry ------------------------------------------------------------------------------

    def scan_inactive(self, now_ms: int, expiry_ms: int = BROKER_CHANNEL_EXPIRED_MS) -> list[str]:
        """Remove brokers silent for more than ``expiry_ms``; returns their addresses."""
        expired = [
            addr for addr, live in self.broker_live_table.items() if live.last_update_ms + expiry_ms < now_ms
        ]
        for addr in expired:
            self._remove_broker_addr(addr)
        return expired

    def on_connection_closed(self, connection_id: int) -> list[str]:
        """Remove the brokers whose latest registration came over this connection."""
        gone = [addr for addr, live in self.broker_live_table.items() if live.connection_id == connection_id]
        for addr in gone:
            self._remove_broker_addr(addr)
        return gone

    def _remove_broker_addr(self, broker_addr: str) -> None:
        self.broker_live_table.pop(broker_addr, None)
        for broker_name, broker_data in list(self.broker_addr_table.items()):
            for broker_id in [i for i, a in broker_data.broker_addrs.items() if a == broker_addr]:
                del broker_data.broker_addrs[broker_id]
                self.version += 1
            if not broker_data.broker_addrs:
                self._remove_broker_name(broker_name, broker_data.cluster)

    def _remove_broker_name(self, broker_name: str, cluster: str) -> None:
        self.version += 1
        self._published.pop(broker_name, None)
        self.broker_addr_table.pop(broker_name, None)
        for cluster_name in [cluster, *self.cluster_addr_table]:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None and broker_name in names:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster_name]
        for topic in list(self.topic_queue_table):
            self._remove_queue_data(topic, broker_name)

    def _remove_queue_data(self, topic: str, broker_name: str) -> None:
        by_broker = self.topic_queue_table.get(topic)
        if by_broker is None:
            return
        if by_broker.pop(broker_name, None) is not None:
            self.version += 1
        if not by_broker:
            del self.topic_queue_table[topic]

    def set_write_perm(self, broker_name: str, writable: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER: take write off (or give it back
        to) every queue data of ``broker_name``; the number of topics it holds queue data of.

        As in RocketMQ, the change lasts until the broker publishes its topics again (a new data
        version: a topic created or changed there), which brings back the perm its config has.
        """
        count = 0
        self._published.pop(broker_name, None)
        for by_broker in self.topic_queue_table.values():
            queue_data = by_broker.get(broker_name)
            if queue_data is None:
                continue
            perm = queue_data.perm | PERM_WRITE if writable else queue_data.perm & ~PERM_WRITE
            if perm != queue_data.perm:
                by_broker[broker_name] = dataclasses.replace(queue_data, perm=perm)
            count += 1
        if count:
            self.version += 1
        return count

    # -- lookups -----------------------------------------------------------------------------

    def topic_route(self, topic: str) -> TopicRouteData | None:
        """The topic's route, or None when it has no queue data or none of its brokers is known."""
        by_broker = self.topic_queue_table.get(topic)
        if not by_broker:
            return None
        # Copies (the caller may keep or change them); a BrokerData holds only strings and one dict.
        broker_datas = [
            BrokerData(data.cluster, data.broker_name, dict(data.broker_addrs))
            for data in (self.broker_addr_table.get(name) for name in by_broker)
            if data is not None
        ]
        if not broker_datas:
            return None
        return TopicRouteData(queue_datas=list(by_broker.values()), broker_datas=broker_datas)

    def cluster_info(self) -> ClusterInfo:
        """A copy of every known broker and the broker names of each cluster."""
        return ClusterInfo(
            broker_addr_table=copy.deepcopy(self.broker_addr_table),
            cluster_addr_table={name: set(names) for name, names in self.cluster_addr_table.items()},
        )

    def all_topics(self) -> list[str]:
        """Every topic with queue data, sorted."""
        return sorted(self.topic_queue_table)

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Drop a topic's queue data, everywhere or only on ``cluster``'s brokers; True if any went."""
        by_broker = self.topic_queue_table.get(topic)
        if by_broker is None:
            return False
        # The brokers' next publication must bring the topic back as RocketMQ's does: in full.
        for name in by_broker:
            self._published.pop(name, None)
        if cluster is None:
            del self.topic_queue_table[topic]
            self.version += 1
            return True
        names = self.cluster_addr_table.get(cluster, set())
        removed = [name for name in by_broker if name in names]
        for name in removed:
            self._remove_queue_data(topic, name)
        return bool(removed)
