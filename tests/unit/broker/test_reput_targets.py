"""Internal re-puts go only where a direct send could go; clients never write a broker topic.

Method: an in-process BrokerApp on 127.0.0.1 (port 0, tmp dir). Records naming bad
destinations are planted in the broker's holding topics with the store library while the
broker is stopped (what a client could write before sends to ``rmq_sys_*`` were refused, or
what a topic change since left behind); the broker is started on that store and each path
is driven until a planted *good* record, queued behind the bad ones, has been re-put. The
bad destinations must then hold nothing new. Bad destinations: queue 77 of a 1-queue topic,
OFFSET_MOVED_EVENT, SCHEDULE_TOPIC_XXXX, the POP journal, a topic that does not exist.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orbitmq.broker.app import BrokerApp
from orbitmq.broker.config import load_broker_config
from orbitmq.broker.topics import TopicConfigTable
from orbitmq.broker.validation import TRANS_HALF_TOPIC
from orbitmq.model.message import MessageConst
from orbitmq.model.route import TopicConfig
from orbitmq.model.subscription_group import SubscriptionGroupConfig
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    CreateTopicRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
)
from orbitmq.protocol.pop import PopMessageRequestHeader
from orbitmq.protocol.properties import encode_properties
from orbitmq.store.message_store import MessageStore, PutMessageRequest, PutStatus
from orbitmq.transport.connection import RemotingClient
from tests.unit.broker._apps import BASE_CONF, start_broker_app

ONE_QUEUE = "OneQueue"
TIMER_TOPIC = "rmq_sys_wheel_timer"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BAD_TARGETS = [
    (ONE_QUEUE, 77),
    ("OFFSET_MOVED_EVENT", 0),
    (SCHEDULE_TOPIC, 5),
    ("rmq_sys_POP_JOURNAL", 0),
    ("NoSuchTopic", 0),
]
CONF = {"timerPrecisionMs": "100", "timerFlushIntervalMs": "100", "messageDelayLevel": "1s 2s"}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def start_app(tmp_path: Path) -> BrokerApp:
    return await start_broker_app(tmp_path, **CONF)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    app = await start_app(tmp_path)
    try:
        yield app
    finally:
        await app.shutdown()


async def call(
    client: RemotingClient, app: BrokerApp, code: int, ext: dict[str, str], body: bytes = b""
) -> RemotingCommand:
    return await client.invoke(app.address, RemotingCommand.request(code, ext, body), 10_000)


async def create_topic(
    client: RemotingClient, app: BrokerApp, topic: str, queues: int = 1, perm: int = 6
) -> None:
    header = CreateTopicRequestHeader(topic=topic, read_queue_nums=queues, write_queue_nums=queues, perm=perm)
    response = await call(client, app, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
    assert response.code == ResponseCode.SUCCESS, response.remark


def send_command(
    topic: str, properties: dict[str, str], *, queue_id: int = 0, reconsume_times: int = 0
) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="PG",
        topic=topic,
        queue_id=queue_id,
        born_timestamp=now_ms(),
        properties=encode_properties({"UNIQ_KEY": f"U{time.time_ns()}", **properties}),
        reconsume_times=reconsume_times,
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext(), b"steered")


def plant(tmp_path: Path, puts: list[PutMessageRequest]) -> list[int]:
    """Append ``puts`` to the stopped broker's store; their commit-log offsets."""
    _, store_config = load_broker_config(
        None, {"storePathRootDir": str(tmp_path / "store"), **BASE_CONF, **CONF}
    )
    store = MessageStore(store_config)
    store.open()
    try:
        offsets = []
        for put in puts:
            result = store.put_message(put)
            assert result.status is PutStatus.PUT_OK, result.remark
            offsets.append(result.commit_log_offsets[0])
        return offsets
    finally:
        store.close()


def held(
    topic: str, queue_id: int, real_topic: str, real_queue_id: int, extra: dict[str, str]
) -> PutMessageRequest:
    properties = {
        MessageConst.REAL_TOPIC: real_topic,
        MessageConst.REAL_QUEUE_ID: str(real_queue_id),
        "UNIQ_KEY": f"{real_topic}-{real_queue_id}",
        **extra,
    }
    return PutMessageRequest(topic, queue_id, b"steered", properties=properties, born_timestamp=now_ms())


def max_offsets(app: BrokerApp) -> list[int]:
    return [app.state.store.get_max_queue_offset(topic, queue_id) for topic, queue_id in BAD_TARGETS]


