"""Which queue a producer sends to: publish info from a route, round-robin and fault isolation.

Pure state, no I/O (tested without an event loop). Theory of operation, as RocketMQ's
``MQFaultStrategy``:

- :class:`TopicPublishInfo` lists a topic's writable queues (brokers sorted by name, queue ids
  ascending) and keeps one round-robin counter per topic.
- Without fault isolation, a send takes the next queue; a retry takes the next queue on a
  different broker than the one that just failed, when there is one.
- With ``send_latency_fault_enable``, every send reports its latency. A send at least
  ``latency_max_ms[i]`` slow makes its broker unavailable for ``not_available_duration_ms[i]``;
  a failed send counts as 30 s slow. Queue choice skips unavailable brokers; when all are
  unavailable it takes the broker that becomes available first.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from orbitmq.model.message import MessageQueue
from orbitmq.model.route import TopicRouteData

__all__ = ["FAILED_SEND_LATENCY_MS", "LatencyFaultTable", "TopicPublishInfo", "publish_info_from_route"]

FAILED_SEND_LATENCY_MS = 30_000
"""The latency a failed send counts as for fault isolation (RocketMQ's value)."""


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(slots=True)
class TopicPublishInfo:
    """The writable queues of one topic and a round-robin position over them."""

    topic: str
    queues: list[MessageQueue]
    route: TopicRouteData | None = None
    # Built from the auto-create template topic's route (the topic is not known yet).
    from_default: bool = False
    built_at_ms: int = 0
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    def next_index(self) -> int:
        return next(self._counter)

    def select(self, last_failed_broker: str | None = None) -> MessageQueue:
        """The next queue, avoiding ``last_failed_broker`` when another broker has a queue.

        The caller guarantees ``queues`` is not empty.
        """
        count = len(self.queues)
        if last_failed_broker is not None:
            for _ in range(count):
                queue = self.queues[self.next_index() % count]
                if queue.broker_name != last_failed_broker:
                    return queue
        return self.queues[self.next_index() % count]


def publish_info_from_route(
    topic: str,
    route: TopicRouteData,
    *,
    from_default: bool = False,
    default_queue_nums: int = 4,
    now_ms: int = 0,
) -> TopicPublishInfo:
    """The writable queues of ``topic`` according to ``route``.

    Only brokers with a master address in the route take sends. With ``from_default`` the
    route is the template topic's, and each broker gets ``min(default_queue_nums,
    write_queue_nums)`` queues named after ``topic``, as the Java and C++ clients do.
    """
    masters = {broker.broker_name for broker in route.broker_datas if broker.master_addr is not None}
    queues: list[MessageQueue] = []
    for queue_data in sorted(route.queue_datas, key=lambda item: item.broker_name):
        if not queue_data.writable or queue_data.broker_name not in masters:
            continue
        count = queue_data.write_queue_nums
        if from_default:
            count = min(count, default_queue_nums)
        queues.extend(MessageQueue(topic, queue_data.broker_name, queue_id) for queue_id in range(count))
    return TopicPublishInfo(topic, queues, route, from_default, now_ms)


@dataclass(slots=True)
class _FaultItem:
    latency_ms: int
    available_at_ms: int


class LatencyFaultTable:
    """Per-broker latency and the time from which the broker is used again.

    Args:
        latency_max_ms: ascending latency thresholds.
        not_available_duration_ms: isolation time paired with each threshold.
        clock_ms: monotonic ms clock (tests pass a fake one).
    """

    def __init__(
        self,
        latency_max_ms: Sequence[int],
        not_available_duration_ms: Sequence[int],
        clock_ms: Callable[[], int] = _monotonic_ms,
    ) -> None:
        self._thresholds = list(zip(latency_max_ms, not_available_duration_ms, strict=True))
        self._clock_ms = clock_ms
        self._items: dict[str, _FaultItem] = {}

    def not_available_duration_ms(self, latency_ms: int) -> int:
        """How long a broker is skipped after a send that took ``latency_ms``."""
        for threshold_ms, duration_ms in reversed(self._thresholds):
            if latency_ms >= threshold_ms:
                return duration_ms
        return 0

    def update(self, broker_name: str, latency_ms: int, *, failed: bool = False) -> None:
        """Record one send to ``broker_name``; a failed send counts as 30 s slow."""
        effective_ms = FAILED_SEND_LATENCY_MS if failed else latency_ms
        duration_ms = self.not_available_duration_ms(effective_ms)
        self._items[broker_name] = _FaultItem(effective_ms, self._clock_ms() + duration_ms)

    def is_available(self, broker_name: str) -> bool:
        item = self._items.get(broker_name)
        return item is None or self._clock_ms() >= item.available_at_ms

    def remove(self, broker_name: str) -> None:
        self._items.pop(broker_name, None)

    def select(self, info: TopicPublishInfo, last_failed_broker: str | None = None) -> MessageQueue:
        """The next queue on an available broker (not ``last_failed_broker`` when possible).

        When every broker is isolated, the queue of the broker that becomes available first.
        """
        count = len(info.queues)
        for _ in range(count):
            queue = info.queues[info.next_index() % count]
            if queue.broker_name != last_failed_broker and self.is_available(queue.broker_name):
                return queue
        candidates = {queue.broker_name for queue in info.queues}
        soonest = min(
            candidates,
            key=lambda name: (
                self._items[name].available_at_ms if name in self._items else 0,
                name == last_failed_broker,
            ),
        )
        on_broker = [queue for queue in info.queues if queue.broker_name == soonest]
        return on_broker[info.next_index() % len(on_broker)]
