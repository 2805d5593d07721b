"""Settings of the push and pull consumers, and the queue list of a route they both use.

Each consumer takes its settings as keyword arguments; ``split_config`` sorts them into the
shared ClientConfig and one of the frozen dataclasses here. Names carry their unit.
"""

from __future__ import annotations

from dataclasses import dataclass

from orbitmq.client.rebalance import AllocateStrategy, strategy_by_name
from orbitmq.errors import ConfigError
from orbitmq.model.heartbeat import ConsumeFromWhere, MessageModel
from orbitmq.model.message import MessageQueue
from orbitmq.model.route import TopicRouteData

__all__ = ["PullConsumerConfig", "PushConsumerConfig", "queues_of_route"]


@dataclass(frozen=True, slots=True)
class PushConsumerConfig:
    """Settings of one push consumer (RocketMQ's DefaultMQPushConsumer fields)."""

    # CLUSTERING shares the queues among the group; BROADCASTING gives every member all of them.
    message_model: MessageModel = MessageModel.CLUSTERING
    # Where a group with no committed offset starts.
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    # Start time for CONSUME_FROM_TIMESTAMP (ms since epoch; default: 30 minutes ago).
    consume_timestamp_ms: int | None = None
    # "average", "circle", "consistent_hash", or a callable (see orbitmq.client.rebalance).
    allocate_strategy: str | AllocateStrategy = "average"
    # Consume each queue serially, holding its broker lock (clustering).
    orderly: bool = False
    # Concurrent listener calls (tasks for async listeners, pool threads for plain ones).
    consume_thread_min: int = 20
    consume_thread_max: int = 20
    # Messages per listener call.
    consume_message_batch_max_size: int = 1
    # Messages asked for per pull.
    pull_batch_size: int = 32
    # Pause pulling a queue holding this many unconsumed messages ...
    pull_threshold_for_queue: int = 1_000
    # ... or this many MiB of unconsumed bodies.
    pull_threshold_size_for_queue_mib: int = 100
    # Redeliveries before a message goes to %DLQ%<group>.
    max_reconsume_times: int = 16
    # Orderly: pause of a queue after a failed batch.
    suspend_current_queue_time_ms: int = 1_000
    # Periodic rebalance and orderly lock renewal.
    rebalance_interval_ms: int = 20_000
    lock_renew_interval_ms: int = 20_000
    # How long the broker may hold a pull that finds nothing, and the client-side pull timeout.
    broker_suspend_max_ms: int = 15_000
    consumer_timeout_when_suspend_ms: int = 30_000
    # Directory of broadcasting offset files (required for BROADCASTING).
    offset_store_dir: str | None = None
    # How long shutdown waits for in-flight listener calls.
    shutdown_timeout_ms: int = 10_000

    def __post_init__(self) -> None:
        if self.consume_thread_max < 1 or self.consume_thread_min > self.consume_thread_max:
            raise ConfigError(
                f"need 1 <= consume_thread_min <= consume_thread_max, got "
                f"{self.consume_thread_min} and {self.consume_thread_max}"
            )
        if not 1 <= self.consume_message_batch_max_size <= 1024:
            raise ConfigError(
                f"consume_message_batch_max_size must be 1..1024, got {self.consume_message_batch_max_size}"
            )
        if not 1 <= self.pull_batch_size <= 1024:
            raise ConfigError(f"pull_batch_size must be 1..1024, got {self.pull_batch_size}")
        if self.message_model is MessageModel.BROADCASTING and not self.offset_store_dir:
            raise ConfigError("BROADCASTING consumers need offset_store_dir (where their offset file lives)")
        if isinstance(self.allocate_strategy, str):
            strategy_by_name(self.allocate_strategy)


def queues_of_route(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """The readable queues of ``topic`` in ``route``, sorted."""
    return sorted(
        MessageQueue(topic, data.broker_name, queue_id)
        for data in route.queue_datas
        if data.readable
        for queue_id in range(data.read_queue_nums)
    )


@dataclass(frozen=True, slots=True)
class PullConsumerConfig:
    """Settings of one pull consumer (RocketMQ's DefaultLitePullConsumer fields)."""

    # Commit consumed offsets in the background and at shutdown.
    auto_commit: bool = True
    # maxMsgNums of each pull request.
    pull_batch_size: int = 32
    # Messages buffered per queue before its prefetch pauses.
    pull_threshold_for_queue: int = 1_000
    # Most messages one poll() returns.
    max_poll_records: int = 10_000
    # Where a queue with no committed offset starts.
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    # Start time for CONSUME_FROM_TIMESTAMP (ms since epoch; default: 30 minutes ago).
    consume_timestamp_ms: int | None = None
    # Strategy sharing subscribed queues among the group ("average", "circle", ...).
    allocate_strategy: str | AllocateStrategy = "average"
    # Periodic rebalance of subscribed topics.
    rebalance_interval_ms: int = 20_000
    # Long-poll hold on the broker, and the client-side timeout of such a pull.
    broker_suspend_max_ms: int = 15_000
    consumer_timeout_when_suspend_ms: int = 30_000

    def __post_init__(self) -> None:
        if not 1 <= self.pull_batch_size <= 1024 * 32:
            raise ConfigError(f"pull_batch_size must be 1..32768, got {self.pull_batch_size}")
        if self.pull_threshold_for_queue < 1 or self.max_poll_records < 1:
            raise ConfigError("pull_threshold_for_queue and max_poll_records must be positive")
