"""Timed messages: property parsing, and delivery at the due millisecond by an in-process broker.

Method: a BrokerApp on 127.0.0.1 (port 0, tmp dir, 100 ms wheel slots) driven with raw
SEND_MESSAGE / batch commands. Delivery is observed in the store; lateness = delivered record's
store time - due time, which must be >= 0 (never early) and small.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orbitmq.broker.app import BrokerApp
from orbitmq.broker.timer import TIMER_OUT_MS, TIMER_TOPIC, timer_due_ms
from orbitmq.model.message import MessageConst, MessageExt
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import SendMessageRequestHeader
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.protocol.properties import encode_properties
from orbitmq.store.message_store import GetStatus
from orbitmq.transport.connection import RemotingClient
from tests.unit.broker._apps import start_broker_app


def test_timer_due_ms_reads_every_timer_property() -> None:
    assert timer_due_ms({}, 1_000) is None
    assert timer_due_ms({"TIMER_DELIVER_MS": "5000"}, 1_000) == 5_000
    assert timer_due_ms({"__STARTDELIVERTIME": "7000"}, 1_000) == 7_000
    assert timer_due_ms({"TIMER_DELAY_MS": "250"}, 1_000) == 1_250
    assert timer_due_ms({"TIMER_DELAY_SEC": "3"}, 1_000) == 4_000


def test_timer_due_ms_rejects_non_numbers() -> None:
    with pytest.raises(ValueError, match="TIMER_DELAY_SEC"):
        timer_due_ms({"TIMER_DELAY_SEC": "soon"}, 0)


async def start_app(tmp_path: Path, **extra: str) -> BrokerApp:
    conf = {"timerPrecisionMs": "100", "timerMaxDelaySec": "60", "timerFlushIntervalMs": "100"}
    return await start_broker_app(tmp_path, **{**conf, **extra})


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    app = await start_app(tmp_path)
    try:
        yield app
    finally:
        await app.shutdown()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def send_command(topic: str, body: bytes, properties: dict[str, str]) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="PG",
        topic=topic,
        queue_id=0,
        born_timestamp=now_ms(),
        properties=encode_properties({"UNIQ_KEY": f"U{time.time_ns()}", **properties}),
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext(), body)


async def delivered(app: BrokerApp, topic: str, count: int, timeout_s: float = 5.0) -> list[MessageExt]:
    deadline = time.monotonic() + timeout_s
    while True:
        result = app.state.store.get_messages(topic, 0, 0, 256, 1 << 24)
        if result.status is GetStatus.FOUND and result.message_count >= count:
            return [decode_stored_message(buffer)[0] for buffer in result.buffers]
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: fewer than {count} messages after {timeout_s} s")
        await asyncio.sleep(0.005)


async def test_timer_each_property_delivers_on_time_never_early(
    broker: BrokerApp, client: RemotingClient
) -> None:
    base = now_ms()
    cases = {
        "TimerDeliverMs": ({"TIMER_DELIVER_MS": str(base + 350)}, base + 350),
        "TimerStart": ({"__STARTDELIVERTIME": str(base + 420)}, base + 420),
        "TimerDelayMs": ({"TIMER_DELAY_MS": "270"}, None),
        "TimerDelaySec": ({"TIMER_DELAY_SEC": "1"}, None),
    }
    # Relative delays count from the broker's receipt, which lies between the moment the send
    # left and the moment its answer came back: never early is checked against the first,
    # on time against the second.
    receipt_ms: dict[str, tuple[int, int]] = {}
    for topic, (properties, _) in cases.items():
        sent_ms = now_ms()
        response = await client.invoke(broker.address, send_command(topic, topic.encode(), properties))
        receipt_ms[topic] = (sent_ms, now_ms())
        assert response.code == ResponseCode.SUCCESS, response.remark
        assert broker.state.store.get_max_queue_offset(topic, 0) == 0  # held, not visible
    for topic, (properties, due_ms) in cases.items():
        (message,) = await delivered(broker, topic, 1)
        if due_ms is None:
            delay = int(properties.get("TIMER_DELAY_MS", "0")) or int(properties["TIMER_DELAY_SEC"]) * 1000
            earliest_ms, latest_ms = (moment + delay for moment in receipt_ms[topic])
        else:
            earliest_ms = latest_ms = due_ms
        assert message.store_timestamp >= earliest_ms, (topic, message.store_timestamp - earliest_ms)
        lateness_ms = message.store_timestamp - latest_ms
        assert lateness_ms < 150, (topic, lateness_ms)
        assert message.body == topic.encode()
        assert TIMER_OUT_MS not in message.properties
        assert message.properties[MessageConst.REAL_TOPIC] == topic


async def test_timer_refuses_due_beyond_max_delay(broker: BrokerApp, client: RemotingClient) -> None:
    response = await client.invoke(
        broker.address, send_command("TimerFar", b"x", {"TIMER_DELIVER_MS": str(now_ms() + 61_000)})
    )
    assert response.code == ResponseCode.MESSAGE_ILLEGAL
    assert "timerMaxDelaySec=60" in (response.remark or "")
    assert "TimerFar" in (response.remark or "")


async def test_timer_past_due_is_delivered_at_once(broker: BrokerApp, client: RemotingClient) -> None:
    response = await client.invoke(
        broker.address, send_command("TimerPast", b"x", {"TIMER_DELIVER_MS": str(now_ms() - 5_000)})
    )
    assert response.code == ResponseCode.SUCCESS
    assert broker.state.store.get_max_queue_offset("TimerPast", 0) == 1


async def test_timer_batch_members_each_wait_for_their_time(
    broker: BrokerApp, client: RemotingClient
) -> None:
    base = now_ms()
    dues = [base + 500, base + 200, base + 350]
    body = encode_batch(
        [
            (0, f"m{index}".encode(), {"UNIQ_KEY": f"B{index}", "TIMER_DELIVER_MS": str(due)})
            for index, due in enumerate(dues)
        ]
    )
    header = SendMessageRequestHeader(
        producer_group="PG", topic="TimerBatch", queue_id=0, born_timestamp=base, batch=True
    )
    response = await client.invoke(
        broker.address, RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header.to_ext(), body)
    )
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert len(response.ext_fields["msgId"].split(",")) == 3
    messages = await delivered(broker, "TimerBatch", 3)
    assert [message.body for message in messages] == [b"m1", b"m2", b"m0"]
    for message in messages:
        due = int(message.properties["TIMER_DELIVER_MS"])
        assert 0 <= message.store_timestamp - due < 150


async def test_timer_pending_messages_survive_restart(tmp_path: Path) -> None:
    app = await start_app(tmp_path)
    client = RemotingClient()
    due = now_ms() + 1_200
    try:
        for index in range(20):
            response = await client.invoke(
                app.address,
                send_command("TimerRestart", b"%d" % index, {"TIMER_DELIVER_MS": str(due + index)}),
            )
            assert response.code == ResponseCode.SUCCESS
    finally:
        await client.close()
        await app.shutdown()
    assert (tmp_path / "store" / "timer" / "timercheck.json").exists()
    app = await start_app(tmp_path)
    try:
        messages = await delivered(app, "TimerRestart", 20)
        assert sorted(message.body for message in messages) == sorted(b"%d" % index for index in range(20))
        for message in messages:
            assert message.store_timestamp >= int(message.properties["TIMER_DELIVER_MS"])
        await asyncio.sleep(0.3)
        assert app.state.store.get_max_queue_offset("TimerRestart", 0) == 20  # none twice
        assert app.state.store.get_max_queue_offset(TIMER_TOPIC, 0) == 20
    finally:
        await app.shutdown()