async def wait_for(app: BrokerApp, topic: str, queue_id: int, count: int, timeout_s: float = 8.0) -> None:
    deadline = time.monotonic() + timeout_s
    while app.state.store.get_max_queue_offset(topic, queue_id) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}/{queue_id} has fewer than {count} messages after {timeout_s} s")
        await asyncio.sleep(0.02)


async def prepared_store(tmp_path: Path) -> None:
    """A store whose topic table has the 1-queue topic (the broker stops before planting)."""
    app = await start_app(tmp_path)
    client = RemotingClient()
    try:
        await create_topic(client, app, ONE_QUEUE)
    finally:
        await client.close()
        await app.shutdown()


# -- clients never address a broker topic --------------------------------------------------


@pytest.mark.parametrize("topic", [TIMER_TOPIC, "rmq_sys_POP_JOURNAL", SCHEDULE_TOPIC, "OFFSET_MOVED_EVENT"])
async def test_send_to_broker_written_topic_is_refused(
    broker: BrokerApp, client: RemotingClient, topic: str
) -> None:
    await create_topic(client, broker, ONE_QUEUE)
    steer = {
        "TIMER_OUT_MS": str(now_ms()),
        MessageConst.REAL_TOPIC: ONE_QUEUE,
        MessageConst.REAL_QUEUE_ID: "77",
    }
    response = await client.invoke(broker.address, send_command(topic, steer))
    assert response.code == ResponseCode.NO_PERMISSION, response.remark
    assert response.remark == f"Sending message to topic[{topic}] is forbidden."
    await asyncio.sleep(0.4)  # four timer slots: a timer record would have fallen due
    assert broker.state.store.get_max_queue_offset(ONE_QUEUE, 77) == 0
    assert broker.state.store.get_max_queue_offset(TIMER_TOPIC, 0) == 0


async def test_send_to_trace_and_retry_topics_still_accepted(
    broker: BrokerApp, client: RemotingClient
) -> None:
    """The system topics RocketMQ clients do write stay writable."""
    for topic in ("RMQ_SYS_TRACE_TOPIC", "%RETRY%CG_REPUT"):
        response = await client.invoke(broker.address, send_command(topic, {}))
        assert response.code == ResponseCode.SUCCESS, (topic, response.remark)


# -- timer ----------------------------------------------------------------------------------


async def test_timer_reput_skips_bad_targets_after_restart(tmp_path: Path) -> None:
    await prepared_store(tmp_path)
    due = {"TIMER_OUT_MS": str(now_ms())}
    plant(
        tmp_path,
        [held(TIMER_TOPIC, 0, topic, queue_id, due) for topic, queue_id in BAD_TARGETS]
        + [held(TIMER_TOPIC, 0, ONE_QUEUE, 0, due)],
    )
    app = await start_app(tmp_path)
    try:
        before = max_offsets(app)
        await wait_for(app, ONE_QUEUE, 0, 1)
        await asyncio.sleep(0.3)
        assert max_offsets(app) == before
        assert app.state.store.get_max_queue_offset(ONE_QUEUE, 0) == 1
    finally:
        await app.shutdown()


# -- delay levels ---------------------------------------------------------------------------


async def test_delay_reput_skips_bad_targets_after_restart(tmp_path: Path) -> None:
    await prepared_store(tmp_path)
    level = {MessageConst.DELAY_TIME_LEVEL: "1"}
    plant(
        tmp_path,
        [held(SCHEDULE_TOPIC, 0, topic, queue_id, level) for topic, queue_id in BAD_TARGETS]
        + [held(SCHEDULE_TOPIC, 0, ONE_QUEUE, 0, level)],
    )
    app = await start_app(tmp_path)
    try:
        before = max_offsets(app)
        await wait_for(app, ONE_QUEUE, 0, 1)
        assert max_offsets(app) == before
        assert app.state.schedule is not None and app.state.schedule.offsets.get(1) == len(BAD_TARGETS) + 1
    finally:
        await app.shutdown()


# -- transactions ---------------------------------------------------------------------------


