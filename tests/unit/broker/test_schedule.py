"""Delay levels: the offset table, the send-path rewrite, and delivery by an in-process broker.

Method: pure checks of DelayOffsetTable and to_schedule, then a BrokerApp on 127.0.0.1 (port 0,
tmp dir, shortened levels "100ms 200ms 300ms") driven with raw SEND_MESSAGE and
CONSUMER_SEND_MSG_BACK commands; delivery is observed in the store and lateness measured
against store time + level delay.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orbitmq.broker.app import BrokerApp
from orbitmq.broker.schedule import (
    SCHEDULE_TOPIC,
    DelayOffsetTable,
    read_delay_offsets,
    to_schedule,
)
from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageConst
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.protocol.properties import encode_properties
from orbitmq.store.message_store import GetStatus, PutMessageRequest
from orbitmq.transport.connection import RemotingClient
from tests.unit.broker._apps import start_broker_app

LEVELS_MS = [100, 200, 300]


def test_delay_offset_table_round_trips_rocketmq_shape() -> None:
    table = DelayOffsetTable({1: 5, 3: 9})
    table.advance(2, 4)
    assert table.dirty
    decoded = DelayOffsetTable.decode(table.encode(), "x")
    assert [decoded.get(level) for level in (1, 2, 3, 4)] == [5, 4, 9, 0]
    assert b'"offsetTable"' in table.encode()


def test_delay_offset_table_rejects_other_json() -> None:
    with pytest.raises(RemoteProtocolError, match="where.json"):
        DelayOffsetTable.decode(b'{"table": 1}', "where.json")


def test_to_schedule_clamps_level_and_records_destination() -> None:
    put = PutMessageRequest(
        topic="T", queue_id=3, body=b"x", properties={MessageConst.DELAY_TIME_LEVEL: "40"}
    )
    to_schedule(put, 40, 18)
    assert (put.topic, put.queue_id) == (SCHEDULE_TOPIC, 17)
    assert put.properties[MessageConst.DELAY_TIME_LEVEL] == "18"
    assert put.properties[MessageConst.REAL_TOPIC] == "T"
    assert put.properties[MessageConst.REAL_QUEUE_ID] == "3"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    app = await start_app(tmp_path)
    try:
        yield app
    finally:
        await app.shutdown()


async def start_app(tmp_path: Path) -> BrokerApp:
    return await start_broker_app(
        tmp_path,
        messageDelayLevel=" ".join(f"{ms}ms" for ms in LEVELS_MS),
        flushDelayOffsetInterval="100",
    )


def send_command(topic: str, body: bytes, properties: dict[str, str], queue_id: int = 0) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="PG",
        topic=topic,
        queue_id=queue_id,
        born_timestamp=int(time.time() * 1000),
        properties=encode_properties({"UNIQ_KEY": f"U{time.time_ns()}", **properties}),
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext(), body)


async def wait_for_messages(app: BrokerApp, topic: str, count: int, timeout_s: float = 5.0) -> list[bytes]:
    """Records of ``topic`` queue 0, polled until ``count`` are there."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = app.state.store.get_messages(topic, 0, 0, 64)
        if result.status is GetStatus.FOUND and result.message_count >= count:
            return [bytes(buffer) for buffer in result.buffers]
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: fewer than {count} messages after {timeout_s} s")
        await _sleep_ms(5)


async def _sleep_ms(ms: int) -> None:
    await asyncio.sleep(ms / 1000)


async def test_schedule_delivers_each_level_on_time_never_early(broker: BrokerApp) -> None:
    client = RemotingClient()
    try:
        sent: dict[str, int] = {}
        for level in (1, 2, 3):
            response = await client.invoke(
                broker.address, send_command(f"DelayT{level}", b"L%d" % level, {"DELAY": str(level)})
            )
            assert response.code == ResponseCode.SUCCESS, response.remark
            sent[f"DelayT{level}"] = decode_offset_msg_id(response.ext_fields["msgId"]).commit_log_offset
        for level in (1, 2, 3):
            topic = f"DelayT{level}"
            (record,) = await wait_for_messages(broker, topic, 1)
            delivered, _ = decode_stored_message(record)
            held, _ = decode_stored_message(broker.state.store.read_message(sent[topic]) or b"")
            assert held.topic == SCHEDULE_TOPIC and held.queue_id == level - 1
            lateness_ms = delivered.store_timestamp - (held.store_timestamp + LEVELS_MS[level - 1])
            assert 0 <= lateness_ms < 100, lateness_ms
            assert MessageConst.DELAY_TIME_LEVEL not in delivered.properties
            assert delivered.uniq_key == held.uniq_key
            assert delivered.body == b"L%d" % level
    finally:
        await client.close()


async def test_schedule_clamps_levels_above_max(broker: BrokerApp) -> None:
    client = RemotingClient()
    try:
        started = time.time() * 1000
        response = await client.invoke(broker.address, send_command("DelayClamp", b"x", {"DELAY": "99"}))
        assert response.code == ResponseCode.SUCCESS
        (record,) = await wait_for_messages(broker, "DelayClamp", 1)
        delivered, _ = decode_stored_message(record)
        assert delivered.store_timestamp - started >= LEVELS_MS[-1] - 5
    finally:
        await client.close()


async def test_schedule_retry_from_send_back_waits_for_level(broker: BrokerApp) -> None:
    client = RemotingClient()
    try:
        response = await client.invoke(broker.address, send_command("DelayRetrySrc", b"r", {}))
        offset = decode_offset_msg_id(response.ext_fields["msgId"]).commit_log_offset
        header = ConsumerSendMsgBackRequestHeader(commit_log_offset=offset, group="CG_R", delay_level=2)
        back = await client.invoke(
            broker.address, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext())
        )
        assert back.code == ResponseCode.SUCCESS, back.remark
        sent_ms = time.time() * 1000
        assert broker.state.store.get_max_queue_offset("%RETRY%CG_R", 0) == 0
        (record,) = await wait_for_messages(broker, "%RETRY%CG_R", 1)
        retried, _ = decode_stored_message(record)
        assert retried.reconsume_times == 1
        assert retried.properties[MessageConst.RETRY_TOPIC] == "DelayRetrySrc"
        assert retried.store_timestamp >= sent_ms + LEVELS_MS[1] - 20
    finally:
        await client.close()


async def test_schedule_progress_survives_restart(tmp_path: Path) -> None:
    app = await start_app(tmp_path)
    client = RemotingClient()
    try:
        await client.invoke(app.address, send_command("DelayPersist", b"a", {"DELAY": "1"}))
        await wait_for_messages(app, "DelayPersist", 1)
        # This one is still waiting when the broker stops.
        await client.invoke(app.address, send_command("DelayPersist", b"b", {"DELAY": "3"}))
    finally:
        await client.close()
        await app.shutdown()
    offsets = read_delay_offsets(tmp_path / "store" / "config" / "delayOffset.json")
    assert offsets.get(1) == 1 and offsets.get(3) == 0
    app = await start_app(tmp_path)
    try:
        records = await wait_for_messages(app, "DelayPersist", 2)
        bodies = [decode_stored_message(record)[0].body for record in records]
        assert bodies == [b"a", b"b"]
        await _sleep_ms(400)
        assert app.state.store.get_max_queue_offset("DelayPersist", 0) == 2  # nothing redelivered
    finally:
        await app.shutdown()
