"""Broker and name server limits: what a client past each one is answered (docs/limits.md).

Method: an in-process BrokerApp (or NamesrvApp) on 127.0.0.1 with tiny limits set through
their config keys, and a RemotingClient sending the requests that reach each limit. Every
refusal names the config key, and requests within the limits keep being served.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from orbitmq.broker.app import BrokerApp
from orbitmq.model.route import TopicConfig
from orbitmq.namesrv.app import NamesrvApp
from orbitmq.namesrv.config import load_namesrv_config
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import CreateTopicRequestHeader, PullMessageRequestHeader
from orbitmq.transport.connection import RemotingClient
from tests.unit.broker._apps import start_broker_app
from tests.unit.namesrv.test_namesrv_handlers import register_request


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    remoting = RemotingClient()
    try:
        yield remoting
    finally:
        await remoting.close()


async def _create(client: RemotingClient, app: BrokerApp, topic: str) -> RemotingCommand:
    header = CreateTopicRequestHeader(topic=topic, read_queue_nums=1, write_queue_nums=1)
    return await client.invoke(
        app.address, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
    )


def _parking_pull(topic: str, suspend_ms: int) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group="CG_LIMITS", topic=topic, queue_id=0, queue_offset=0, sys_flag=0x2 | 0x4,
        suspend_timeout_millis=suspend_ms, subscription="*",
    )  # fmt: skip
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())


def _heartbeat(groups: list[str], client_id: str = "limits-client") -> RemotingCommand:
    body = {"clientID": client_id, "consumerDataSet": [{"groupName": group} for group in groups]}
    return RemotingCommand.request(RequestCode.HEART_BEAT, {}, orjson.dumps(body))


async def test_broker_refuses_topics_past_max_topics_per_broker(
    tmp_path: Path, client: RemotingClient
) -> None:
    app = await start_broker_app(tmp_path, maxTopicsPerBroker="12")
    try:
        answers = [await _create(client, app, f"LimitTopic{index}") for index in range(12)]
        refused = [answer for answer in answers if answer.code != ResponseCode.SUCCESS]
        assert refused, "12 topics plus the system ones must pass the limit"
        assert refused[0].code == ResponseCode.SYSTEM_ERROR
        assert "maxTopicsPerBroker=12" in (refused[0].remark or "")
        # Topics that exist stay usable, and re-creating one is not a new topic.
        assert (await _create(client, app, "LimitTopic0")).code == ResponseCode.SUCCESS
    finally:
        await app.shutdown()


async def test_broker_answers_system_busy_past_max_parked_pulls_per_connection(
    tmp_path: Path, client: RemotingClient
) -> None:
    app = await start_broker_app(tmp_path, maxParkedPullsPerConnection="2")
    try:
        assert (await _create(client, app, "ParkTopic")).code == ResponseCode.SUCCESS
        parked = [
            asyncio.ensure_future(client.invoke(app.address, _parking_pull("ParkTopic", 800)))
            for _ in range(2)
        ]
        await asyncio.sleep(0.2)
        started = time.monotonic()
        third = await client.invoke(app.address, _parking_pull("ParkTopic", 800))
        assert time.monotonic() - started < 0.5
        assert third.code == ResponseCode.SYSTEM_BUSY
        assert "maxParkedPullsPerConnection=2" in (third.remark or "")
        assert [(await pull).code for pull in parked] == [ResponseCode.PULL_NOT_FOUND] * 2
    finally:
        await app.shutdown()


async def test_broker_holds_a_pull_no_longer_than_long_polling_suspend_max(
    tmp_path: Path, client: RemotingClient
) -> None:
    app = await start_broker_app(tmp_path, longPollingSuspendMaxMillis="300")
    try:
        assert (await _create(client, app, "HoldTopic")).code == ResponseCode.SUCCESS
        started = time.monotonic()
        response = await client.invoke(app.address, _parking_pull("HoldTopic", 60_000), timeout_ms=10_000)
        assert response.code == ResponseCode.PULL_NOT_FOUND
        assert 0.25 <= time.monotonic() - started < 3
    finally:
        await app.shutdown()


async def test_broker_refuses_heartbeats_past_consumer_group_and_client_limits(
    tmp_path: Path, client: RemotingClient
) -> None:
    app = await start_broker_app(tmp_path, maxConsumerGroups="8", maxTrackedClients="3")
    try:
        within = await client.invoke(app.address, _heartbeat(["CG_A", "CG_B"]))
        assert within.code == ResponseCode.SUCCESS, within.remark
        too_many_members = await client.invoke(app.address, _heartbeat(["CG_C", "CG_D"]))
        assert too_many_members.code == ResponseCode.SYSTEM_ERROR
        assert "maxTrackedClients=3" in (too_many_members.remark or "")
        too_many_groups = [
            await client.invoke(app.address, _heartbeat([f"CG_{index}"], client_id=f"c{index}"))
            for index in range(8)
        ]
        remarks = " ".join(answer.remark or "" for answer in too_many_groups)
        assert "maxConsumerGroups=8" in remarks or "maxTrackedClients=3" in remarks
        # A member heartbeating again is not a new member.
        assert (await client.invoke(app.address, _heartbeat(["CG_A", "CG_B"]))).code == ResponseCode.SUCCESS
    finally:
        await app.shutdown()


async def test_namesrv_refuses_registrations_past_its_topic_and_broker_limits(client: RemotingClient) -> None:
    config = load_namesrv_config(
        None, {"listenPort": "0", "bindAddress": "127.0.0.1", "maxTopicsPerBroker": "3", "maxBrokers": "1"}
    )
    app = NamesrvApp(config)
    await app.startup()
    try:
        topics = {f"T{index}": TopicConfig(f"T{index}", 1, 1) for index in range(4)}
        too_many = await client.invoke(app.address, register_request(topics))
        assert too_many.code == ResponseCode.SYSTEM_ERROR
        assert "maxTopicsPerBroker=3" in (too_many.remark or "")
        odd = {"T0": TopicConfig("T0", 1, 1), "bad name": TopicConfig("bad name", 1, 1)}
        assert (await client.invoke(app.address, register_request(odd))).code == ResponseCode.SUCCESS
        assert sorted(app.route_table.all_topics()) == ["T0"]
        second = await client.invoke(
            app.address, register_request(odd, broker_addr="127.0.0.1:20911", broker_name="broker-b")
        )
        assert second.code == ResponseCode.SYSTEM_ERROR
        assert "maxBrokers=1" in (second.remark or "")
    finally:
        await app.shutdown()
