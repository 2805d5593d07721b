"""Routing values: which brokers host a topic, with how many queues, and topic settings.

These are RocketMQ's ``TopicRouteData``, ``QueueData``, ``BrokerData``, ``ClusterInfo``,
``TopicConfig`` and ``DataVersion`` as plain dataclasses; their JSON forms live in
``orbitmq.protocol.bodies``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PERM_INHERIT = 0x1
PERM_WRITE = 0x2
PERM_READ = 0x4
PERM_PRIORITY = 0x8
PERM_READ_WRITE = PERM_READ | PERM_WRITE

MASTER_BROKER_ID = 0
"""Broker id of a master; slaves have ids >= 1."""


@dataclass(frozen=True, slots=True)
class QueueData:
    """The queues one broker hosts for one topic."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ_WRITE
    topic_sys_flag: int = 0

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)


@dataclass(slots=True)
class BrokerData:
    """One broker name (a master and its slaves) and the client-facing address of each id."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_BROKER_ID)


@dataclass(slots=True)
class TopicRouteData:
    """A topic's route as the name server publishes it."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    order_topic_conf: str | None = None
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)


@dataclass(slots=True)
class ClusterInfo:
    """Every broker the name server knows, and which broker names form each cluster."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic's settings on one broker."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    # RocketMQ 5's topic attributes (``model.topic_attributes``): {"message.type": "FIFO"}, ...
    # Read-only once the config is made; equal configs have equal attributes.
    attributes: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True, order=True)
class DataVersion:
    """Version of a broker's topic table: bumped on every change, compared by the name server.

    ``state_version`` is RocketMQ 5's ``stateVersion`` (the broker's controller-mode state): kept
    and carried as received, 0 from an OrbitMQ broker."""

    timestamp: int = 0
    counter: int = 0
    state_version: int = 0

    def bumped(self, timestamp_ms: int) -> DataVersion:
        """The next version, stamped with ``timestamp_ms``."""
        return DataVersion(timestamp=timestamp_ms, counter=self.counter + 1, state_version=self.state_version)
