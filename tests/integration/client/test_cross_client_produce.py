"""OrbitMQ producer -> RocketMQ C++ push consumer (rocketmq==0.4.4): what the Python client
sends (tags, keys, user properties, UNIQ_KEY, compressed and batched bodies) arrives intact."""

from __future__ import annotations

import pytest

from orbitmq.client import Producer
from orbitmq.model.message import Message
from tests.integration.client.test_producer import create_topic
from tests.integration.conftest import CppClient
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.integration


async def test_cross_client_produce_reaches_cpp_push_consumer(
    standalone: ServerProcess, cpp: CppClient
) -> None:
    await create_topic(standalone.addr, "CrossTopic", 2)
    consumer = cpp.start_consumer(standalone.addr, "CrossTopic", "CG_CROSS")
    sent: dict[str, Message] = {}
    async with Producer("PG_CROSS", standalone.addr) as producer:
        for seq in range(6):
            # The C++ binding reads bodies as C strings, so bodies hold no NUL byte.
            body = (b"small-%d" % seq) if seq % 2 else (b"large-%d-" % seq) * 700
            message = Message("CrossTopic", body, properties={"seq": str(seq), "origin": "orbitmq"})
            message.tags = f"Tag{seq % 3}"
            message.keys = [f"key-{seq}", "shared"]
            result = await producer.send(message)
            sent[result.msg_id] = message
        batch = [Message("CrossTopic", b"batch-%d" % i, properties={"seq": str(100 + i)}) for i in range(4)]
        for result, message in zip(await producer.send_batch(batch), batch, strict=True):
            sent[result.msg_id] = message
    events = consumer.wait_for(lambda evs: len([e for e in evs if e["event"] == "received"]) >= len(sent), 60)
    received = {str(e["msg_id"]): e for e in events if e["event"] == "received"}
    assert set(received) == set(sent)
    for msg_id, message in sent.items():
        event = received[msg_id]
        props = event["props"]
        assert isinstance(props, dict)
        assert bytes.fromhex(str(event["body_hex"])) == message.body
        assert props["seq"] == message.properties["seq"] and props["UNIQ_KEY"] == msg_id
        if message.tags:
            assert event["tags"] == message.tags and event["keys"] == f"key-{props['seq']} shared"
            assert props["origin"] == "orbitmq"
    consumer.stop()