async def test_transaction_commit_refuses_broker_topic_target(tmp_path: Path) -> None:
    """A half message naming an ``rmq_sys_*`` topic is not committed there, even if it exists.

    The topic exists because a broker that let a send auto-create it wrote it to topics.json.
    """
    await prepared_store(tmp_path)
    half = held(TRANS_HALF_TOPIC, 0, TIMER_TOPIC, 0, {"PGROUP": "PG", "TIMER_OUT_MS": str(now_ms())})
    (commit_log_offset,) = plant(tmp_path, [half])
    app = await start_app(tmp_path)
    app.state.topics.put(TopicConfig(TIMER_TOPIC, 1, 1), system=True)
    client = RemotingClient()
    try:
        header = EndTransactionRequestHeader(
            producer_group="PG",
            tran_state_table_offset=0,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=8,
            transaction_id=half.properties["UNIQ_KEY"],
        )
        response = await call(client, app, RequestCode.END_TRANSACTION, header.to_ext())
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert "forbidden" in (response.remark or "")
        assert app.state.store.get_max_queue_offset(TIMER_TOPIC, 0) == 0
    finally:
        await client.close()
        await app.shutdown()


# -- POP: dead letters ----------------------------------------------------------------------


async def test_pop_dead_letter_refuses_read_only_dlq(broker: BrokerApp, client: RemotingClient) -> None:
    """An exhausted POP delivery is not written to a DLQ topic made read-only; it is dropped."""
    await create_topic(client, broker, ONE_QUEUE)
    await create_topic(client, broker, "%DLQ%CG_REPUT", perm=4)
    broker.state.groups.put(SubscriptionGroupConfig("CG_REPUT", retry_max_times=0))  # one delivery
    response = await client.invoke(broker.address, send_command(ONE_QUEUE, {}))
    assert response.code == ResponseCode.SUCCESS
    deliveries = []
    for _ in range(3):
        header = PopMessageRequestHeader("CG_REPUT", ONE_QUEUE, -1, 8, 100, 0, now_ms(), 0)
        answer = await call(client, broker, RequestCode.POP_MESSAGE, header.to_ext())
        deliveries.append(answer.code)
        await asyncio.sleep(0.15)  # past the invisible time: the next pop finds it exhausted
    assert deliveries[0] == ResponseCode.SUCCESS
    assert broker.state.store.get_max_queue_offset("%DLQ%CG_REPUT", 0) == 0
    # finished, not delivered again (an empty pop answers POLLING_TIMEOUT, as RocketMQ 5 does)
    assert deliveries[1:] == [ResponseCode.POLLING_TIMEOUT] * 2


# -- retry ----------------------------------------------------------------------------------


async def test_retry_exhausted_send_refuses_read_only_dlq(broker: BrokerApp, client: RemotingClient) -> None:
    """A send to %RETRY%<group> past the retry limit goes to the DLQ only if a send could."""
    await create_topic(client, broker, "%DLQ%CG_REPUT", perm=4)
    response = await client.invoke(broker.address, send_command("%RETRY%CG_REPUT", {}, reconsume_times=16))
    assert response.code == ResponseCode.NO_PERMISSION, response.remark
    assert broker.state.store.get_max_queue_offset("%DLQ%CG_REPUT", 0) == 0


def test_reput_targets_refusals() -> None:
    from orbitmq.broker.reput import ReputTargets  # noqa: PLC0415 - new module: its own test fails alone

    topics = TopicConfigTable()
    topics.put(TopicConfig(ONE_QUEUE, 1, 1))
    topics.put(TopicConfig("ReadOnly", 1, 1, perm=4))
    topics.put(TopicConfig(TIMER_TOPIC, 1, 1), system=True)
    targets = ReputTargets(topics)
    assert targets.refusal(ONE_QUEUE, 0) is None
    refused = {
        (ONE_QUEUE, 77): ResponseCode.SYSTEM_ERROR,
        (ONE_QUEUE, -1): ResponseCode.SYSTEM_ERROR,
        ("ReadOnly", 0): ResponseCode.NO_PERMISSION,
        ("Missing", 0): ResponseCode.TOPIC_NOT_EXIST,
        (TIMER_TOPIC, 0): ResponseCode.NO_PERMISSION,
        (SCHEDULE_TOPIC, 0): ResponseCode.NO_PERMISSION,
        ("bad/name", 0): ResponseCode.SYSTEM_ERROR,
    }
    for (topic, queue_id), code in refused.items():
        rejection = targets.refusal(topic, queue_id)
        assert rejection is not None and rejection.code == code, (topic, queue_id, rejection)
    assert not targets.admit("test", "m", ONE_QUEUE, 77)
    assert targets.refused_count == 1
