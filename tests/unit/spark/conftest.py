"""A fake OrbitMQ client for the Spark connector's unit tests.

FakeBroker holds queues as plain lists of MessageExt indexed by queue offset, with a movable
min offset to simulate retention; FakeFactory hands out admin/puller/producer views of it with
the same methods the connector calls on orbitmq.client's blocking objects.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from orbitmq.client.staging import CommitResult, StagedChunk
from orbitmq.errors import ConnectError, RequestTimeoutError
from orbitmq.model.message import Message, MessageConst, MessageExt, MessageQueue
from orbitmq.model.route import BrokerData, QueueData, TopicRouteData
from orbitmq.protocol.message_codec import encode_stored_message
from orbitmq.protocol.tags import TagFilter, tags_code

# The connector needs the ``spark`` extra (pyspark, pyarrow); without it, skip rather than fail.
pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


@dataclass
class FakeStatus:
    min_offset: int
    max_offset: int
    last_update_timestamp_ms: int = 0


@dataclass
class FakeBroker:
    queues: dict[MessageQueue, list[MessageExt]] = field(default_factory=dict)
    min_offsets: dict[MessageQueue, int] = field(default_factory=dict)
    group_offsets: dict[tuple[str, MessageQueue], int] = field(default_factory=dict)
    sent: list[tuple[str, Message, str | None]] = field(default_factory=list)
    admin_calls: int = 0
    failures_left: int = 0  # route lookups that fail with a request timeout before any succeeds
    away: set[int] = field(default_factory=set)  # member ids (0 master, 1 slave) not in the route
    unreachable: set[int] = field(default_factory=set)  # member ids in the route that do not answer
    # What the next pulls meet, one entry per pull: "ok", "down" (ConnectError: the member was
    # killed) or "behind" (the queue ends there: a slave that has not caught up).
    pull_faults: list[str] = field(default_factory=list)
    pulls: int = 0
    staged: list[tuple[str, int, StagedChunk, list[Message]]] = field(default_factory=list)
    committed: dict[tuple[str, int], list[StagedChunk]] = field(default_factory=dict)

    def add_topic(self, topic: str, brokers: Sequence[str] = ("broker-a",), queues: int = 4) -> None:
        for broker in brokers:
            for queue_id in range(queues):
                self.queues[MessageQueue(topic, broker, queue_id)] = []

    def append(self, mq: MessageQueue, count: int, tags: str | None = None, born_ms: int = 1_000) -> None:
        queue = self.queues[mq]
        for _ in range(count):
            offset = len(queue)
            props = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"{mq.topic}-{mq.queue_id}-{offset}"}
            if tags:
                props[MessageConst.TAGS] = tags
            queue.append(
                MessageExt(
                    topic=mq.topic,
                    body=f"{mq.queue_id}:{offset}".encode(),
                    properties=props,
                    queue_id=mq.queue_id,
                    queue_offset=offset,
                    born_timestamp=born_ms + offset,
                    store_timestamp=born_ms + offset + 1,
                )
            )


class FakeAdmin:
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.closed = False

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return sorted(mq for mq in self.broker.queues if mq.topic == topic)

    def topic_route(self, topic: str) -> TopicRouteData:
        """Every broker of ``topic`` with a master (id 0) and, if ``slaves``, slave id 1."""
        self.broker.admin_calls += 1
        if self.broker.failures_left > 0:
            self.broker.failures_left -= 1
            raise RequestTimeoutError(f"topic_route({topic}) timed out")
        counts: dict[str, int] = {}
        for mq in self.broker.queues:
            if mq.topic == topic:
                counts[mq.broker_name] = max(counts.get(mq.broker_name, 0), mq.queue_id + 1)
        members = {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
        return TopicRouteData(
            [QueueData(name, n, n) for name, n in sorted(counts.items())],
            [
                BrokerData("c", name, {i: a for i, a in members.items() if i not in self.broker.away})
                for name in sorted(counts)
            ],
        )

    def queue_statuses_of(
        self, queues: Sequence[MessageQueue], broker_id: int
    ) -> dict[MessageQueue, FakeStatus]:
        if broker_id in self.broker.unreachable:
            raise ConnectError(f"cannot connect to member {broker_id}")
        return {
            mq: FakeStatus(self.broker.min_offsets.get(mq, 0), len(self.broker.queues[mq])) for mq in queues
        }

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        for msg in self.broker.queues[mq]:
            if msg.store_timestamp >= timestamp_ms:
                return msg.queue_offset
        return len(self.broker.queues[mq])

    def list_topics(self) -> list[str]:
        return sorted({mq.topic for mq in self.broker.queues} | {"%RETRY%g", "TBW102"})

    def committed_offset(self, group: str, mq: MessageQueue, *, zero_if_not_found: bool = True) -> int | None:
        # As the broker: 0 for a group that never committed on a queue never truncated,
        # unless the caller asks for "not found" (setZeroIfNotFound=false).
        committed = self.broker.group_offsets.get((group, mq))
        if committed is None and zero_if_not_found and self.broker.min_offsets.get(mq, 0) == 0:
            return 0
        return committed

    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self.broker.group_offsets[(group, mq)] = offset

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeRawBatch:
    body: bytes
    next_offset: int


class FakePuller:
    """Serves stored-record bytes like the broker: tag filtering by hash code only, and whole
    pulls that may run past the requested end (the reader must trim both)."""

    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker

    def pull_range_raw(
        self,
        mq: MessageQueue,
        start_offset: int,
        end_offset: int,
        *,
        expression: str = "*",
        max_msg_nums: int = 32,
    ) -> Iterator[FakeRawBatch]:
        tag_filter = TagFilter.parse(expression)
        queue = self.broker.queues[mq]
        for first in range(start_offset, min(end_offset, len(queue)), max_msg_nums):
            self.broker.pulls += 1
            fault = self.broker.pull_faults.pop(0) if self.broker.pull_faults else "ok"
            if fault == "down":
                raise ConnectError(f"cannot connect to the member serving {mq}")
            if fault == "behind":
                return
            chunk = queue[first : first + max_msg_nums]
            kept = [m for m in chunk if tag_filter.matches_code(tags_code(m.tags))]
            yield FakeRawBatch(b"".join(encode_stored_message(m) for m in kept), first + len(chunk))

    def pull_range(
        self,
        mq: MessageQueue,
        start_offset: int,
        end_offset: int,
        *,
        expression: str = "*",
        max_msg_nums: int = 32,
    ) -> Iterator[list[MessageExt]]:
        tag_filter = TagFilter.parse(expression)
        for first in range(start_offset, end_offset, max_msg_nums):
            chunk = self.broker.queues[mq][first : min(first + max_msg_nums, end_offset)]
            yield [msg for msg in chunk if tag_filter.matches_tag(msg.tags)]


class FakeProducer:
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker

    def stage(
        self,
        messages: Sequence[Message],
        write_id: str,
        batch_id: int,
        *,
        queue: MessageQueue | None = None,
        timeout_ms: int | None = None,
    ) -> list[StagedChunk]:
        chunk = StagedChunk(
            "broker-a",
            len(self.broker.staged),
            messages[0].topic,
            queue.queue_id if queue else -1,
            len(messages),
        )
        self.broker.staged.append((write_id, batch_id, chunk, list(messages)))
        return [chunk]

    def queue_for_key(self, topic: str, sharding_key: str) -> MessageQueue:
        return MessageQueue(topic, "broker-a", len(sharding_key) % 4)

    def commit(
        self, write_id: str, batch_id: int, chunks: Sequence[StagedChunk], timeout_ms: int = 0
    ) -> CommitResult:
        already = (write_id, batch_id) in self.broker.committed
        if not already:
            self.broker.committed[(write_id, batch_id)] = list(chunks)
        return CommitResult(already, 1)

    def send_batch(self, msgs: Sequence[Message]) -> Any:
        if len({m.topic for m in msgs}) != 1:
            raise AssertionError("a batch must hold one topic")
        self.broker.sent.extend((m.topic, m, None) for m in msgs)

    def send_orderly(self, msg: Message, sharding_key: str) -> Any:
        self.broker.sent.append((msg.topic, msg, sharding_key))


class FakeFactory:
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.admins: list[FakeAdmin] = []

    def admin(self, namesrv_addr: str, request_timeout_ms: int, security: object = None) -> FakeAdmin:
        admin = FakeAdmin(self.broker)
        self.admins.append(admin)
        return admin

    def puller(self, namesrv_addr: str, request_timeout_ms: int, security: object = None) -> FakePuller:
        return FakePuller(self.broker)

    def producer(
        self, group: str, namesrv_addr: str, request_timeout_ms: int, security: object = None
    ) -> FakeProducer:
        return FakeProducer(self.broker)


@pytest.fixture
def broker() -> FakeBroker:
    fake = FakeBroker()
    fake.add_topic("Orders", queues=4)
    return fake


@pytest.fixture
def factory(broker: FakeBroker) -> FakeFactory:
    return FakeFactory(broker)
