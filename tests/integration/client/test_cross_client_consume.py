"""The RocketMQ C++ client (rocketmq==0.4.4) produces; the OrbitMQ push and pull consumers read it.

Tags, keys, user properties and bodies must arrive intact; the body pattern is not ASCII.
"""

from __future__ import annotations

import asyncio

import pytest

from orbitmq.client.blocking import BlockingPullConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from tests.integration.client.test_push_consumer import (
    Collector,
    broker_addr,
    consumer,
    make_topic,
    wait_until,
)
from tests.integration.conftest import CppClient
from tests.support.cpp_client import body_for
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.integration


async def test_cross_client_cpp_producer_to_push_consumer(standalone: ServerProcess, cpp: CppClient) -> None:
    await make_topic(broker_addr(standalone), "CppToOrbit", queues=4)
    sent = await asyncio.to_thread(
        cpp.produce, standalone.addr, "CppToOrbit", "--count", "30", "--tags", "TagX", "--size", "48"
    )
    assert len(sent) == 30
    collector = Collector()
    c = consumer(standalone.addr, "g-cross", collector)
    c.subscribe("CppToOrbit", "TagX")
    await c.start()
    try:
        await wait_until(lambda: len({m.properties["seq"] for m in collector.messages}) == 30)
    finally:
        await c.shutdown()
    by_seq = {int(m.properties["seq"]): m for m in collector.messages}
    for seq, message in by_seq.items():
        assert message.body == body_for(seq, 48)
        assert message.tags == "TagX"
        assert message.keys == [f"key-{seq}", f"k{seq % 3}"]
        assert message.properties["origin"] == "cpp"
        assert message.topic == "CppToOrbit"
    assert {m.msg_id for m in by_seq.values()} == {str(event["msg_id"]) for event in sent}


def test_cross_client_cpp_producer_to_blocking_pull_consumer(
    standalone: ServerProcess, cpp: CppClient
) -> None:
    asyncio.run(make_topic(broker_addr(standalone), "CppToPull", queues=2))
    cpp.produce(standalone.addr, "CppToPull", "--count", "10", "--tags", "TagY")
    puller = BlockingPullConsumer(
        "g-cross-pull", standalone.addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    puller.start()
    try:
        puller.subscribe("CppToPull", "TagY")
        got = []
        for _ in range(50):
            got += puller.poll(200)
            if len(got) >= 10:
                break
        queues = puller.fetch_message_queues("CppToPull")
        ranged = [m for mq in queues for batch in puller.pull_range(mq, 0, 100) for m in batch]
    finally:
        puller.shutdown()
    assert sorted(int(m.properties["seq"]) for m in got) == list(range(10))
    assert sorted(int(m.properties["seq"]) for m in ranged) == list(range(10))
