"""Delay levels against broker processes: every level on time, restarts, and the C++ producer.

Method: broker subprocesses on 127.0.0.1 (free ports, tmp dirs, killed in teardown) with
shortened levels; messages are sent and pulled with raw commands. The held copy (found by the
send response's offsetMsgId) gives the schedule store time, so lateness = delivered store time
- (held store time + level delay); it must never be negative.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.model.message import MessageConst
from orbitmq.transport.connection import RemotingClient
from tests.integration.conftest import CppClient
from tests.integration.delay.raw_commands import pull_all, pull_until, send, view
from tests.support.processes import ServerProcess, start_broker, start_standalone, write_conf

pytestmark = pytest.mark.integration

ALL_LEVELS_MS = [100 * level for level in range(1, 19)]


@pytest.fixture
def processes() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    try:
        yield started
    finally:
        for proc in reversed(started):
            proc.kill()


def levels_conf(levels_ms: list[int]) -> str:
    return " ".join(f"{ms}ms" for ms in levels_ms)


async def test_delay_every_level_is_on_time(tmp_path: Path, processes: list[ServerProcess]) -> None:
    broker = start_broker(tmp_path, None, messageDelayLevel=levels_conf(ALL_LEVELS_MS))
    processes.append(broker)
    client = RemotingClient()
    try:
        held_offsets = {}
        for level in range(1, 19):
            held_offsets[level] = await send(
                client, broker.addr, "DelayAll", b"%d" % level, {"DELAY": str(level)}
            )
        delivered = await pull_until(client, broker.addr, "DelayAll", 18, 10)
        assert len(delivered) == 18
        by_level = {int(message.body): message for message in delivered}
        lateness = []
        for level, offset in held_offsets.items():
            held = await view(client, broker.addr, offset)
            assert held.topic == "SCHEDULE_TOPIC_XXXX" and held.queue_id == level - 1
            message = by_level[level]
            assert MessageConst.DELAY_TIME_LEVEL not in message.properties
            assert message.uniq_key == held.uniq_key
            lateness.append(message.store_timestamp - held.store_timestamp - ALL_LEVELS_MS[level - 1])
        assert min(lateness) >= 0, lateness
        assert max(lateness) < 100, lateness
    finally:
        await client.close()


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_delay_survives_broker_restart(
    tmp_path: Path, processes: list[ServerProcess], stop_signal: signal.Signals
) -> None:
    # Level 2 is due well after level 1, so that "level 1 delivered, levels 2 and 3 not" holds
    # for a while even when the 30 sends themselves take a second on a busy machine.
    levels_ms = [600, 3000, 3600]
    # Topics auto-created by a send are persisted by the table service: make it prompt, so
    # that a SIGKILL soon after the first send does not forget the topic.
    conf = {
        "messageDelayLevel": levels_conf(levels_ms),
        "flushDelayOffsetInterval": 100,
        "flushConsumerOffsetInterval": 100,
    }
    broker = start_broker(tmp_path, None, **conf)
    processes.append(broker)
    client = RemotingClient()
    try:
        held_offsets = []
        for index in range(30):
            level = index % 3 + 1
            held_offsets.append(
                await send(client, broker.addr, "DelayRestart", b"%d" % index, {"DELAY": str(level)})
            )
        held = [await view(client, broker.addr, offset) for offset in held_offsets]
        await asyncio.sleep(0.9)  # level 1 has been delivered, levels 2 and 3 wait
        before = len(await pull_all(client, broker.addr, "DelayRestart"))
        assert before == 10
        await client.close()
        assert broker.proc is not None
        broker.proc.send_signal(stop_signal)
        broker.proc.wait(15)
        client = RemotingClient()
        broker = start_broker(tmp_path, None, **conf)
        processes.append(broker)
        delivered = await pull_until(client, broker.addr, "DelayRestart", 30, 10)
        await asyncio.sleep(0.3)
        delivered = await pull_all(client, broker.addr, "DelayRestart")
        keys = [message.uniq_key for message in delivered]
        assert set(keys) == {message.uniq_key for message in held}  # nothing lost
        if stop_signal == signal.SIGTERM:
            assert len(keys) == 30  # nothing twice after a clean stop
        else:
            assert len(keys) - 30 <= 10  # at most what was in flight since the last progress write
        due = {
            message.uniq_key: message.store_timestamp + levels_ms[int(message.body) % 3] for message in held
        }
        assert all(message.store_timestamp >= due[message.uniq_key] for message in delivered)
    finally:
        await client.close()


def test_delay_level_from_cpp_producer(tmp_path: Path, cpp: CppClient) -> None:
    conf = write_conf(tmp_path / "delay.conf", {"messageDelayLevel": "300ms 1500ms 2s"})
    standalone = start_standalone(tmp_path, "-c", str(conf))
    try:
        broker_addr = f"127.0.0.1:{standalone.extra_ports[0]}"
        started_ms = time.time() * 1000
        sent = cpp.produce(standalone.addr, "DelayCpp", "--delay-level", "2", "--count", "4")
        assert {event["status"] for event in sent} == {"OK"}
        delivered, held = asyncio.run(_collect_cpp(broker_addr))
        assert len(delivered) == 4
        held_by_key = {message.uniq_key: message for message in held}
        for message in delivered:
            source = held_by_key[message.uniq_key]
            assert message.store_timestamp - source.store_timestamp >= 1500
            assert message.properties["origin"] == "cpp"
            assert message.store_timestamp >= started_ms + 1500
    finally:
        standalone.kill()


async def _collect_cpp(broker_addr: str) -> tuple[list, list]:  # type: ignore[type-arg]
    client = RemotingClient()
    try:
        held = await pull_all(client, broker_addr, "SCHEDULE_TOPIC_XXXX", 1)
        delivered = []
        for queue_id in range(8):
            delivered += await pull_all(client, broker_addr, "DelayCpp", queue_id)
        deadline = time.monotonic() + 10
        while len(delivered) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            delivered = []
            for queue_id in range(8):
                delivered += await pull_all(client, broker_addr, "DelayCpp", queue_id)
        return delivered, held
    finally:
        await client.close()
