"""Queue choice of the producer: publish info from routes, round-robin, failed-broker avoidance,
TBW102 clamping and latency-based fault isolation (pure state, fake clock)."""

from __future__ import annotations

from collections import Counter

from orbitmq.client._queue_select import (
    FAILED_SEND_LATENCY_MS,
    LatencyFaultTable,
    publish_info_from_route,
)
from orbitmq.client.config import ProducerConfig
from orbitmq.model.route import PERM_READ, BrokerData, QueueData, TopicRouteData


def _route(*brokers: tuple[str, int, int], master: bool = True) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData(name, queues, queues, perm) for name, queues, perm in brokers],
        broker_datas=[
            BrokerData("c", name, {0: f"127.0.0.1:{10911 + i}"} if master else {1: "127.0.0.1:1"})
            for i, (name, _, _) in enumerate(brokers)
        ],
    )


def test_publish_info_lists_writable_queues_sorted_by_broker() -> None:
    route = _route(("broker-b", 2, 6), ("broker-a", 3, 6), ("broker-c", 4, PERM_READ))
    info = publish_info_from_route("T", route)
    assert [(q.broker_name, q.queue_id) for q in info.queues] == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-a", 2),
        ("broker-b", 0),
        ("broker-b", 1),
    ]
    assert all(q.topic == "T" for q in info.queues)


def test_publish_info_skips_brokers_without_master() -> None:
    info = publish_info_from_route("T", _route(("broker-a", 4, 6), master=False))
    assert info.queues == []


def test_publish_info_from_template_clamps_queue_count() -> None:
    info = publish_info_from_route(
        "NewTopic", _route(("broker-a", 8, 7)), from_default=True, default_queue_nums=4
    )
    assert [q.queue_id for q in info.queues] == [0, 1, 2, 3]
    assert info.from_default and info.queues[0].topic == "NewTopic"


def test_publish_info_round_robin_visits_every_queue_evenly() -> None:
    info = publish_info_from_route("T", _route(("broker-a", 2, 6), ("broker-b", 2, 6)))
    counts = Counter(info.select() for _ in range(40))
    assert len(counts) == 4 and set(counts.values()) == {10}


def test_publish_info_select_avoids_last_failed_broker() -> None:
    info = publish_info_from_route("T", _route(("broker-a", 2, 6), ("broker-b", 2, 6)))
    for _ in range(10):
        assert info.select("broker-a").broker_name == "broker-b"


def test_publish_info_select_falls_back_when_only_failed_broker_exists() -> None:
    info = publish_info_from_route("T", _route(("broker-a", 2, 6)))
    assert info.select("broker-a").broker_name == "broker-a"


class FakeClock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


def _table(clock: FakeClock) -> LatencyFaultTable:
    config = ProducerConfig()
    return LatencyFaultTable(config.latency_max_ms, config.not_available_duration_ms, clock)


def test_latency_fault_table_durations_follow_rocketmq_table() -> None:
    table = _table(FakeClock())
    assert table.not_available_duration_ms(10) == 0
    assert table.not_available_duration_ms(549) == 0
    assert table.not_available_duration_ms(550) == 30_000
    assert table.not_available_duration_ms(2_500) == 120_000
    assert table.not_available_duration_ms(FAILED_SEND_LATENCY_MS) == 600_000


def test_latency_fault_table_isolates_failed_broker_until_duration_passes() -> None:
    clock = FakeClock()
    table = _table(clock)
    table.update("broker-a", 5, failed=True)
    assert not table.is_available("broker-a")
    assert table.is_available("broker-b")
    clock.now_ms += 600_000
    assert table.is_available("broker-a")


def test_latency_fault_table_select_skips_isolated_broker() -> None:
    clock = FakeClock()
    table = _table(clock)
    info = publish_info_from_route("T", _route(("broker-a", 2, 6), ("broker-b", 2, 6)))
    table.update("broker-a", 1_000)
    assert {table.select(info).broker_name for _ in range(20)} == {"broker-b"}
    table.update("broker-a", 3)
    assert {table.select(info).broker_name for _ in range(20)} == {"broker-a", "broker-b"}


def test_latency_fault_table_select_picks_soonest_available_when_all_isolated() -> None:
    clock = FakeClock()
    table = _table(clock)
    info = publish_info_from_route("T", _route(("broker-a", 2, 6), ("broker-b", 2, 6)))
    table.update("broker-a", 0, failed=True)
    table.update("broker-b", 600)
    assert table.select(info).broker_name == "broker-b"
