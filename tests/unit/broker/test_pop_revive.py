"""POP revive on an in-process broker: an expired delivery comes back through the group's pop
retry topic ``%RETRY%<group>_<topic>``, as Apache RocketMQ's PopReviveService brings it back.

Goal: a concurrent group's message whose invisible time ran out unacknowledged is stored again
in the retry topic (one queue, permission 6, RECONSUMETIMES + 1, ``1ST_POP_TIME`` and
``ORIGIN_GROUP`` set) and delivered from there under the topic the pop asked for, with its
offset in the retry topic and a ``POP_CK`` whose retry flag is "1" (what Apache 5.5.0 answers);
that handle acks it; it survives a restart that replays the journal; past the group's
retryMaxTimes it goes to ``%DLQ%<group>``; an orderly group's message is never revived so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orbitmq.broker.app import BrokerApp
from orbitmq.broker.pop.journal import SNAPSHOT_FILE
from orbitmq.model.message import MessageExt
from orbitmq.model.subscription_group import SubscriptionGroupConfig
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import CreateTopicRequestHeader, SendMessageRequestHeader
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.protocol.pop import (
    AckMessageRequestHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from orbitmq.protocol.properties import encode_properties
from orbitmq.store.message_store import GetStatus
from orbitmq.transport.connection import RemotingClient
from tests.unit.broker._apps import start_broker_app

TOPIC, GROUP = "ReviveT", "CG_REVIVE"
RETRY = f"%RETRY%{GROUP}_{TOPIC}"
SHORT_MS = 300


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    app = await start_broker_app(tmp_path)
    try:
        yield app
    finally:
        await app.shutdown()


async def _call(client: RemotingClient, app: BrokerApp, code: int, ext: dict[str, str]) -> RemotingCommand:
    return await client.invoke(f"127.0.0.1:{app.port}", RemotingCommand.request(code, ext, b""), 10_000)


async def _setup(client: RemotingClient, app: BrokerApp, count: int) -> None:
    create = CreateTopicRequestHeader(topic=TOPIC, read_queue_nums=1, write_queue_nums=1, perm=6)
    assert (await _call(client, app, RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext())).code == 0
    for index in range(count):
        properties = encode_properties({"TAGS": "a", "UNIQ_KEY": f"U{index}", "k": "v"})
        header = SendMessageRequestHeader("PG", TOPIC, 0, properties=properties)
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext(), f"m{index}".encode())
        assert (await client.invoke(f"127.0.0.1:{app.port}", request, 10_000)).code == 0


async def _pop(
    client: RemotingClient, app: BrokerApp, **changes: object
) -> tuple[RemotingCommand, list[MessageExt]]:
    fields: dict[str, object] = dict(
        consumer_group=GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=32, invisible_time=60_000, poll_time=0,
        born_time=int(time.time() * 1000), init_mode=0,
    )  # fmt: skip
    fields.update(changes)
    header = PopMessageRequestHeader(**fields)  # type: ignore[arg-type]
    response = await _call(client, app, RequestCode.POP_MESSAGE, header.to_ext())
    return response, decode_stored_messages(response.body) if response.body else []


async def _pop_until(
    client: RemotingClient, app: BrokerApp, **changes: object
) -> tuple[RemotingCommand, list[MessageExt]]:
    """Pop until something comes (a revived message needs its invisible time to run out)."""
    deadline = time.monotonic() + 10
    while True:
        response, messages = await _pop(client, app, **changes)
        if messages or time.monotonic() > deadline:
            return response, messages
        await asyncio.sleep(0.1)


def _handle(response: RemotingCommand, message: MessageExt) -> str:
    header = PopMessageResponseHeader.from_ext(response.ext_fields)
    return ExtraInfo(
        0, header.pop_time, header.invisible_time, 0, "0", "broker-a", message.queue_id, message.queue_offset
    ).encode()


async def _ack(
    client: RemotingClient, app: BrokerApp, topic: str, extra_info: str, message: MessageExt
) -> int:
    header = AckMessageRequestHeader(GROUP, topic, message.queue_id, extra_info, message.queue_offset)
    return (await _call(client, app, RequestCode.ACK_MESSAGE, header.to_ext())).code


async def test_pop_revive_puts_expired_message_into_retry_topic(
    broker: BrokerApp, client: RemotingClient
) -> None:
    await _setup(client, broker, 2)
    first, popped = await _pop(client, broker, invisible_time=SHORT_MS)
    assert [m.body for m in popped] == [b"m0", b"m1"]
    first_pop_time = PopMessageResponseHeader.from_ext(first.ext_fields).pop_time
    assert await _ack(client, broker, TOPIC, _handle(first, popped[0]), popped[0]) == ResponseCode.SUCCESS
    await asyncio.sleep(SHORT_MS / 1000)
    response, revived = await _pop_until(client, broker)
    # Apache 5.5.0 answers the revived m1 under the topic popped, with its offset in the retry
    # topic (the first message there), RECONSUMETIMES 1 and its POP_CK set, retry flag "1".
    assert [(m.topic, m.body, m.queue_id, m.queue_offset, m.reconsume_times) for m in revived] == [
        (TOPIC, b"m1", 0, 0, 1)
    ]
    message = revived[0]
    assert message.uniq_key == "U1" and message.properties["k"] == "v" and message.tags == "a"
    assert message.properties["1ST_POP_TIME"] == str(first_pop_time)
    assert message.properties["ORIGIN_GROUP"] == GROUP
    pop_ck = ExtraInfo.decode(message.properties["POP_CK"])
    assert (pop_ck.retry, pop_ck.queue_id, pop_ck.queue_offset) == ("1", 0, 0)
    assert response.ext_fields["msgOffsetInfo"] == "1 0 0"
    assert response.ext_fields["startOffsetInfo"] == "1 0 0"
    retry_config = broker.state.topics.get(RETRY)
    assert retry_config is not None
    assert (retry_config.read_queue_nums, retry_config.write_queue_nums, retry_config.perm) == (1, 1, 6)
    stored = broker.state.store.get_messages(RETRY, 0, 0, 8)
    assert stored.status is GetStatus.FOUND and len(stored.buffers) == 1
    (copy,) = decode_stored_messages(b"".join(bytes(buffer) for buffer in stored.buffers))
    assert (copy.topic, copy.body, copy.reconsume_times) == (RETRY, b"m1", 1)
    # m1 left the topic: the group's offset there is past it; in the retry topic it is in flight.
    assert broker.state.offsets.query(GROUP, TOPIC, 0) == 2
    assert broker.state.offsets.query(GROUP, RETRY, 0) == 0
    # The handle the broker set acks it, with the topic the client popped (as Apache's broker maps
    # the retry flag), and a second time it names nothing in flight.
    assert await _ack(client, broker, TOPIC, message.properties["POP_CK"], message) == ResponseCode.SUCCESS
    assert await _ack(client, broker, TOPIC, message.properties["POP_CK"], message) == ResponseCode.NO_MESSAGE
    assert broker.state.offsets.query(GROUP, RETRY, 0) == 1


async def test_pop_revive_survives_a_restart_that_replays_the_journal(
    tmp_path: Path, client: RemotingClient
) -> None:
    app = await start_broker_app(tmp_path)
    try:
        await _setup(client, app, 1)
        _, popped = await _pop(client, app, invisible_time=SHORT_MS)
        assert [m.body for m in popped] == [b"m0"]
    finally:
        await app.shutdown()
    # Without the snapshot the state comes back from the journal alone.
    (tmp_path / "store" / "config" / SNAPSHOT_FILE).unlink()
    await asyncio.sleep(SHORT_MS / 1000)
    restarted = await start_broker_app(tmp_path)
    try:
        _, revived = await _pop_until(client, restarted, invisible_time=60_000)
        assert [(m.body, m.queue_offset, m.reconsume_times) for m in revived] == [(b"m0", 0, 1)]
        handle = revived[0].properties.get("POP_CK", "")
        assert handle.split(" ")[4:5] == ["1"], "not popped from the retry topic"
    finally:
        await restarted.shutdown()
    (tmp_path / "store" / "config" / SNAPSHOT_FILE).unlink()
    again = await start_broker_app(tmp_path)
    try:
        # The revived delivery is still in flight after a second restart: nothing comes, and
        # its handle acks it.
        empty, _ = await _pop(client, again)
        assert empty.code == ResponseCode.POLLING_TIMEOUT
        assert await _ack(client, again, TOPIC, handle, revived[0]) == ResponseCode.SUCCESS
    finally:
        await again.shutdown()


async def test_pop_revive_sends_message_past_max_reconsume_times_to_dlq(
    broker: BrokerApp, client: RemotingClient
) -> None:
    broker.state.groups.put(SubscriptionGroupConfig(GROUP, retry_max_times=1))
    await _setup(client, broker, 1)
    _, popped = await _pop(client, broker, invisible_time=SHORT_MS)
    assert [m.reconsume_times for m in popped] == [0]
    await asyncio.sleep(SHORT_MS / 1000)
    _, revived = await _pop_until(client, broker, invisible_time=SHORT_MS)
    assert [(m.body, m.reconsume_times, m.properties["POP_CK"].split(" ")[4]) for m in revived] == [
        (b"m0", 1, "1")
    ]
    await asyncio.sleep(SHORT_MS / 1000)
    # Two deliveries used retryMaxTimes + 1: the next pop stores it in the DLQ instead.
    empty, _ = await _pop(client, broker)
    assert empty.code == ResponseCode.POLLING_TIMEOUT
    dead = broker.state.store.get_messages(f"%DLQ%{GROUP}", 0, 0, 8)
    assert dead.status is GetStatus.FOUND
    (letter,) = decode_stored_messages(b"".join(bytes(buffer) for buffer in dead.buffers))
    assert (letter.body, letter.uniq_key, letter.reconsume_times) == (b"m0", "U0", 2)
    # It names the topic it was consumed from, not the retry topic its last copy was read from.
    assert letter.properties["RETRY_TOPIC"] == letter.properties["DLQ_ORIGIN_TOPIC"] == TOPIC
    assert broker.state.store.get_max_queue_offset(RETRY, 0) == 1  # revived once, not twice


async def test_pop_revive_leaves_orderly_deliveries_in_their_queue(
    broker: BrokerApp, client: RemotingClient
) -> None:
    await _setup(client, broker, 1)
    _, popped = await _pop(client, broker, order=True, invisible_time=SHORT_MS)
    assert [m.queue_offset for m in popped] == [0]
    await asyncio.sleep(SHORT_MS / 1000)
    _, again = await _pop_until(client, broker, order=True)
    # RocketMQ redelivers an orderly message from its own queue; no retry topic is involved.
    assert [(m.topic, m.queue_offset, m.reconsume_times) for m in again] == [(TOPIC, 0, 1)]
    assert "POP_CK" not in again[0].properties
    assert broker.state.topics.get(RETRY) is None
