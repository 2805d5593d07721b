"""QueueLockTable: lock, renew, expiry after 60 s and unlock by holder only."""

from __future__ import annotations

from orbitmq.broker.locks import QueueLockTable
from orbitmq.model.message import MessageQueue

Q0 = MessageQueue("T", "broker-a", 0)
Q1 = MessageQueue("T", "broker-a", 1)


def test_lock_table_grants_unlocked_queues() -> None:
    table = QueueLockTable()
    assert table.try_lock("G", "c1", [Q0, Q1], now_ms=0) == {Q0, Q1}
    assert table.holder("G", Q0, now_ms=1) == "c1"


def test_lock_table_refuses_queue_held_by_another_client() -> None:
    table = QueueLockTable()
    table.try_lock("G", "c1", [Q0], now_ms=0)
    assert table.try_lock("G", "c2", [Q0, Q1], now_ms=1000) == {Q1}


def test_lock_table_lock_expires_after_max_live_time() -> None:
    table = QueueLockTable(lock_expiry_ms=60_000)
    table.try_lock("G", "c1", [Q0], now_ms=0)
    assert table.try_lock("G", "c2", [Q0], now_ms=60_000) == set()
    assert table.try_lock("G", "c2", [Q0], now_ms=60_001) == {Q0}
    assert table.holder("G", Q0, now_ms=60_002) == "c2"


def test_lock_table_relock_renews() -> None:
    table = QueueLockTable(lock_expiry_ms=60_000)
    table.try_lock("G", "c1", [Q0], now_ms=0)
    table.try_lock("G", "c1", [Q0], now_ms=50_000)
    assert table.try_lock("G", "c2", [Q0], now_ms=100_000) == set()


def test_lock_table_unlock_only_by_holder() -> None:
    table = QueueLockTable()
    table.try_lock("G", "c1", [Q0], now_ms=0)
    table.unlock("G", "c2", [Q0])
    assert table.holder("G", Q0, now_ms=1) == "c1"
    table.unlock("G", "c1", [Q0])
    assert table.holder("G", Q0, now_ms=1) is None


def test_lock_table_groups_are_independent() -> None:
    table = QueueLockTable()
    table.try_lock("G1", "c1", [Q0], now_ms=0)
    assert table.try_lock("G2", "c2", [Q0], now_ms=0) == {Q0}
