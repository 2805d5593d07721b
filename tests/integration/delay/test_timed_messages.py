"""Timed messages (TIMER_DELIVER_MS and friends) against broker processes, across restarts.

Method: broker subprocesses on 127.0.0.1 (free ports, tmp dirs, killed in teardown) with
100 ms wheel slots; messages with due times spread over the next seconds are sent and pulled
with raw commands. Lateness = delivered store time - due time: never negative, and small when
the broker runs throughout.
"""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.transport.connection import RemotingClient
from tests.integration.delay.raw_commands import now_ms, pull_all, pull_until, send
from tests.support.processes import ServerProcess, start_broker

pytestmark = pytest.mark.integration

CONF = {"timerPrecisionMs": 100, "timerFlushIntervalMs": 100, "flushConsumerOffsetInterval": 100}


@pytest.fixture
def processes() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    try:
        yield started
    finally:
        for proc in reversed(started):
            proc.kill()


async def test_timed_arbitrary_times_are_on_time(tmp_path: Path, processes: list[ServerProcess]) -> None:
    broker = start_broker(tmp_path, None, **CONF)
    processes.append(broker)
    client = RemotingClient()
    rng = random.Random(7)
    try:
        base = now_ms()
        dues = [base + rng.randrange(1_000, 2_850) for _ in range(40)]
        for index, due in enumerate(dues):
            await send(client, broker.addr, "TimedAny", b"%d" % index, {"TIMER_DELIVER_MS": str(due)})
        # Every message reached the broker before it was due, so lateness measures the wheel,
        # not a send that came after its due time.
        assert now_ms() < min(dues), "the sends took longer than a second"
        delivered = await pull_until(client, broker.addr, "TimedAny", 40, 10)
        lateness = sorted(message.store_timestamp - dues[int(message.body)] for message in delivered)
        assert len(delivered) == 40
        assert lateness[0] >= 0, lateness
        assert lateness[-1] < 100, lateness
        # Delivery follows due order, whatever the send order was.
        order = [dues[int(message.body)] for message in delivered]
        assert order == sorted(order)
    finally:
        await client.close()


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_timed_survive_broker_restart(
    tmp_path: Path, processes: list[ServerProcess], stop_signal: signal.Signals
) -> None:
    broker = start_broker(tmp_path, None, **CONF)
    processes.append(broker)
    client = RemotingClient()
    try:
        base = now_ms()
        dues = [base + 600 + index * 60 for index in range(40)]  # 0.6 s .. 3.0 s ahead
        for index, due in enumerate(dues):
            await send(client, broker.addr, "TimedRestart", b"%d" % index, {"TIMER_DELIVER_MS": str(due)})
        await asyncio.sleep(max(0, base + 1_000 - now_ms()) / 1000)  # some delivered, most pending
        before = len(await pull_all(client, broker.addr, "TimedRestart"))
        assert 0 < before < 40
        await client.close()
        assert broker.proc is not None
        broker.proc.send_signal(stop_signal)
        broker.proc.wait(15)
        client = RemotingClient()
        broker = start_broker(tmp_path, None, **CONF)
        processes.append(broker)
        await pull_until(client, broker.addr, "TimedRestart", 40, 10)
        await asyncio.sleep(0.3)
        delivered = await pull_all(client, broker.addr, "TimedRestart")
        bodies = [int(message.body) for message in delivered]
        assert set(bodies) == set(range(40))  # nothing lost
        if stop_signal == signal.SIGTERM:
            assert len(bodies) == 40  # nothing twice after a clean stop
        for message in delivered:
            assert message.store_timestamp >= dues[int(message.body)]  # never early
    finally:
        await client.close()
