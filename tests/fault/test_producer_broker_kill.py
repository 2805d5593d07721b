"""One of two brokers is SIGKILLed while eight concurrent senders produce.

Goal: the producer keeps sending to the surviving broker within its retry budget, and every
message it acknowledged can be read afterwards. Method: produce for a while, kill broker-a,
keep producing, restart broker-a on its store, then read every queue of both brokers with
raw PULL_MESSAGE and look for each acknowledged UNIQ_KEY at its reported queue and offset.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from orbitmq.client import Producer, SendResult
from orbitmq.errors import OrbitError
from orbitmq.model.message import Message
from tests.integration.client.test_producer import create_topic, pull_all
from tests.support.processes import ServerProcess, start_broker, start_namesrv

pytestmark = pytest.mark.fault

SENDERS = 8
QUEUES = 2


async def _produce(
    producer: Producer, stop: asyncio.Event, acked: list[SendResult], failed: list[str]
) -> None:
    seq = 0
    while not stop.is_set():
        seq += 1
        try:
            acked.append(await producer.send(Message("KillTopic", b"payload-%d" % seq)))
        except OrbitError as exc:
            failed.append(repr(exc))


async def test_producer_broker_kill_keeps_sending_and_loses_no_ack(tmp_path: Path) -> None:
    started: list[ServerProcess] = []
    try:
        namesrv = start_namesrv(tmp_path)
        started.append(namesrv)
        brokers = [start_broker(tmp_path, namesrv.addr, name=name) for name in ("broker-a", "broker-b")]
        started.extend(brokers)
        await create_topic(namesrv.addr, "KillTopic", QUEUES, broker_count=2)
        acked: list[SendResult] = []
        failed: list[str] = []
        stop = asyncio.Event()
        async with Producer("PG_KILL", namesrv.addr, send_msg_timeout_ms=5000) as producer:
            senders = [asyncio.create_task(_produce(producer, stop, acked, failed)) for _ in range(SENDERS)]
            await asyncio.sleep(0.7)
            acked_before_kill = len(acked)
            brokers[0].kill()
            await asyncio.sleep(1.5)
            stop.set()
            await asyncio.gather(*senders)
        after_kill = acked[acked_before_kill + SENDERS :]
        assert not failed, failed[:5]
        assert acked_before_kill > 0 and len(after_kill) > 0
        assert {r.message_queue.broker_name for r in after_kill[-20:]} == {"broker-b"}

        # The restarted broker must know the topic from its own topics.json: it was persisted
        # when the topic was created, before the SIGKILL.
        brokers[0].start()
        stored: dict[tuple[str, int, int], str] = {}
        for broker in brokers:
            for queue_id in range(QUEUES):
                for message in await pull_all(broker.addr, "KillTopic", queue_id):
                    stored[(broker.name, queue_id, message.queue_offset)] = message.msg_id
        for result in acked:
            mq = result.message_queue
            assert stored.get((mq.broker_name, mq.queue_id, result.queue_offset)) == result.msg_id
    finally:
        for proc in reversed(started):
            proc.kill()
