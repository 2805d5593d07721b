"""Messages cross clients byte for byte: Apache's Java client writes, and Apache's Go client,
the C++ client (PyPI ``rocketmq``) and OrbitMQ's own client read; and the other way round.

A body is ``body_for(seq, 64)`` here: the C++ client passes bodies as C strings (no NUL, which
``body_for`` never makes) and its driver sends one size.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from orbitmq.client import Message, Producer, PullConsumer
from orbitmq.model.message import MessageExt
from tests.integration.conftest import CppClient
from tests.interop.messages import Expected, body_for, check_exactly, check_message, expected, received
from tests.interop.test_go_client import drive_go
from tests.interop.test_remoting_client import done, drive
from tests.support.interop_go import go_available
from tests.support.interop_java import Event, JavaLine
from tests.support.processes import ServerProcess

COUNT = 1000
SIZE = 64


@pytest.fixture
def java(remoting5: JavaLine) -> JavaLine:
    return remoting5


def as_event(message: MessageExt) -> Event:
    return {
        "event": "received",
        "topic": message.topic,
        "tags": message.tags,
        "keys": message.properties.get("KEYS"),
        "body_hex": message.body.hex(),
        "props": dict(message.properties),
    }


async def orbitmq_read(namesrv: str, topic: str, group: str, count: int) -> list[Event]:
    consumer = PullConsumer(group, namesrv, auto_commit=False)
    await consumer.start()
    got: list[Event] = []
    try:
        queues = await consumer.fetch_message_queues(topic)
        consumer.assign(queues)
        for mq in queues:
            await consumer.seek_to_begin(mq)
        for _ in range(300):
            got.extend(as_event(message) for message in await consumer.poll(200))
            if len(got) >= count:
                break
    finally:
        await consumer.shutdown()
    return got


async def orbitmq_write(namesrv: str, topic: str, count: int) -> None:
    async with Producer("orbitmq-cross-pg", namesrv) as producer:
        for first in range(0, count, 100):
            batch = []
            for seq in range(first, min(first + 100, count)):
                want = expected(seq, origin="orbitmq", size=SIZE)
                message = Message(topic, want.body, properties=dict(want.properties))
                message.tags = want.tags
                message.keys = want.keys.split(" ")
                batch.append(message)
            await producer.send_batch(batch)


def test_java_messages_are_read_by_go_cpp_and_orbitmq_clients(
    java: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    topic = "cross-from-java"
    events = drive(
        java,
        tmp_path,
        server,
        [
            "produce",
            "--topic",
            topic,
            "--mode",
            "batch",
            "--count",
            str(COUNT),
            "--tags",
            "cycle",
            "--size",
            str(SIZE),
        ],
    )
    assert len([e for e in events if e.get("event") == "sent"]) == COUNT
    seqs = range(COUNT)
    check_exactly(asyncio.run(orbitmq_read(server.addr, topic, "cross-orbitmq-g", COUNT)), seqs, size=SIZE)
    if not go_available():
        go_events = drive_go(
            tmp_path, server, ["push", "--topic", topic, "--group", "cross-go-g", "--expect", str(COUNT)]
        )
        done(go_events)
        check_exactly(received(go_events), seqs, size=SIZE)
    cpp = CppClient(tmp_path / "cpp-home")
    try:
        consumer = cpp.start_consumer(server.addr, topic, "cross-cpp-g")
        consumer.wait_for(lambda events: sum(e["event"] == "received" for e in events) >= COUNT, 90)
        check_exactly(consumer.received(), seqs, size=SIZE)
    finally:
        cpp.kill_all()


def test_go_cpp_and_orbitmq_messages_are_read_by_the_java_client(
    java: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    sources = ["orbitmq", "cpp"] + ([] if go_available() else ["go"])
    asyncio.run(orbitmq_write(server.addr, "cross-to-java-orbitmq", COUNT))
    cpp = CppClient(tmp_path / "cpp-home")
    sent = cpp.produce(
        server.addr, "cross-to-java-cpp", "--count", str(COUNT), "--size", str(SIZE), "--tags", "TagC"
    )
    assert len(sent) == COUNT
    if "go" in sources:
        drive_go(
            tmp_path,
            server,
            [
                "produce",
                "--topic",
                "cross-to-java-go",
                "--mode",
                "batch",
                "--count",
                str(COUNT),
                "--tags",
                "cycle",
                "--size",
                str(SIZE),
            ],
        )
    steps = [
        [
            "push",
            "--topic",
            f"cross-to-java-{source}",
            "--group",
            f"cross-java-{source}-g",
            "--expect",
            str(COUNT),
            "--instance",
            source,
        ]
        for source in sources
    ]
    events = drive(java, tmp_path, server, *steps)
    for source in sources:
        got = received(events, f"{source}-0")
        if source == "cpp":
            # The C++ driver's messages: its own tag and properties (seq, origin), the same body and keys.
            assert len(got) == COUNT
            for event in got:
                seq = int(event["props"]["seq"])  # type: ignore[index]
                want = Expected(
                    seq,
                    body_for(seq, SIZE),
                    "TagC",
                    f"key-{seq} k{seq % 3}",
                    {"seq": str(seq), "origin": "cpp"},
                )
                check_message(event, want)
            assert {int(e["props"]["seq"]) for e in got} == set(range(COUNT))  # type: ignore[index]
        else:
            check_exactly(got, range(COUNT), origin=source, size=SIZE)
