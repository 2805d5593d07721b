"""Offsets committed on a slave while the master was away survive the master's return.

Method: a SYNC_MASTER and its slave as real processes (tests/support/replica_group.py). 5,000
messages are stored and replicated; the master is SIGKILLed; OrbitMQ's push consumer reads all
of them from the slave and commits its offsets there, then stops. The master restarts (with no
offsets for the group), the slave's next metadata copy runs, and the consumer starts again in
the same group: it must carry on from where it stopped, not read the 5,000 again. RocketMQ's
copy (the master's table overwrites the slave's) re-reads all of them; at-least-once allows a
few re-reads, so the bound is 1 %. 100 messages sent after the restart show that the
restarted consumer does consume.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from orbitmq.client import ConsumeResult, Message, Producer, PushConsumer, SendStatus
from orbitmq.model.message import MessageExt
from orbitmq.protocol.bodies import decode_topic_route
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
)
from orbitmq.transport.connection import RemotingClient
from tests.integration.client.test_producer import create_topic
from tests.support.replica_group import fetch_ha_status, start_replica_group, wait_caught_up

pytestmark = pytest.mark.integration

TOPIC, GROUP = "SlaveOffsetsTopic", "CG_SLAVE_OFFSETS"
QUEUES = 2
COUNT = 5_000
AFTER_RETURN = 100
REREAD_BOUND = COUNT // 100


async def test_offsets_committed_on_slave_survive_master_return(tmp_path: Path) -> None:
    group = start_replica_group(tmp_path, "SYNC_MASTER")
    master, slave = group.master, group.slaves[0]
    seqs: list[int] = []

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        seqs.extend(int(message.properties["seq"]) for message in messages)
        return ConsumeResult.CONSUME_SUCCESS

    def consumer() -> PushConsumer:
        push = PushConsumer(
            GROUP,
            group.namesrv_addr,
            listener,
            poll_name_server_interval_ms=500,
            persist_consumer_offset_interval_ms=500,
        )
        push.subscribe(TOPIC, "*")
        return push

    try:
        await create_topic(group.namesrv_addr, TOPIC, QUEUES)
        await _produce(group.namesrv_addr, 0, COUNT)
        await asyncio.to_thread(wait_caught_up, master, slave)
        master.kill()
        await _until(
            lambda: _master_routed(group.namesrv_addr, present=False), 15, "the master out of the route"
        )

        first = consumer()
        await first.start()
        try:
            await _until(lambda: len(set(seqs)) >= COUNT, 60, "every message read from the slave")
        finally:
            await first.shutdown()
        ends = await _queue_values(slave.addr, _max_offset)
        assert sum(ends) == COUNT
        await _until(lambda: _committed_are(slave.addr, ends), 15, "the offsets committed on the slave")
        read_before = len(seqs)

        master.start()
        await _until(
            lambda: _master_routed(group.namesrv_addr, present=True), 15, "the master back in the route"
        )
        await _until(lambda: _slave_in_sync(master.addr), 15, "the slave streaming from the returned master")
        # The slave's next metadata copies (every second here); the figure below is the test.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not await _committed_are(master.addr, ends):
            await asyncio.sleep(0.2)

        second = consumer()
        await second.start()
        try:
            await _produce(group.namesrv_addr, COUNT, AFTER_RETURN)
            await _until(
                lambda: set(range(COUNT, COUNT + AFTER_RETURN)) <= set(seqs),
                30,
                "the messages sent after the return",
            )
        finally:
            await second.shutdown()
        reread = sum(1 for seq in seqs[read_before:] if seq < COUNT)
        duplicates_before = sum(n - 1 for n in collections.Counter(seqs[:read_before]).values() if n > 1)
        print(f"read again after the master returned: {reread} of {COUNT} (before: {duplicates_before})")
        assert reread < REREAD_BOUND, f"{reread} of {COUNT} messages read again after the master returned"
    finally:
        group.kill_all()


async def _produce(namesrv: str, first: int, count: int) -> None:
    async with Producer("PG_SLAVE_OFFSETS", namesrv, instance_name="slave-offsets-producer") as producer:
        for start in range(first, first + count, 100):
            sends = [
                producer.send(Message(TOPIC, b"m%d" % seq, properties={"seq": str(seq)}))
                for seq in range(start, min(start + 100, first + count))
            ]
            results = await asyncio.gather(*sends)
            assert all(result.status is SendStatus.OK for result in results)


async def _until(predicate: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        outcome = predicate()
        if isinstance(outcome, Awaitable):
            outcome = await outcome
        if outcome:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s: {what}")
        await asyncio.sleep(0.2)


async def _queue_values(
    addr: str, read: Callable[[RemotingClient, str, int], Awaitable[int | None]]
) -> list[int | None]:
    client = RemotingClient()
    try:
        return [await read(client, addr, queue_id) for queue_id in range(QUEUES)]
    finally:
        await client.close()


async def _max_offset(client: RemotingClient, addr: str, queue_id: int) -> int | None:
    header = GetMaxOffsetRequestHeader(TOPIC, queue_id)
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, header.to_ext()))
    return GetMaxOffsetResponseHeader.from_ext(response.ext_fields).queue_offset


async def _committed(client: RemotingClient, addr: str, queue_id: int) -> int | None:
    header = QueryConsumerOffsetRequestHeader(GROUP, TOPIC, queue_id)
    response = await client.invoke(
        addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())
    )
    if response.code != ResponseCode.SUCCESS:
        return None
    return QueryConsumerOffsetResponseHeader.from_ext(response.ext_fields).queue_offset


async def _committed_are(addr: str, ends: list[int | None]) -> bool:
    return await _queue_values(addr, _committed) == ends


async def _master_routed(namesrv: str, *, present: bool) -> bool:
    client = RemotingClient()
    try:
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
        response = await client.invoke(namesrv, request)
    finally:
        await client.close()
    if response.code != ResponseCode.SUCCESS:
        return False
    routed = all(broker.master_addr for broker in decode_topic_route(response.body).broker_datas)
    return routed == present


async def _slave_in_sync(master_addr: str) -> bool:
    status = await fetch_ha_status(master_addr)
    return any(connection["inSync"] for connection in status["haConnectionInfo"])
