"""PullConsumer against a real standalone broker: assign, poll, seek, commit, pull_range, subscribe."""

from __future__ import annotations

import time

import pytest

from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.errors import ClientStateError
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import MessageExt
from tests.integration.client.test_push_consumer import broker_addr, make_topic, produce_raw
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.integration


async def poll_until(consumer: PullConsumer, count: int, timeout_s: float = 10.0) -> list[MessageExt]:
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got += await consumer.poll(200)
    return got


async def test_pull_consumer_assign_poll_seek_commit(standalone: ServerProcess) -> None:
    addr = broker_addr(standalone)
    await make_topic(addr, "PullT", queues=2)
    await produce_raw(addr, "PullT", [f"p{i}".encode() for i in range(100)], queue_id=0)
    consumer = PullConsumer(
        "g-pull",
        standalone.addr,
        auto_commit=False,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    await consumer.start()
    try:
        queues = await consumer.fetch_message_queues("PullT")
        assert [mq.queue_id for mq in queues] == [0, 1]
        mq = queues[0]
        consumer.assign([mq])
        got = await poll_until(consumer, 100)
        assert [m.queue_offset for m in got] == list(range(100))
        assert got[5].body == b"p5" and got[5].topic == "PullT" and got[5].msg_id
        assert await consumer.committed(mq) in (None, 0)
        await consumer.commit_sync()
        assert await consumer.committed(mq) == 100
        consumer.seek(mq, 90)
        again = await poll_until(consumer, 10)
        assert [m.queue_offset for m in again] == list(range(90, 100))
        await consumer.seek_to_begin(mq)
        assert (await poll_until(consumer, 100))[0].queue_offset == 0
        await consumer.seek_to_end(mq)
        assert await consumer.poll(100) == []
        assert await consumer.offset_for_timestamp(mq, 0) == 0
        with pytest.raises(ClientStateError):
            consumer.seek(queues[1], 0)
    finally:
        await consumer.shutdown()


async def test_pull_consumer_pull_range_reads_exact_range(standalone: ServerProcess) -> None:
    addr = broker_addr(standalone)
    await make_topic(addr, "RangeT", queues=1)
    await produce_raw(addr, "RangeT", [f"r{i}".encode() for i in range(300)])
    consumer = PullConsumer("g-range", standalone.addr)
    await consumer.start()
    try:
        mq = (await consumer.fetch_message_queues("RangeT"))[0]
        offsets = []
        async for batch in consumer.pull_range(mq, 17, 250, max_msg_nums=64):
            offsets += [m.queue_offset for m in batch]
        assert offsets == list(range(17, 250))
        tail = []
        async for batch in consumer.pull_range(mq, 290, 400):
            tail += [m.queue_offset for m in batch]
        assert tail == list(range(290, 300))
    finally:
        await consumer.shutdown()


async def test_pull_consumer_subscribe_auto_commit_resumes(standalone: ServerProcess) -> None:
    addr = broker_addr(standalone)
    await make_topic(addr, "SubT", queues=4)
    await produce_raw(addr, "SubT", [f"s{i}".encode() for i in range(80)])
    consumer = PullConsumer(
        "g-sub", standalone.addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    await consumer.subscribe("SubT")
    await consumer.start()
    try:
        got = await poll_until(consumer, 80)
        assert {m.body for m in got} == {f"s{i}".encode() for i in range(80)}
    finally:
        await consumer.shutdown()
    await produce_raw(addr, "SubT", [f"t{i}".encode() for i in range(20)])
    consumer = PullConsumer("g-sub", standalone.addr)
    await consumer.subscribe("SubT")
    await consumer.start()
    try:
        got = await poll_until(consumer, 20)
        assert {m.body for m in got} == {f"t{i}".encode() for i in range(20)}
    finally:
        await consumer.shutdown()


async def test_pull_consumer_reads_compressed_bodies_from_producer(standalone: ServerProcess) -> None:
    from orbitmq.client.producer import Producer
    from orbitmq.model.message import Message

    await make_topic(broker_addr(standalone), "Zipped", queues=1)
    big = bytes(range(256)) * 40  # 10 KiB: over the producer's 4 KiB compression threshold
    producer = Producer("pg-zip", standalone.addr)
    await producer.start()
    try:
        sent = await producer.send(Message("Zipped", big, properties={"TAGS": "z", "KEYS": "k1"}))
    finally:
        await producer.shutdown()
    consumer = PullConsumer(
        "g-zip", standalone.addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    await consumer.start()
    try:
        await consumer.subscribe("Zipped", "z")
        got = await poll_until(consumer, 1)
    finally:
        await consumer.shutdown()
    assert len(got) == 1
    assert got[0].body == big and got[0].sys_flag & 0x1
    assert got[0].msg_id == sent.msg_id and got[0].keys == ["k1"]
