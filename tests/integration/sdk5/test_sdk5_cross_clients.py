"""One message world: the 5.x SDK (gRPC), the C++ 4.x client and OrbitMQ's client (remoting) read each other.

Goal: a message sent by any of the three reaches the others byte for byte, with its tag, keys,
message id and user properties (grpc-v5-protocol §4.2). Method: the SDK sends to one topic,
the C++ push consumer and OrbitMQ's pull consumer read it; the C++ client and OrbitMQ's
producer send to another topic, the SDK's SimpleConsumer reads it. Bodies use the drivers'
shared non-ASCII pattern.
"""

from __future__ import annotations

import asyncio

from orbitmq.client import Message, Producer
from orbitmq.client.blocking import BlockingPullConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from tests.integration.conftest import CppClient
from tests.integration.sdk5.conftest import broker_addr
from tests.support.cpp_client import body_for
from tests.support.processes import ServerProcess, create_topic
from tests.support.sdk5 import Event, Sdk5


def of_kind(events: list[Event], kind: str) -> list[Event]:
    return [event for event in events if event["event"] == kind]


def test_sdk5_messages_reach_cpp_and_orbitmq_consumers_intact(
    sdk5: Sdk5, cpp: CppClient, grpc_standalone: ServerProcess
) -> None:
    topic = "Sdk5ToRemoting"
    create_topic(broker_addr(grpc_standalone), topic, 2)
    sent = {int(e["seq"]): e for e in sdk5.run("produce", "--topic", topic, "--count", "3", "--tag", "TagS")}  # type: ignore[call-overload]
    cpp_consumer = cpp.start_consumer(grpc_standalone.addr, topic, "CG_CPP_FROM_SDK5")
    events = cpp_consumer.wait_for(lambda ev: len([e for e in ev if e["event"] == "received"]) >= 3, 60)
    cpp_consumer.stop()
    by_seq = {int(e["props"]["seq"]): e for e in events if e["event"] == "received"}  # type: ignore[index, call-overload]
    assert sorted(by_seq) == [0, 1, 2]
    for seq, event in by_seq.items():
        assert event["body_hex"] == body_for(seq, 64).hex()
        assert event["tags"] == "TagS" and event["keys"] == f"key-{seq}"
        assert event["props"] == {
            "seq": str(seq), "origin": "sdk5", "UNIQ_KEY": sent[seq]["message_id"], "TAGS": "TagS", "KEYS": f"key-{seq}",
        }  # fmt: skip
        assert event["msg_id"] == sent[seq]["message_id"]
    puller = BlockingPullConsumer(
        "CG_ORBIT_FROM_SDK5",
        grpc_standalone.addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    puller.start()
    try:
        puller.subscribe(topic, "*")
        pulled = []
        for _ in range(50):
            pulled.extend(puller.poll(timeout_ms=500))
            if len(pulled) >= 3:
                break
    finally:
        puller.shutdown()
    assert len(pulled) == 3
    for message in pulled:
        seq = int(message.properties["seq"])
        assert message.body == body_for(seq, 64) and message.tags == "TagS" and message.keys == [f"key-{seq}"]
        assert message.uniq_key == sent[seq]["message_id"] and message.properties["origin"] == "sdk5"
        assert message.properties["__BORNHOST"]  # the 5.x client's address, kept for 5.x readers


def test_cpp_and_orbitmq_messages_reach_the_sdk5_consumer_intact(
    sdk5: Sdk5, cpp: CppClient, grpc_standalone: ServerProcess
) -> None:
    topic = "RemotingToSdk5"
    create_topic(broker_addr(grpc_standalone), topic, 2)
    cpp_sent = cpp.produce(grpc_standalone.addr, topic, "--count", "3", "--tags", "TagC")
    orbit_ids = asyncio.run(_orbitmq_send(grpc_standalone.addr, topic))
    events = sdk5.run("simple", "--topic", topic, "--group", "CG_SDK5_FROM_REMOTING", "--count", "6",
                      "--max-wait-s", "30")  # fmt: skip
    received = {int(e["seq"]): e for e in of_kind(events, "received")}  # type: ignore[call-overload]
    assert sorted(received) == [0, 1, 2, 10, 11, 12]
    for seq in (0, 1, 2):
        event = received[seq]
        assert event["body_hex"] == body_for(seq, 64).hex() and event["tag"] == "TagC"
        assert event["keys"] == sorted([f"key-{seq}", f"k{seq % 3}"])
        assert event["props"] == {"seq": str(seq), "origin": "cpp"}
        assert event["message_id"] == cpp_sent[seq]["msg_id"] and event["attempt"] == 1
    for seq in (10, 11, 12):
        event = received[seq]
        assert event["body_hex"] == body_for(seq, 64).hex() and event["tag"] == "TagO"
        assert event["keys"] == [f"key-{seq}"] and event["props"] == {"seq": str(seq), "origin": "orbitmq"}
        assert event["message_id"] == orbit_ids[seq]
    assert not any(event["corrupted"] for event in received.values())


async def _orbitmq_send(namesrv: str, topic: str) -> dict[int, str]:
    ids: dict[int, str] = {}
    async with Producer("PG_ORBIT_TO_SDK5", namesrv) as producer:
        for seq in (10, 11, 12):
            message = Message(topic, body_for(seq, 64))
            message.tags = "TagO"
            message.keys = [f"key-{seq}"]
            message.properties.update({"seq": str(seq), "origin": "orbitmq"})
            result = await producer.send(message)
            ids[seq] = result.msg_id
    return ids
