"""Long polling: the pure hold table, then the asyncio service (wake on arrival, expiry, stop)."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref

from orbitmq.broker.long_polling import LongPollingService, PullHoldTable


def test_hold_table_wake_returns_pulls_below_new_max() -> None:
    table: PullHoldTable[str] = PullHoldTable()
    table.park("T", 0, 5, 1000, "a")
    table.park("T", 0, 7, 1000, "b")
    table.park("T", 1, 5, 1000, "c")
    woken = table.wake("T", 0, 6)
    assert [parked.payload for parked in woken] == ["a"]
    assert len(table) == 2
    assert table.wake("T", 0, 6) == []


def test_hold_table_pop_expired_in_deadline_order() -> None:
    table: PullHoldTable[str] = PullHoldTable()
    table.park("T", 0, 0, 300, "late")
    table.park("T", 0, 0, 100, "early")
    assert [p.payload for p in table.pop_expired(99)] == []
    assert [p.payload for p in table.pop_expired(300)] == ["early", "late"]
    assert len(table) == 0
    assert table.parked_queues() == []


def test_hold_table_woken_pull_does_not_expire_later() -> None:
    table: PullHoldTable[str] = PullHoldTable()
    table.park("T", 0, 0, 100, "a")
    assert len(table.wake("T", 0, 1)) == 1
    assert table.pop_expired(1000) == []
    assert len(table) == 0


def test_hold_table_cancel_removes_entry_once() -> None:
    table: PullHoldTable[str] = PullHoldTable()
    parked = table.park("T", 0, 0, 100, "a")
    table.cancel(parked)
    table.cancel(parked)
    assert len(table) == 0
    assert table.wake("T", 0, 10) == []


async def test_long_polling_wakes_on_arrival_from_another_thread() -> None:
    max_offsets = {("T", 0): 0}
    service = LongPollingService(lambda topic, queue_id: max_offsets[(topic, queue_id)])
    await service.start()
    try:
        hold = asyncio.create_task(service.hold("T", 0, 0, 10_000))
        await asyncio.sleep(0.01)
        assert service.parked_count == 1
        started = time.monotonic()

        def arrive() -> None:
            max_offsets[("T", 0)] = 1
            service.on_arrival("T", 0, 1)

        threading.Thread(target=arrive).start()
        assert await asyncio.wait_for(hold, 2) is True
        assert time.monotonic() - started < 0.5
        assert service.parked_count == 0
    finally:
        await service.stop()


async def test_long_polling_expires_after_timeout() -> None:
    service = LongPollingService(lambda topic, queue_id: 0, check_interval_ms=10)
    await service.start()
    try:
        started = time.monotonic()
        assert await service.hold("T", 0, 0, 100) is False
        assert 0.09 <= time.monotonic() - started < 1.0
    finally:
        await service.stop()


async def test_long_polling_returns_at_once_when_message_already_there() -> None:
    service = LongPollingService(lambda topic, queue_id: 3)
    await service.start()
    try:
        assert await asyncio.wait_for(service.hold("T", 0, 2, 10_000), 1) is True
    finally:
        await service.stop()


async def test_long_polling_stop_releases_parked_pulls() -> None:
    service = LongPollingService(lambda topic, queue_id: 0)
    await service.start()
    hold = asyncio.create_task(service.hold("T", 0, 0, 60_000))
    await asyncio.sleep(0.01)
    await service.stop()
    assert await asyncio.wait_for(hold, 1) is False
    assert await service.hold("T", 0, 0, 60_000) is False


class _Woken:
    """A parked pull's callback, weakly referable so a test can see who still holds it."""

    def __init__(self) -> None:
        self.calls: list[bool] = []

    def __call__(self, arrived: bool) -> None:
        self.calls.append(arrived)


async def test_long_polling_park_calls_back_on_the_loop_in_the_arrivals_turn_and_lets_go() -> None:
    """A parked callback runs inside ``on_arrival`` on the loop (no turn later), once; then the
    service holds it no longer, although its deadline entry stays in the heap until it is due
    (it holds the pull's request and answer)."""
    service = LongPollingService(lambda topic, queue_id: 0)
    await service.start()
    try:
        woken, expired = _Woken(), _Woken()
        service.park("T", 0, 0, 60_000, woken)
        service.park("T", 1, 0, 10, expired)
        assert service.parked_count == 2
        service.on_arrival("T", 0, 1)
        assert woken.calls == [True]
        service.on_arrival("T", 0, 2)
        assert woken.calls == [True]
        await asyncio.sleep(0.3)
        assert expired.calls == [False]
        held = [weakref.ref(woken), weakref.ref(expired)]
        del woken, expired
        gc.collect()
        assert [ref() for ref in held] == [None, None]
    finally:
        await service.stop()


async def test_long_polling_park_calls_back_at_once_when_the_message_is_there_or_it_stopped() -> None:
    service = LongPollingService(lambda topic, queue_id: 3)
    await service.start()
    there = _Woken()
    service.park("T", 0, 2, 10_000, there)
    assert there.calls == [True] and service.parked_count == 0
    parked = _Woken()
    service.park("T", 0, 3, 60_000, parked)
    await service.stop()
    assert parked.calls == [False]
    late = _Woken()
    service.park("T", 0, 3, 60_000, late)
    assert late.calls == [False]
