"""Producer against real processes: every send mode, TBW102 auto-create, compression, batch
splitting, the blocking facade, and the route cache.

Messages are read back with raw PULL_MESSAGE requests (``pull_all``), so these tests do not
depend on the consumer implementation.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from orbitmq.client import AdminClient, Producer, SendStatus
from orbitmq.client.blocking import BlockingProducer
from orbitmq.errors import ClientStateError, MessageValidationError
from orbitmq.model.message import Message, MessageExt, MessageQueue
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import PullMessageRequestHeader
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.integration


async def pull_all(broker_addr: str, topic: str, queue_id: int, *, from_offset: int = 0) -> list[MessageExt]:
    """Every message of one queue from ``from_offset`` on, read with raw PULL_MESSAGE."""
    client = RemotingClient()
    messages: list[MessageExt] = []
    queue_offset = from_offset
    try:
        while True:
            header = PullMessageRequestHeader(
                consumer_group="TEST_READER",
                topic=topic,
                queue_id=queue_id,
                queue_offset=queue_offset,
                max_msg_nums=32,
                sys_flag=0x4,
                subscription="*",
                expression_type="TAG",
            )
            request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
            response = await client.invoke(broker_addr, request, 5000)
            if response.code != ResponseCode.SUCCESS:
                return messages
            batch = decode_stored_messages(response.body, decompress=True)
            messages.extend(batch)
            queue_offset = int(response.ext_fields["nextBeginOffset"])
    finally:
        await client.close()


async def wait_for_brokers(admin: AdminClient, count: int = 1) -> None:
    """Wait until ``count`` brokers have registered with the name server."""
    for _ in range(200):
        if len((await admin.cluster_info()).broker_addr_table) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {count} brokers registered within 10 s")


async def create_topic(namesrv_addr: str, topic: str, queues: int, broker_count: int = 1) -> None:
    async with AdminClient(namesrv_addr) as admin:
        await wait_for_brokers(admin, broker_count)
        await admin.create_topic(topic, queues)


@pytest.fixture
def standalone(standalone: ServerProcess) -> ServerProcess:
    """The shared standalone fixture, once its broker has registered with the name server."""

    async def wait() -> None:
        async with AdminClient(standalone.addr) as admin:
            await wait_for_brokers(admin)

    asyncio.run(wait())
    return standalone


def broker_addr(standalone: ServerProcess) -> str:
    return f"127.0.0.1:{standalone.extra_ports[0]}"


async def test_producer_send_stores_message_with_properties(standalone: ServerProcess) -> None:
    await create_topic(standalone.addr, "SyncTopic", 2)
    async with Producer("PG_SYNC", standalone.addr) as producer:
        message = Message("SyncTopic", b"hello", flag=7, properties={"origin": "orbitmq"})
        message.tags = "TagA"
        message.keys = ["k1", "k2"]
        result = await producer.send(message)
    assert result.status is SendStatus.OK
    assert result.msg_id == message.uniq_key and len(result.offset_msg_id) == 32
    stored = await pull_all(broker_addr(standalone), "SyncTopic", result.message_queue.queue_id)
    assert len(stored) == 1 and stored[0].queue_offset == result.queue_offset
    assert (stored[0].body, stored[0].flag, stored[0].tags, stored[0].keys) == (
        b"hello",
        7,
        "TagA",
        ["k1", "k2"],
    )
    assert stored[0].properties["origin"] == "orbitmq" and stored[0].msg_id == result.msg_id
    assert stored[0].offset_msg_id == result.offset_msg_id


async def test_producer_send_compresses_large_body_transparently(standalone: ServerProcess) -> None:
    body = bytes(range(256)) * 64
    async with Producer("PG_ZIP", standalone.addr) as producer:
        result = await producer.send(Message("ZipTopic", body))
    stored = await pull_all(broker_addr(standalone), "ZipTopic", result.message_queue.queue_id)
    assert stored[0].sys_flag & 0x1 and stored[0].body == body
    assert stored[0].store_size < len(body)


async def test_producer_send_auto_creates_topic_from_tbw102(standalone: ServerProcess) -> None:
    async with Producer("PG_AUTO", standalone.addr) as producer:
        results = [await producer.send(Message("AutoTopic", b"m%d" % i)) for i in range(8)]
    assert {r.status for r in results} == {SendStatus.OK}
    assert {r.message_queue.queue_id for r in results} == {0, 1, 2, 3}
    async with AdminClient(standalone.addr) as admin:
        route = await admin.topic_route("AutoTopic")
    assert route.queue_datas[0].write_queue_nums == 4


async def test_producer_send_async_future_and_callback(standalone: ServerProcess) -> None:
    seen: list[tuple[object, object]] = []
    async with Producer("PG_ASYNC", standalone.addr) as producer:
        futures = [
            producer.send_async(Message("AsyncTopic", b"a%d" % i), lambda r, e: seen.append((r, e)))
            for i in range(20)
        ]
        results = await asyncio.gather(*futures)
    assert len({r.msg_id for r in results}) == 20
    assert len(seen) == 20 and all(r is not None and e is None for r, e in seen)


async def test_producer_send_oneway_is_stored(standalone: ServerProcess) -> None:
    await create_topic(standalone.addr, "OnewayTopic", 1)
    async with AdminClient(standalone.addr) as admin, Producer("PG_ONEWAY", standalone.addr) as producer:
        for i in range(5):
            await producer.send_oneway(Message("OnewayTopic", b"o%d" % i))
        mq = MessageQueue("OnewayTopic", "broker-a", 0)
        for _ in range(100):
            if await admin.max_offset(mq) == 5:
                break
            await asyncio.sleep(0.05)
        assert await admin.max_offset(mq) == 5


async def test_producer_send_batch_stores_consecutively(standalone: ServerProcess) -> None:
    messages = [Message("BatchTopic", b"b%d" % i, properties={"KEYS": f"key{i}"}) for i in range(50)]
    async with Producer("PG_BATCH", standalone.addr) as producer:
        results = await producer.send_batch(messages)
    assert len(results) == 50 and len({r.message_queue for r in results}) == 1
    assert [r.queue_offset for r in results] == list(
        range(results[0].queue_offset, results[0].queue_offset + 50)
    )
    stored = await pull_all(broker_addr(standalone), "BatchTopic", results[0].message_queue.queue_id)
    assert [m.body for m in stored] == [m.body for m in messages]
    assert [m.msg_id for m in stored] == [r.msg_id for r in results]
    assert [m.offset_msg_id for m in stored] == [r.offset_msg_id for r in results]


async def test_producer_send_batch_splits_over_request_limit(standalone: ServerProcess) -> None:
    messages = [Message("SplitTopic", bytes([i]) * 3000) for i in range(10)]
    async with Producer("PG_SPLIT", standalone.addr, max_message_size_bytes=8192) as producer:
        results = await producer.send_batch(messages)
    assert len(results) == 10
    assert len({r.message_queue for r in results}) > 1
    total = 0
    for queue in {r.message_queue for r in results}:
        total += len(await pull_all(broker_addr(standalone), "SplitTopic", queue.queue_id))
    assert total == 10


async def test_producer_send_orderly_keeps_key_on_one_queue(standalone: ServerProcess) -> None:
    await create_topic(standalone.addr, "OrderTopic", 4)
    async with Producer("PG_ORDER", standalone.addr) as producer:
        results = [
            await producer.send_orderly(Message("OrderTopic", f"{key}-{i}".encode()), key)
            for i in range(5)
            for key in ("order-1", "order-2", "order-3")
        ]
    by_key: dict[str, set[int]] = {}
    for result, key in zip(results, ["order-1", "order-2", "order-3"] * 5, strict=True):
        by_key.setdefault(key, set()).add(result.message_queue.queue_id)
    assert all(len(queues) == 1 for queues in by_key.values())
    queue_id = next(iter(by_key["order-1"]))
    stored = [m.body for m in await pull_all(broker_addr(standalone), "OrderTopic", queue_id)]
    assert [b for b in stored if b.startswith(b"order-1")] == [f"order-1-{i}".encode() for i in range(5)]


async def test_producer_rejects_invalid_message_and_unstarted_use(standalone: ServerProcess) -> None:
    producer = Producer("PG_INVALID", standalone.addr)
    with pytest.raises(ClientStateError):
        await producer.send(Message("T", b"x"))
    async with producer:
        with pytest.raises(MessageValidationError):
            await producer.send(Message("Bad Topic", b"x"))
        with pytest.raises(MessageValidationError):
            await producer.send(Message("T", b""))
    with pytest.raises(ClientStateError):
        await producer.send(Message("T", b"x"))


def test_blocking_producer_sends_from_plain_thread(standalone: ServerProcess) -> None:
    with BlockingProducer("PG_BLOCKING", standalone.addr) as producer:
        result = producer.send(Message("BlockingTopic", b"sync"))
        future = producer.send_async(Message("BlockingTopic", b"async"))
        batch = producer.send_batch([Message("BlockingTopic", b"b1"), Message("BlockingTopic", b"b2")])
        producer.send_oneway(Message("BlockingTopic", b"oneway"))
        assert future.result(10).status is SendStatus.OK
    assert result.status is SendStatus.OK and len(batch) == 2
    counts = Counter(r.message_queue.topic for r in [result, *batch])
    assert counts["BlockingTopic"] == 3
