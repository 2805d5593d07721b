"""Request handlers of the broker, one module per concern, all sharing one :class:`BrokerState`.

A handler is ``async def handler(ctx, request) -> response`` (the transport contract). It reads
the typed header, checks the request (``broker.validation``), calls the store or a table, and
builds the response; store statuses become response codes through ``broker.status_map``. A
handler never touches the socket. The table that maps request codes to handlers is built in
``broker.app``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orbitmq.broker.clients import ConsumerTable, ProducerTable
from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.locks import QueueLockTable
from orbitmq.broker.long_polling import LongPollingService
from orbitmq.broker.offsets import ConsumerOffsetTable
from orbitmq.broker.stats import BrokerStats
from orbitmq.broker.subscriptions import SubscriptionGroupTable
from orbitmq.broker.topics import TopicConfigTable
from orbitmq.store.config import StoreConfig
from orbitmq.store.message_store import MessageStore
from orbitmq.transport.server import ServerConnection

if TYPE_CHECKING:
    from orbitmq.broker.pop import PopService
    from orbitmq.broker.replication import ReplicationService
    from orbitmq.broker.replication.controlled import ReplicasManager
    from orbitmq.broker.schedule import ScheduleService
    from orbitmq.broker.staging import StagingService
    from orbitmq.broker.timer import TimerService
    from orbitmq.broker.transaction import TransactionService
    from orbitmq.metrics import Recorder

__all__ = ["BrokerState", "now_ms"]


def now_ms() -> int:
    """Wall-clock milliseconds, the time base of store timestamps and client expiry."""
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class BrokerState:
    """Everything the handlers share: configs, the store, and the broker's tables."""

    config: BrokerConfig
    store_config: StoreConfig
    store: MessageStore
    topics: TopicConfigTable
    offsets: ConsumerOffsetTable
    groups: SubscriptionGroupTable
    producers: ProducerTable[ServerConnection]
    consumers: ConsumerTable[ServerConnection]
    locks: QueueLockTable
    long_polling: LongPollingService
    store_host: tuple[str, int]
    """Client-facing ``(ip, port)`` written as STOREHOST into every record."""
    on_topics_changed: Callable[[], None]
    """Asks the registration service to re-register promptly (a topic was created or removed)."""
    schedule: ScheduleService | None = None
    """Delay levels (None until the broker starts its services)."""
    timer: TimerService | None = None
    """Timed messages (None when timerWheelEnable is false)."""
    transactions: TransactionService | None = None
    """Half-message decisions and check-backs."""
    stats: BrokerStats = field(default_factory=lambda: BrokerStats("DefaultCluster", now_ms()))
    """Put/get counters behind VIEW_BROKER_STATS_DATA and GET_BROKER_RUNTIME_INFO."""
    config_version: tuple[int, int] = field(default_factory=lambda: (now_ms(), 0))
    """DataVersion of the broker config (timestamp ms, counter), bumped by UPDATE_BROKER_CONFIG."""
    on_config_changed: Callable[[BrokerConfig], None] | None = None
    """Swaps in a new BrokerConfig (UPDATE_BROKER_CONFIG): the app updates what captured the old one."""
    replication: ReplicationService | None = None
    """The HA port, and for a slave its HA client and metadata copy (None until startup)."""
    pop: PopService | None = None
    """POP consumption (RocketMQ 5 clients; None until the broker starts its services)."""
    replicas: ReplicasManager | None = None
    """Controller mode: the role, lease and SyncStateSet the controller gives (None otherwise)."""
    staging: StagingService | None = None
    """Staged writes committed once per (write id, batch id)."""
    recorder: Recorder | None = None
    """Message and request counts for ``/metrics`` (None when metricsExporterType is DISABLE)."""
