"""Refused sends against an in-process broker: what the answer's header carries.

Method: a BrokerApp on 127.0.0.1 (port 0, tmp dir, regionId and traceOn set), raw
SEND_MESSAGE_V2 commands from a RemotingClient; the answers' ext fields are checked.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orbitmq.broker.app import BrokerApp
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import CreateTopicRequestHeader, SendMessageRequestHeader
from orbitmq.transport.connection import RemotingClient
from tests.unit.broker._apps import start_broker_app

TOPIC = "RefusedTopic"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    app = await start_broker_app(tmp_path, regionId="RegionX", traceOn="false")
    try:
        yield app
    finally:
        await app.shutdown()


def send_v2(topic: str, queue_id: int) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="PG_REFUSED", topic="T", queue_id=0, born_timestamp=int(time.time() * 1000)
    )
    ext = {**header.to_v2_ext(), "b": topic, "e": str(queue_id)}
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"x")


async def test_send_refusals_carry_msg_region_and_trace_on(broker: BrokerApp, client: RemotingClient) -> None:
    create = CreateTopicRequestHeader(topic=TOPIC, read_queue_nums=4, write_queue_nums=4)
    created = await client.invoke(
        broker.address, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext())
    )
    assert created.code == ResponseCode.SUCCESS, created.remark
    refusals = {
        "queue out of range": (send_v2(TOPIC, 99), ResponseCode.SYSTEM_ERROR),
        "illegal topic name": (send_v2("bad topic!", 0), ResponseCode.SYSTEM_ERROR),
        "broker-written topic": (send_v2("SCHEDULE_TOPIC_XXXX", 0), ResponseCode.NO_PERMISSION),
    }
    for label, (request, code) in refusals.items():
        response = await client.invoke(broker.address, request)
        assert response.code == code, (label, response.remark)
        # RocketMQ's broker stamps them on the response before its checks (oracle: send_refused).
        assert response.ext_fields.get("MSG_REGION") == "RegionX", label
        assert response.ext_fields.get("TRACE_ON") == "false", label
    stored = await client.invoke(broker.address, send_v2(TOPIC, 0))
    assert stored.code == ResponseCode.SUCCESS, stored.remark
    assert (stored.ext_fields["MSG_REGION"], stored.ext_fields["TRACE_ON"]) == ("RegionX", "false")


async def test_send_header_that_cannot_be_read_gets_no_broker_stamps(
    broker: BrokerApp, client: RemotingClient
) -> None:
    # RocketMQ fails such a header before its send checks: no MSG_REGION/TRACE_ON either.
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "PG_REFUSED", "e": "0"}, b"x")
    response = await client.invoke(broker.address, request)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "topic" in (response.remark or "")
    assert "MSG_REGION" not in response.ext_fields and "TRACE_ON" not in response.ext_fields
