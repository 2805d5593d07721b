"""Requests the Apache Java clients send that OrbitMQ once refused, over raw commands.

Each was found by the interop tier (tests/interop), which drives the real clients; these
tests hold the behaviour without a JVM. One name server and one broker per module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import orjson
import pytest

from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.transport.connection import RemotingClient
from tests.integration.test_broker_messaging import pull_request, send
from tests.support.processes import ServerProcess, start_broker, start_namesrv

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp_path: Path = tmp_path_factory.mktemp("java_client_requests")
    started: list[ServerProcess] = []
    try:
        namesrv = start_namesrv(tmp_path)
        started.append(namesrv)
        started.append(start_broker(tmp_path, namesrv.addr))
        yield started[-1]
    finally:
        for proc in reversed(started):
            proc.kill()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    remoting = RemotingClient()
    try:
        yield remoting
    finally:
        await remoting.close()


async def test_broker_lite_pull_message_is_served_as_a_pull(
    broker: ServerProcess, client: RemotingClient
) -> None:
    """RocketMQ 5's DefaultLitePullConsumer pulls with LITE_PULL_MESSAGE (361), not PULL_MESSAGE."""
    response = await send(client, broker.addr, "LitePullTopic", b"lite", properties={"TAGS": "t"})
    assert response.code == ResponseCode.SUCCESS, response.remark
    pull = pull_request("LitePullTopic", "LitePullGroup", 0)
    lite = RemotingCommand.request(RequestCode.LITE_PULL_MESSAGE, pull.ext_fields)
    pulled = await client.invoke(broker.addr, lite)
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
    assert pulled.ext_fields["nextBeginOffset"] == "1"
    (message,) = decode_stored_messages(pulled.body)
    assert message.body == b"lite"


async def test_broker_get_topic_config_serves_one_topic(
    broker: ServerProcess, client: RemotingClient
) -> None:
    """GET_TOPIC_CONFIG (351): RocketMQ 5's mqadmin topicStatus and consumerProgress read it first."""
    response = await send(client, broker.addr, "TopicConfigTopic", b"x")
    assert response.code == ResponseCode.SUCCESS, response.remark
    request = RemotingCommand.request(
        RequestCode.GET_TOPIC_CONFIG, {"topic": "TopicConfigTopic", "lo": "true"}
    )
    answer = await client.invoke(broker.addr, request)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    config = orjson.loads(answer.body)
    assert config["topicName"] == "TopicConfigTopic"
    assert config["readQueueNums"] == config["writeQueueNums"] > 0
    assert config["perm"] == 6
    missing = RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": "NoSuchTopicHere"})
    answer = await client.invoke(broker.addr, missing)
    assert answer.code == ResponseCode.TOPIC_NOT_EXIST
    assert "NoSuchTopicHere" in (answer.remark or "")
