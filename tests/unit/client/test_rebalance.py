"""Allocation strategies: every member computes the same split, and the split covers each queue once."""

from __future__ import annotations

import random

import pytest

from orbitmq.client.rebalance import (
    ByConfigStrategy,
    ConsistentHashStrategy,
    allocate_average,
    allocate_average_by_circle,
    allocate_consistent_hash,
    strategy_by_name,
)
from orbitmq.errors import ConfigError
from orbitmq.model.message import MessageQueue

QUEUES = [MessageQueue("T", broker, qid) for broker in ("broker-a", "broker-b") for qid in range(4)]
STRATEGIES = [allocate_average, allocate_average_by_circle, allocate_consistent_hash]


def split(strategy: object, queues: list[MessageQueue], cids: list[str]) -> dict[str, list[MessageQueue]]:
    return {cid: strategy("g", cid, queues, cids) for cid in cids}  # type: ignore[operator]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("members", [1, 2, 3, 5, 8, 11])
def test_rebalance_strategies_cover_every_queue_once(strategy: object, members: int) -> None:
    cids = [f"10.0.0.{i}@{i}" for i in range(members)]
    owned = split(strategy, QUEUES, cids)
    flat = [mq for queues in owned.values() for mq in queues]
    assert sorted(flat) == sorted(QUEUES)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_rebalance_strategies_ignore_input_order(strategy: object) -> None:
    cids = ["c1", "c2", "c3"]
    shuffled_queues = QUEUES[:]
    random.Random(7).shuffle(shuffled_queues)
    assert split(strategy, QUEUES, cids) == split(strategy, shuffled_queues, list(reversed(cids)))


def test_rebalance_average_gives_contiguous_blocks_extra_first() -> None:
    owned = split(allocate_average, QUEUES, ["a", "b", "c"])
    assert [len(owned[c]) for c in "abc"] == [3, 3, 2]
    assert owned["a"] == QUEUES[:3]
    assert owned["c"] == QUEUES[6:]


def test_rebalance_average_more_members_than_queues_leaves_some_idle() -> None:
    cids = [f"c{i}" for i in range(10)]
    owned = split(allocate_average, QUEUES, cids)
    assert sum(1 for queues in owned.values() if not queues) == 2


def test_rebalance_circle_round_robins() -> None:
    owned = split(allocate_average_by_circle, QUEUES, ["a", "b"])
    assert owned["a"] == QUEUES[0::2]


def test_rebalance_unknown_member_gets_nothing() -> None:
    for strategy in STRATEGIES:
        assert strategy("g", "stranger", QUEUES, ["a", "b"]) == []


def test_rebalance_consistent_hash_moves_few_queues_on_join() -> None:
    queues = [MessageQueue("T", "b", i) for i in range(64)]
    strategy = ConsistentHashStrategy(virtual_nodes=50)
    before = split(strategy, queues, ["a", "b", "c"])
    after = split(strategy, queues, ["a", "b", "c", "d"])
    moved = sum(1 for cid in "abc" for mq in before[cid] if mq not in after[cid])
    assert moved == len(after["d"])  # only queues taken by the newcomer move
    assert 0 < moved < 40


def test_rebalance_by_config_keeps_only_existing_configured_queues() -> None:
    strategy = ByConfigStrategy.of([QUEUES[1], MessageQueue("T", "gone", 0)])
    assert strategy("g", "anyone", QUEUES, ["x"]) == [QUEUES[1]]


def test_rebalance_strategy_by_name_rejects_unknown() -> None:
    assert strategy_by_name("circle") is allocate_average_by_circle
    with pytest.raises(ConfigError, match="avrage"):
        strategy_by_name("avrage")
