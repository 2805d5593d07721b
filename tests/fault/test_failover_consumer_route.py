"""A push consumer follows an automatic failover at once, not at its 30 s route poll (issue 15).

Controller mode, a broker group of three: the consumer (default route poll, 30 s) consumes a
first batch and commits it; the master is SIGKILLed; once a new master is elected a second
batch is sent to it by a producer of another client instance (so the producer's own route
refresh cannot help the consumer). The consumer must consume the second batch and commit it
on the NEW master within a few seconds: its failed pulls to the dead master ask the name
server for the route at once.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from orbitmq.client import ConsumeResult, Producer, PushConsumer, SendStatus
from orbitmq.model.message import Message, MessageExt
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
)
from orbitmq.transport.connection import RemotingClient
from tests.support.failover_group import start_failover_group

pytestmark = pytest.mark.fault

TOPIC = "FailoverConsumerRoute"
GROUP = "CG_FAILOVER_ROUTE"
QUEUES = 2
BATCH = 40
FOLLOW_DEADLINE_S = 8.0
"""Far below the consumer's route poll (30 s), which is what it waited for before."""


async def _send(namesrv: str, first: int, count: int) -> None:
    async with Producer(
        "PG_FAILOVER_ROUTE", namesrv, instance_name="route-producer", send_msg_timeout_ms=3000
    ) as p:
        index = first
        while index < first + count:
            try:
                result = await p.send(Message(TOPIC, f"m-{index}".encode()))
            except Exception:
                await asyncio.sleep(0.1)
                continue
            if result.status is SendStatus.OK:
                index += 1


async def _offsets(addr: str) -> tuple[list[int], list[int | None]]:
    """(max offset, the group's committed offset) of every queue on broker ``addr``."""
    client = RemotingClient()
    maxima: list[int] = []
    committed: list[int | None] = []
    try:
        for queue_id in range(QUEUES):
            request = RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(TOPIC, queue_id).to_ext()
            )
            response = await client.invoke(addr, request)
            maxima.append(GetMaxOffsetResponseHeader.from_ext(response.ext_fields).queue_offset)
            header = QueryConsumerOffsetRequestHeader(GROUP, TOPIC, queue_id, set_zero_if_not_found=False)
            response = await client.invoke(
                addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())
            )
            ok = response.code == ResponseCode.SUCCESS
            committed.append(
                QueryConsumerOffsetResponseHeader.from_ext(response.ext_fields).queue_offset if ok else None
            )
    finally:
        await client.close()
    return maxima, committed


async def _until_committed(addr: str, seen: set[str], total: int, timeout_s: float) -> float:
    """Seconds until every message is consumed and committed on ``addr``; fails after ``timeout_s``."""
    started = time.monotonic()
    state: tuple[list[int], list[int | None]] = ([], [])
    while time.monotonic() - started < timeout_s:
        state = await _offsets(addr)
        if len(seen) == total and sum(state[0]) == total and state[1] == state[0]:
            return time.monotonic() - started
        await asyncio.sleep(0.2)
    raise AssertionError(
        f"after {timeout_s} s: consumed {len(seen)} of {total}; on {addr} max offsets {state[0]}, "
        f"committed {state[1]}"
    )


def test_failover_push_consumer_commits_to_the_new_master_at_once(tmp_path: Path) -> None:
    group = start_failover_group(tmp_path, topic=TOPIC, queues=QUEUES)
    try:
        old, epoch = group.master()
        group.wait_full_sync_state_set()

        async def run() -> float:
            seen: set[str] = set()

            async def listener(messages: list[MessageExt]) -> ConsumeResult:
                seen.update(message.body.decode() for message in messages)
                return ConsumeResult.CONSUME_SUCCESS

            consumer = PushConsumer(
                GROUP, group.namesrv_addr, listener, persist_consumer_offset_interval_ms=1000
            )
            consumer.subscribe(TOPIC, "*")
            await consumer.start()
            try:
                await _send(group.namesrv_addr, 0, BATCH)
                await _until_committed(old.addr, seen, BATCH, 20)
                old.kill()
                loop = asyncio.get_running_loop()
                new, _ = await loop.run_in_executor(None, lambda: group.master(not_epoch_below=epoch + 1))
                assert new is not old
                elected = time.monotonic()
                await _send(group.namesrv_addr, BATCH, BATCH)
                await _until_committed(new.addr, seen, 2 * BATCH, FOLLOW_DEADLINE_S)
                return time.monotonic() - elected
            finally:
                await consumer.shutdown()

        followed_s = asyncio.run(run())
        print(f"consumed and committed on the new master {followed_s:.2f} s after its election")
    except BaseException:
        print(group.logs())
        raise
    finally:
        group.kill_all()
