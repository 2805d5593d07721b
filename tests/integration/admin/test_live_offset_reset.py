"""Live offset reset by time: online consumers move back without a restart, offline groups too.

Method: 20 messages are stored, 10 "old" then 10 "new" after a remembered instant. A running
OrbitMQ push consumer and a running C++ push consumer (``rocketmq==0.4.4``) each consume all
20, then the admin resets both groups to that instant (INVOKE_BROKER_TO_RESET_OFFSET). Without
being restarted, each must receive the 10 "new" messages a second time, and no "old" one. A
third group consumes everything, shuts down, is reset while offline, and on its next start
receives exactly the 10 "new" messages. A second run, on a broker that only tells consumers
(``useServerSideResetOffset=false``, RocketMQ 4's way), shows the C++ consumer moving on the
array-form RESET_CONSUMER_CLIENT_OFFSET alone.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest

from orbitmq.client import AdminClient, ConsumeResult, Message, Producer, PushConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import MessageExt
from tests.integration.conftest import CppClient
from tests.support.processes import ServerProcess, create_topic, start_standalone, write_conf

pytestmark = pytest.mark.integration

TOPIC = "ResetLive"


async def _produce(namesrv: str) -> int:
    """10 old and 10 new messages; returns the instant between them (ms)."""
    async with Producer("PG_RESET_LIVE", namesrv) as producer:
        for index in range(10):
            message = Message(TOPIC, f"old-{index}".encode())
            message.properties["seq"] = str(index)
            await producer.send(message)
        await asyncio.sleep(0.2)
        middle_ms = int(time.time() * 1000)
        await asyncio.sleep(0.2)
        for index in range(10, 20):
            message = Message(TOPIC, f"new-{index}".encode())
            message.properties["seq"] = str(index)
            await producer.send(message)
    return middle_ms


async def _wait(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _consumer(group: str, namesrv: str, seen: list[str]) -> PushConsumer:
    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        seen.extend(m.body.decode() for m in messages)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        group, namesrv, listener, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC, "*")
    return consumer


async def test_reset_moves_running_orbitmq_and_cpp_consumers_and_an_offline_group(
    standalone: ServerProcess, cpp: CppClient
) -> None:
    await asyncio.to_thread(create_topic, f"127.0.0.1:{standalone.extra_ports[0]}", TOPIC, 2)
    middle_ms = await _produce(standalone.addr)
    python_seen: list[str] = []
    offline_seen: list[str] = []
    online = _consumer("CG_RESET_PY", standalone.addr, python_seen)
    offline = _consumer("CG_RESET_OFF", standalone.addr, offline_seen)
    await online.start()
    await offline.start()
    cpp_consumer = await asyncio.to_thread(cpp.start_consumer, standalone.addr, TOPIC, "CG_RESET_CPP")
    try:
        await _wait(lambda: len(python_seen) >= 20 and len(offline_seen) >= 20, 30, "first deliveries")
        await asyncio.to_thread(
            cpp_consumer.wait_for, lambda events: sum(e["event"] == "received" for e in events) >= 20, 60
        )
        await offline.shutdown()
        async with AdminClient(standalone.addr) as admin:
            for group in ("CG_RESET_PY", "CG_RESET_CPP", "CG_RESET_OFF"):
                offsets = await admin.reset_offset_by_time(group, TOPIC, middle_ms)
                assert sum(offsets.values()) == 10, (group, offsets)  # each queue back to its first new
        await _wait(lambda: len(python_seen) >= 30, 30, "the OrbitMQ consumer to re-consume")
        await asyncio.to_thread(
            cpp_consumer.wait_for, lambda events: sum(e["event"] == "received" for e in events) >= 30, 60
        )
        again = _consumer("CG_RESET_OFF", standalone.addr, offline_seen)
        await again.start()
        try:
            await _wait(lambda: len(offline_seen) >= 30, 30, "the offline group to start from the reset")
            await asyncio.sleep(1.0)  # anything more would arrive now
        finally:
            await again.shutdown()
    finally:
        await online.shutdown()
        cpp_consumer.stop()
    new = Counter(f"new-{index}" for index in range(10, 20))
    assert Counter(python_seen[20:]) == new
    cpp_bodies = [bytes.fromhex(str(event["body_hex"])).decode() for event in cpp_consumer.received()]
    assert Counter(cpp_bodies[20:]) == new
    assert Counter(offline_seen[20:]) == new


async def test_reset_moves_cpp_consumer_through_reset_consumer_client_offset_alone(
    tmp_path: Path, cpp: CppClient
) -> None:
    # The C++ client applies a reset only once its in-flight pull returns; short polling (1 s)
    # keeps that wait short (with long polling it is the 15 s the client asks the broker to hold).
    conf = write_conf(
        tmp_path / "broker.conf", {"useServerSideResetOffset": False, "longPollingEnable": False}
    )
    server = await asyncio.to_thread(start_standalone, tmp_path, "-c", str(conf))
    try:
        await asyncio.to_thread(create_topic, f"127.0.0.1:{server.extra_ports[0]}", TOPIC, 2)
        middle_ms = await _produce(server.addr)
        consumer = await asyncio.to_thread(cpp.start_consumer, server.addr, TOPIC, "CG_RESET_CPP4")
        try:
            await asyncio.to_thread(
                consumer.wait_for, lambda events: sum(e["event"] == "received" for e in events) >= 20, 60
            )
            async with AdminClient(server.addr) as admin:
                await admin.reset_offset_by_time("CG_RESET_CPP4", TOPIC, middle_ms)
            await asyncio.to_thread(
                consumer.wait_for, lambda events: sum(e["event"] == "received" for e in events) >= 30, 60
            )
        finally:
            consumer.stop()
        bodies = [bytes.fromhex(str(event["body_hex"])).decode() for event in consumer.received()]
        assert Counter(bodies[20:]) == Counter(f"new-{index}" for index in range(10, 20))
    finally:
        server.kill()
