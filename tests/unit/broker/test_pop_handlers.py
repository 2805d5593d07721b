"""POP_MESSAGE, ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME on an in-process broker.

Goal: each refusal answers its RocketMQ code with a remark naming what was wrong, and the
engine's promises hold over the wire: a pop hides what it returns, an ack finishes it (a second
ack is refused), a nack brings it back as the next attempt, tags and SQL92 expressions filter, a group new to a queue
starts at its first message, a repeated attempt id gets the same messages, and the state
survives a clean restart (the snapshot) with nothing redelivered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orbitmq.broker.app import BrokerApp
from orbitmq.model.message import MessageExt
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import CreateTopicRequestHeader, SendMessageRequestHeader
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.protocol.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from orbitmq.protocol.properties import encode_properties
from orbitmq.transport.connection import RemotingClient
from tests.unit.broker._apps import start_broker_app

TOPIC, GROUP = "PopT", "CG_POP"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    app = await start_broker_app(tmp_path)
    try:
        yield app
    finally:
        await app.shutdown()


async def _call(
    client: RemotingClient, app: BrokerApp, code: int, ext: dict[str, str], body: bytes = b""
) -> RemotingCommand:
    return await client.invoke(f"127.0.0.1:{app.port}", RemotingCommand.request(code, ext, body), 10_000)


async def _setup(
    client: RemotingClient, app: BrokerApp, tags: list[str], properties: list[dict[str, str]] | None = None
) -> None:
    create = CreateTopicRequestHeader(topic=TOPIC, read_queue_nums=1, write_queue_nums=1, perm=6)
    assert (
        await _call(client, app, RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext())
    ).code == ResponseCode.SUCCESS
    for index, tag in enumerate(tags):
        user = properties[index] if properties else {}
        header = SendMessageRequestHeader(
            "PG", TOPIC, 0, properties=encode_properties({**user, "TAGS": tag, "UNIQ_KEY": f"U{index}"})
        )
        response = await _call(client, app, RequestCode.SEND_MESSAGE, header.to_ext(), f"m{index}".encode())
        assert response.code == ResponseCode.SUCCESS


async def _pop(
    client: RemotingClient, app: BrokerApp, **changes: object
) -> tuple[RemotingCommand, list[MessageExt]]:
    fields: dict[str, object] = dict(
        consumer_group=GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=32, invisible_time=60_000, poll_time=0,
        born_time=int(time.time() * 1000), init_mode=1,
    )  # fmt: skip
    fields.update(changes)
    response = await _call(client, app, RequestCode.POP_MESSAGE, PopMessageRequestHeader(**fields).to_ext())  # type: ignore[arg-type]
    return response, decode_stored_messages(response.body) if response.body else []


def _handle(response: RemotingCommand, message: MessageExt) -> str:
    header = PopMessageResponseHeader.from_ext(response.ext_fields)
    return ExtraInfo(
        0, header.pop_time, header.invisible_time, 0, "0", "broker-a", message.queue_id, message.queue_offset
    ).encode()


async def test_pop_handlers_refuse_bad_requests_with_rocketmq_codes(
    broker: BrokerApp, client: RemotingClient
) -> None:
    await _setup(client, broker, ["a"])
    cases = [
        ({"max_msg_nums": 33}, ResponseCode.INVALID_PARAMETER, "maxMsgNums 33"),
        ({"queue_id": 5}, ResponseCode.INVALID_PARAMETER, "queueId[5]"),
        ({"topic": "NoSuchTopic"}, ResponseCode.TOPIC_NOT_EXIST, "NoSuchTopic"),
        # enablePropertyFilter is off by default, as in RocketMQ: SQL92 is refused as on the pull path.
        ({"exp_type": "SQL92", "exp": "a > 1"}, ResponseCode.SYSTEM_ERROR, "enablePropertyFilter=false"),
        ({"exp_type": "XPATH", "exp": "a"}, ResponseCode.SUBSCRIPTION_PARSE_FAILED, "XPATH"),
        ({"consumer_group": "bad group"}, ResponseCode.SYSTEM_ERROR, "bad group"),
    ]
    for changes, code, named in cases:
        response, _ = await _pop(client, broker, **changes)
        assert response.code == code and named in (response.remark or ""), (
            changes,
            response.code,
            response.remark,
        )
    bad = AckMessageRequestHeader(GROUP, TOPIC, 0, "not a handle", 0)
    response = await _call(client, broker, RequestCode.ACK_MESSAGE, bad.to_ext())
    assert response.code == ResponseCode.MESSAGE_ILLEGAL and "receipt handle" in (response.remark or "")
    missing = await _call(client, broker, RequestCode.ACK_MESSAGE, {"consumerGroup": GROUP})
    assert missing.code == ResponseCode.SYSTEM_ERROR  # the header cannot be read: said in the remark


async def test_pop_handlers_deliver_hide_ack_nack_and_filter(
    broker: BrokerApp, client: RemotingClient
) -> None:
    await _setup(client, broker, ["a", "b", "a"])
    response, messages = await _pop(client, broker, exp_type="TAG", exp="a", attempt_id="attempt-1")
    assert response.code == ResponseCode.SUCCESS and [m.body for m in messages] == [b"m0", b"m2"]
    # Hidden from the rest of the group; the same attempt id gets the same messages again.
    empty, _ = await _pop(client, broker, exp_type="TAG", exp="a")
    assert empty.code == ResponseCode.POLLING_TIMEOUT
    again, repeated = await _pop(client, broker, exp_type="TAG", exp="a", attempt_id="attempt-1")
    assert [m.queue_offset for m in repeated] == [0, 2]
    first, second = messages
    ack = AckMessageRequestHeader(GROUP, TOPIC, 0, _handle(response, first), first.queue_offset)
    assert (await _call(client, broker, RequestCode.ACK_MESSAGE, ack.to_ext())).code == ResponseCode.SUCCESS
    twice = await _call(client, broker, RequestCode.ACK_MESSAGE, ack.to_ext())
    assert twice.code == ResponseCode.NO_MESSAGE and "no delivery in flight" in (twice.remark or "")
    nack = ChangeInvisibleTimeRequestHeader(
        GROUP, TOPIC, 0, _handle(response, second), second.queue_offset, 0
    )
    changed = await _call(client, broker, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, nack.to_ext())
    assert changed.code == ResponseCode.SUCCESS
    # m2 comes back through the retry topic once the reput has dispatched its revived copy: a
    # long-polling pop (as clients make) is woken by its arrival.
    back, redelivered = await _pop(client, broker, exp_type="TAG", exp="a", poll_time=5_000)
    assert [(m.body, m.reconsume_times) for m in redelivered] == [(b"m2", 1)]
    # The filtered "b" message is done for this group, and the nacked m2 left the topic for the
    # group's pop retry topic, where it is in flight again: the group's offsets say so.
    assert broker.state.offsets.query(GROUP, TOPIC, 0) == 3
    assert broker.state.offsets.query(GROUP, f"%RETRY%{GROUP}_{TOPIC}", 0) == 0


async def test_pop_handlers_count_deliveries_in_group_get_stats(
    broker: BrokerApp, client: RemotingClient
) -> None:
    # RocketMQ's pop processor counts what it hands out like a pull does (GROUP_GET_NUMS/SIZE);
    # VIEW_BROKER_STATS_DATA and rocketmq_messages_out_total both read these totals.
    await _setup(client, broker, ["a", "b", "a"])
    response, messages = await _pop(client, broker)
    assert response.code == ResponseCode.SUCCESS and len(messages) == 3
    empty, _ = await _pop(client, broker)
    assert empty.code == ResponseCode.POLLING_TIMEOUT
    stats = broker.state.stats
    assert stats.group_get_totals() == {(TOPIC, GROUP): (3, len(response.body))}
    now = int(time.time() * 1000)
    stats.sample(now)  # the once-a-second sampling that opens the item's windows
    figures = stats.figures("GROUP_GET_NUMS", f"{TOPIC}@{GROUP}", now)
    assert figures is not None and figures[0].sum == 3


async def test_pop_handlers_count_a_message_once_under_its_topic_however_often_it_comes_back(
    broker: BrokerApp, client: RemotingClient
) -> None:
    # statsAll's out_msg_24h read 40 for 20 messages each delivered twice (a failed first
    # attempt): RocketMQ pops a redelivery from %RETRY%<group>_<topic> and counts it there, so
    # the topic's figure counts each message once; a repeated attempt id hands out nothing new.
    await _setup(client, broker, ["a", "a"])
    response, messages = await _pop(client, broker, attempt_id="attempt-1")
    assert len(messages) == 2
    again, repeated = await _pop(client, broker, attempt_id="attempt-1")
    assert len(repeated) == 2
    for message in messages:
        nack = ChangeInvisibleTimeRequestHeader(
            GROUP, TOPIC, 0, _handle(response, message), message.queue_offset, 0
        )
        changed = await _call(client, broker, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, nack.to_ext())
        assert changed.code == ResponseCode.SUCCESS
    # The nacked messages come back through the retry topic, once the reput has dispatched the
    # revived copies: a long-polling pop (as clients make) is woken by their arrival, also when it
    # came between the pop's own read and its parking (a pop that waited out its 10 s poll time
    # missed it).
    started = time.monotonic()
    back, redelivered = await _pop(client, broker, poll_time=10_000)
    assert time.monotonic() - started < 5.0
    assert [m.reconsume_times for m in redelivered] == [1, 1]
    totals = broker.state.stats.group_get_totals()
    assert totals[(TOPIC, GROUP)] == (2, len(response.body)), totals
    assert totals[(f"%RETRY%{GROUP}_{TOPIC}", GROUP)][0] == 2, totals


async def test_pop_handlers_state_survives_a_clean_restart(tmp_path: Path, client: RemotingClient) -> None:
    app = await start_broker_app(tmp_path)
    try:
        await _setup(client, app, ["a", "a", "a"])
        response, messages = await _pop(client, app, max_msg_nums=2)
        ack = AckMessageRequestHeader(GROUP, TOPIC, 0, _handle(response, messages[0]), 0)
        assert (await _call(client, app, RequestCode.ACK_MESSAGE, ack.to_ext())).code == ResponseCode.SUCCESS
    finally:
        await app.shutdown()
    await client.close()
    restarted = await start_broker_app(tmp_path)
    fresh = RemotingClient()
    try:
        # offset 0 acked, offset 1 still in flight for 60 s: only offset 2 is left to pop.
        _, left = await _pop(fresh, restarted)
        assert [m.queue_offset for m in left] == [2]
        still = ChangeInvisibleTimeRequestHeader(GROUP, TOPIC, 0, _handle(response, messages[1]), 1, 0)
        assert (
            await _call(fresh, restarted, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, still.to_ext())
        ).code == ResponseCode.SUCCESS
    finally:
        await fresh.close()
        await restarted.shutdown()


async def test_pop_handlers_filter_by_sql92_when_property_filters_are_enabled(
    tmp_path: Path, client: RemotingClient
) -> None:
    app = await start_broker_app(tmp_path, enablePropertyFilter="true")
    try:
        amounts = [{"amount": "3"}, {"amount": "12"}, {}, {"amount": "40", "region": "eu"}]
        await _setup(client, app, ["a", "b", "a", "a"], amounts)
        response, messages = await _pop(
            client, app, exp_type="SQL92", exp="amount > 5 AND TAGS = 'a' OR region IS NOT NULL"
        )
        assert response.code == ResponseCode.SUCCESS and [m.body for m in messages] == [b"m3"]
        # The three before it were filtered out, so done for the group; m3 is in flight.
        assert app.state.offsets.query(GROUP, TOPIC, 0) == 3
        bad, _ = await _pop(client, app, exp_type="SQL92", exp="amount >")
        assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "line 1, column" in (bad.remark or "") and GROUP in (bad.remark or "")
    finally:
        await app.shutdown()


async def test_pop_handlers_fifo_ack_wakes_a_pop_waiting_behind_its_message_group(
    broker: BrokerApp, client: RemotingClient
) -> None:
    """An orderly pop waiting for the next message of a busy message group gets it when the
    group's in-flight message is acknowledged, not at its poll deadline."""
    await _setup(client, broker, ["a", "a"])
    response, first = await _pop(client, broker, order=True, max_msg_nums=1)
    assert [m.body for m in first] == [b"m0"]
    started = time.monotonic()
    waiting = asyncio.ensure_future(_pop(client, broker, order=True, max_msg_nums=1, poll_time=8_000))
    await asyncio.sleep(0.5)
    assert not waiting.done()  # m1 waits behind m0 of the same message group
    ack = AckMessageRequestHeader(GROUP, TOPIC, 0, _handle(response, first[0]), first[0].queue_offset)
    assert (await _call(client, broker, RequestCode.ACK_MESSAGE, ack.to_ext())).code == ResponseCode.SUCCESS
    second_response, second = await waiting
    waited_s = time.monotonic() - started
    assert second_response.code == ResponseCode.SUCCESS and [m.body for m in second] == [b"m1"]
    assert waited_s < 4, f"the waiting pop answered after {waited_s:.1f} s, at its poll deadline"


