"""The broker's VIP channel (vipChannelEnabled=true): every request is served on listenPort - 2 too, as RocketMQ's broker does.

A Java slave fetches its master's topic table there (GET_ALL_TOPIC_CONFIG on the VIP port);
tests/oracle/test_mixed_cluster.py runs one against an OrbitMQ master.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import create_topic, free_port_block, start_broker

pytestmark = pytest.mark.integration


def test_broker_vip_channel_serves_topic_table_on_listen_port_minus_two(tmp_path: Path) -> None:
    base = free_port_block(3)
    broker = start_broker(tmp_path, None, "broker-vip", listenPort=base + 2, vipChannelEnabled=True)
    try:
        create_topic(broker.addr, "VipTopic")

        async def topic_table() -> dict[str, object]:
            client = RemotingClient()
            try:
                request = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG)
                response = await client.invoke(f"127.0.0.1:{base}", request, timeout_ms=5000)
            finally:
                await client.close()
            assert response.code == ResponseCode.SUCCESS
            table: dict[str, object] = orjson.loads(response.body)["topicConfigTable"]
            return table

        assert "VipTopic" in asyncio.run(topic_table())
    finally:
        broker.stop()
