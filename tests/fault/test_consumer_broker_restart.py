"""A push consumer survives one of two brokers being SIGKILLed and restarted.

Method: a topic on broker-a and broker-b; the consumer reads a first round; broker-b is killed
(its connection drops while pulls are parked on it) and a second round goes to broker-a only;
broker-b restarts on the same port and data directory and gets a third round. Every message
of every round must arrive (duplicates are allowed: broker-b's last offset commits may be lost).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from orbitmq.client.push_consumer import PushConsumer
from tests.integration.client.test_push_consumer import Collector, make_topic, produce_raw, wait_until
from tests.support.processes import start_broker, start_namesrv

pytestmark = pytest.mark.fault


async def test_consumer_resumes_after_broker_kill_and_restart(tmp_path: Path) -> None:
    namesrv = start_namesrv(tmp_path)
    brokers = []
    try:
        for name in ("broker-a", "broker-b"):
            brokers.append(start_broker(tmp_path, namesrv.addr, name=name))
        for broker in brokers:
            await make_topic(broker.addr, "Survive", queues=2)
        await asyncio.sleep(1.0)  # let both brokers register the topic with the name server
        collector = Collector()
        consumer = PushConsumer(
            "g-survive",
            namesrv.addr,
            collector,
            persist_consumer_offset_interval_ms=300,
            poll_name_server_interval_ms=500,
        )
        consumer.subscribe("Survive")
        await consumer.start()
        try:
            first = [f"one-{i}".encode() for i in range(40)]
            for broker in brokers:
                await produce_raw(broker.addr, "Survive", first)
            await wait_until(lambda: set(first) <= collector.bodies())
            brokers[1].kill()
            second = [f"two-{i}".encode() for i in range(40)]
            await produce_raw(brokers[0].addr, "Survive", second)
            await wait_until(lambda: set(second) <= collector.bodies())
            brokers[1].start()
            third = [f"three-{i}".encode() for i in range(40)]
            await produce_raw(brokers[1].addr, "Survive", third)
            await wait_until(lambda: set(third) <= collector.bodies(), 30)
        finally:
            await consumer.shutdown()
    finally:
        for proc in [*brokers, namesrv]:
            proc.kill()
    assert collector.bodies() == set(first) | set(second) | set(third)