async def test_pop_handlers_fifo_pop_does_not_reread_messages_held_behind_a_busy_group(
    broker: BrokerApp, client: RemotingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Messages held back behind a message group still in flight are not read from the store
    again by every pop: their group is known, and none of them can go out yet."""
    from orbitmq.broker.pop import service as pop_service

    await _setup(client, broker, ["a"] * 40)
    response, first = await _pop(client, broker, order=True, max_msg_nums=1)
    assert [m.body for m in first] == [b"m0"]
    held, _ = await _pop(client, broker, order=True, max_msg_nums=1)  # holds m1..m39 behind m0
    assert held.code == ResponseCode.POLLING_TIMEOUT
    reads: list[int] = []
    original = pop_service.read_one

    def counting(store: object, topic: str, queue_id: int, offset: int) -> bytes | None:
        reads.append(offset)
        return original(store, topic, queue_id, offset)  # type: ignore[arg-type]

    monkeypatch.setattr(pop_service, "read_one", counting)
    again, _ = await _pop(client, broker, order=True, max_msg_nums=1)
    assert again.code == ResponseCode.POLLING_TIMEOUT and reads == []
    ack = AckMessageRequestHeader(GROUP, TOPIC, 0, _handle(response, first[0]), first[0].queue_offset)
    assert (await _call(client, broker, RequestCode.ACK_MESSAGE, ack.to_ext())).code == ResponseCode.SUCCESS
    _, after_ack = await _pop(client, broker, order=True, max_msg_nums=1)
    assert [m.body for m in after_ack] == [b"m1"]
