"""Staged writes against two real brokers: nothing is visible before the commit, everything once
after it, a second commit of the same key writes nothing, and a commit interrupted between the
coordinator and the other broker is completed by the next commit of that key."""

from __future__ import annotations

import time

import pytest

from orbitmq.client import AdminClient, PullConsumer
from orbitmq.client.staging import StagedChunk, StagingProducer
from orbitmq.errors import BrokerResponseError, MessageIllegalError, NoPermissionError
from orbitmq.model.message import Message, MessageQueue
from orbitmq.protocol.staging import CommitBody
from tests.integration.client.test_producer import create_topic
from tests.integration.conftest import Cluster

pytestmark = pytest.mark.integration


def _messages(topic: str, prefix: str, count: int) -> list[Message]:
    return [Message(topic, f"{prefix}{i}".encode()) for i in range(count)]


async def _bodies(namesrv_addr: str, topic: str) -> list[bytes]:
    """Every body stored in ``topic``, over every queue of every broker."""
    async with AdminClient(namesrv_addr) as admin:
        status = await admin.topic_status(topic)
    bodies = []
    consumer = PullConsumer("CG_STAGING_CHECK", namesrv_addr, auto_commit=False)
    await consumer.start()
    try:
        for mq, queue in status.items():
            async for batch in consumer.pull_range(mq, queue.min_offset, queue.max_offset):
                bodies += [msg.body for msg in batch]
    finally:
        await consumer.shutdown()
    return bodies


async def _stage_on_both(
    producer: StagingProducer, topic: str, prefix: str, batch_id: int
) -> list[StagedChunk]:
    chunks: list[StagedChunk] = []
    for index in range(4):  # round robin over 2 brokers x 2 queues
        chunks += await producer.stage(_messages(topic, f"{prefix}{index}-", 25), "write-1", batch_id)
    assert {chunk.broker_name for chunk in chunks} == {"broker-a", "broker-b"}
    return chunks


async def test_staged_messages_appear_once_at_commit_and_never_again(cluster: Cluster) -> None:
    await create_topic(cluster.namesrv_addr, "StagedTopic", 2, broker_count=2)
    async with StagingProducer("PG_STAGED", cluster.namesrv_addr) as producer:
        chunks = await _stage_on_both(producer, "StagedTopic", "m", 0)
        orphan = await producer.stage(_messages("StagedTopic", "orphan", 10), "write-1", 0)
        assert await _bodies(cluster.namesrv_addr, "StagedTopic") == []
        first = await producer.commit("write-1", 0, chunks)
        # The same decision sent again (a resend after a timeout) is this commit, not a replay.
        resent = await producer.commit("write-1", 0, chunks)
        # A replay of batch 0 stages again; its commit finds the key and writes nothing.
        replayed = await _stage_on_both(producer, "StagedTopic", "m", 0)
        second = await producer.commit("write-1", 0, replayed + orphan)
    assert (first.already_committed, first.brokers) == (False, 2)
    assert not resent.already_committed
    assert (second.already_committed, second.brokers) == (True, 2)
    bodies = await _bodies(cluster.namesrv_addr, "StagedTopic")
    assert sorted(bodies) == sorted(f"m{i}-{j}".encode() for i in range(4) for j in range(25))


async def test_interrupted_commit_is_completed_by_the_next_commit_of_the_key(cluster: Cluster) -> None:
    await create_topic(cluster.namesrv_addr, "HalfCommitted", 2, broker_count=2)
    async with StagingProducer("PG_HALF", cluster.namesrv_addr) as producer:
        chunks = await _stage_on_both(producer, "HalfCommitted", "m", 7)
        on_a = [c.commit_log_offset for c in chunks if c.broker_name == "broker-a"]
        on_b = [c.commit_log_offset for c in chunks if c.broker_name == "broker-b"]
        # The writer dies after the coordinator (broker-a) recorded the decision.
        coordinator = cluster.brokers[0].addr
        deadline = time.monotonic() + 10
        await producer._commit_on(coordinator, "write-1", 7, CommitBody(on_a, {"broker-b": on_b}), deadline)
        assert len(await _bodies(cluster.namesrv_addr, "HalfCommitted")) == 50
        # The replay stages other messages; the recorded decision wins on both brokers.
        replayed = await _stage_on_both(producer, "HalfCommitted", "r", 7)
        result = await producer.commit("write-1", 7, replayed)
    assert result.already_committed
    bodies = await _bodies(cluster.namesrv_addr, "HalfCommitted")
    assert sorted(bodies) == sorted(f"m{i}-{j}".encode() for i in range(4) for j in range(25))


async def test_ledger_survives_a_coordinator_kill(cluster: Cluster) -> None:
    await create_topic(cluster.namesrv_addr, "LedgerKept", 2, broker_count=2)
    async with StagingProducer("PG_KEPT", cluster.namesrv_addr) as producer:
        chunks = await _stage_on_both(producer, "LedgerKept", "m", 3)
        await producer.commit("write-1", 3, chunks)
    coordinator = cluster.brokers[0]
    coordinator.kill()
    coordinator.start()
    async with StagingProducer("PG_KEPT", cluster.namesrv_addr) as producer:
        replayed = await _stage_on_both(producer, "LedgerKept", "r", 3)
        again = await producer.commit("write-1", 3, replayed)
    assert again.already_committed
    assert len(await _bodies(cluster.namesrv_addr, "LedgerKept")) == 100


async def test_staging_refuses_bad_input_naming_it(cluster: Cluster) -> None:
    await create_topic(cluster.namesrv_addr, "StagedBad", 1, broker_count=2)
    async with StagingProducer("PG_BAD", cluster.namesrv_addr) as producer:
        timed = Message("StagedBad", b"later")
        timed.deliver_time_ms = 4_000_000_000_000
        with pytest.raises(MessageIllegalError, match="delayed, timed or transactional"):
            await producer.stage([timed], "write-1", 0)
        with pytest.raises(NoPermissionError, match="RMQ_SYS_STAGE_HALF_TOPIC"):
            await producer._stage_one(
                MessageQueue("RMQ_SYS_STAGE_HALF_TOPIC", "broker-a", 0), b"", 0, "write-1", 0, 3000
            )
        with pytest.raises(MessageIllegalError, match="writeId"):
            await producer.stage(_messages("StagedBad", "x", 1), "bad id!", 0)
        mine = await producer.stage(_messages("StagedBad", "x", 3), "write-1", 0)
        with pytest.raises(BrokerResponseError, match="not a staged record of write other batch 0"):
            await producer.commit("other", 0, mine)
        with pytest.raises(BrokerResponseError, match="no staged record at commit-log offset"):
            await producer.commit(
                "write-1", 0, [StagedChunk(mine[0].broker_name, 1 << 40, "StagedBad", 0, 1)]
            )
        with pytest.raises(MessageIllegalError, match="lists a staged record twice"):
            await producer.commit("write-1", 0, [*mine, *mine])
        # Refused commits record nothing: the key can still be committed.
        assert not (await producer.commit("write-1", 0, mine)).already_committed
    assert len(await _bodies(cluster.namesrv_addr, "StagedBad")) == 3
