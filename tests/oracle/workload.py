"""A small workload written through one broker and read back, by content, through another.

The store-move and mixed-cluster tests write with OrbitMQ's own client (which the oracle tier
shows talks to Apache's broker as to OrbitMQ's): messages across topics and queues, each with
keys, a tag and a user property, and a consumer group's committed offsets. Reading back pulls
every queue of each topic from its first offset and compares the messages by content.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from orbitmq.client.admin import AdminClient
from orbitmq.client.producer import Producer
from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.model.message import Message, MessageQueue

GROUP = "move_group"
PRODUCER_GROUP = "move_producer"
PROPERTY = "move_seq"


@dataclass(frozen=True)
class Stored:
    """What a reader must see of one message."""

    topic: str
    body: bytes
    keys: tuple[str, ...]
    tags: str | None
    seq: str


@dataclass
class Written:
    """What a workload wrote: the messages and the group's committed offsets per queue."""

    messages: list[Stored] = field(default_factory=list)
    offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)


def _message(topic: str, seq: int) -> tuple[Message, Stored]:
    keys = (f"k{seq}", f"order-{seq % 7}")
    tags = f"tag{seq % 3}"
    body = f"{topic}:{seq}:".encode() + bytes(range(seq % 64))
    message = Message(topic, body, properties={PROPERTY: str(seq)})
    message.keys = list(keys)
    message.tags = tags
    return message, Stored(topic, body, keys, tags, str(seq))


async def write(namesrv_addr: str, topics: Iterable[str], count: int, *, tag: str = "") -> Written:
    """Send ``count`` messages over ``topics`` (round robin), then commit half of each queue."""
    written = Written()
    topics = list(topics)
    producer = Producer(PRODUCER_GROUP + tag, namesrv_addr)
    await producer.start()
    try:
        for seq in range(count):
            message, stored = _message(topics[seq % len(topics)], seq)
            result = await producer.send(message)
            assert result.status.value == "SEND_OK", result
            written.messages.append(stored)
    finally:
        await producer.shutdown()
    consumer = PullConsumer(GROUP, namesrv_addr, auto_commit=False)
    await consumer.start()
    try:
        commits: dict[MessageQueue, int] = {}
        for topic in topics:
            for mq in await consumer.fetch_message_queues(topic):
                ends = await _pull_all(consumer, mq)
                if ends:
                    commits[mq] = max(1, len(ends) // 2)
        consumer.assign(list(commits))
        await consumer.commit_sync(commits)
        written.offsets = {(mq.topic, mq.broker_name, mq.queue_id): offset for mq, offset in commits.items()}
    finally:
        await consumer.shutdown()
    return written


async def _pull_all(consumer: PullConsumer, mq: MessageQueue) -> list[Stored]:
    found: list[Stored] = []
    async for batch in consumer.pull_range(mq, 0, 1 << 40):
        for m in batch:
            keys = tuple(m.properties.get("KEYS", "").split(" "))
            found.append(
                Stored(m.topic, m.body, keys, m.properties.get("TAGS"), m.properties.get(PROPERTY, ""))
            )
    return found


async def read(namesrv_addr: str, topics: Iterable[str]) -> Written:
    """Every message of ``topics`` and the group's committed offset of each queue."""
    read_back = Written()
    consumer = PullConsumer(GROUP, namesrv_addr, auto_commit=False)
    await consumer.start()
    try:
        for topic in topics:
            queues = await consumer.fetch_message_queues(topic)
            consumer.assign(queues)
            for mq in queues:
                read_back.messages += await _pull_all(consumer, mq)
                committed = await consumer.committed(mq)
                if committed is not None and committed >= 0:
                    read_back.offsets[(mq.topic, mq.broker_name, mq.queue_id)] = committed
    finally:
        await consumer.shutdown()
    return read_back


def missing(expected: Written, found: Written) -> list[Stored]:
    """The expected messages that ``found`` lacks (by content)."""
    seen = set(found.messages)
    return [m for m in expected.messages if m not in seen]


async def unfound_by_key(namesrv_addr: str, expected: Written, every: int = 10) -> list[Stored]:
    """Every ``every``-th message that a key query (the index) does not return."""
    admin = AdminClient(namesrv_addr)
    await admin.start()
    unfound: list[Stored] = []
    try:
        for stored in expected.messages[::every]:
            found = await admin.query_messages(stored.topic, stored.keys[0])
            if not any(m.body == stored.body for m in found):
                unfound.append(stored)
    finally:
        await admin.close()
    return unfound
