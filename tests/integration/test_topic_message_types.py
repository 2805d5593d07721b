"""RocketMQ 5 topic message types end to end: ``orbitmq admin updateTopic -a``, the broker's topic
config (GET_TOPIC_CONFIG, GET_ALL_TOPIC_CONFIG, topics.json) and the gRPC proxy's route and check.

One standalone for the module; the gRPC side is a raw client (the proxy's stubs), so the test
sees what the proxy itself answers, not what an SDK makes of it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import grpc
import orjson
import pytest

from orbitmq.cli.admin import main
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import CreateTopicRequestHeader
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy._pb import service_pb2_grpc as spb_grpc
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, start_standalone

pytestmark = pytest.mark.integration

CLIENT = (("x-mq-client-id", "host@1@0@types"),)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_standalone(tmp_path_factory.mktemp("types"))
    try:
        yield proc
    finally:
        proc.kill()


def broker_request(server: ServerProcess, code: int, ext: dict[str, str]) -> RemotingCommand:
    async def invoke() -> RemotingCommand:
        client = RemotingClient()
        try:
            request = RemotingCommand.request(code, ext)
            return await client.invoke(f"127.0.0.1:{server.extra_ports[0]}", request, timeout_ms=10_000)
        finally:
            await client.close()

    return asyncio.run(invoke())


def admin_json(server: ServerProcess, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    capsys.readouterr()
    assert main(["--json", *args, "-n", server.addr]) == 0
    document = json.loads(capsys.readouterr().out)
    assert isinstance(document, dict)
    return document


def test_admin_update_topic_attributes_are_stored_and_served_as_apache(
    server: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    document = admin_json(
        server, capsys, "updateTopic", "-t", "TypedFifo", "-q", "2", "-a", "+message.type=FIFO"
    )
    assert [config["attributes"] for config in document.values()] == [{"message.type": "FIFO"}]  # type: ignore[index]
    # Without -a an update keeps the type, as RocketMQ's broker does.
    document = admin_json(server, capsys, "updateTopic", "-t", "TypedFifo", "-q", "4")
    assert [config["attributes"] for config in document.values()] == [{"message.type": "FIFO"}]  # type: ignore[index]
    one = broker_request(server, RequestCode.GET_TOPIC_CONFIG, {"topic": "TypedFifo"})
    assert one.code == ResponseCode.SUCCESS
    assert orjson.loads(one.body or b"{}")["attributes"] == {"message.type": "FIFO"}
    every = broker_request(server, RequestCode.GET_ALL_TOPIC_CONFIG, {})
    table = orjson.loads(every.body or b"{}")["topicConfigTable"]
    assert table["TypedFifo"]["attributes"] == {"message.type": "FIFO"}
    assert table["TBW102"]["attributes"] == {}
    # RocketMQ's refusals: MIXED needs enableMixedMessageType, and a key it does not know.
    for changes, code, words in (
        ("+message.type=MIXED", ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported."),
        ("+colour=red", ResponseCode.SYSTEM_ERROR, "unsupported key: colour"),
    ):
        header = CreateTopicRequestHeader(
            topic="TypedFifo", read_queue_nums=4, write_queue_nums=4, attributes=changes
        )
        refused = broker_request(server, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
        assert (refused.code, refused.remark) == (code, words)


def test_proxy_routes_and_checks_a_send_against_its_topic_message_type(
    server: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    admin_json(server, capsys, "updateTopic", "-t", "TypedDelay", "-q", "2", "-a", "+message.type=DELAY")
    admin_json(server, capsys, "updateTopic", "-t", "Untyped", "-q", "2")
    routes, answers = asyncio.run(_routes_and_sends(f"127.0.0.1:{server.extra_ports[1]}"))
    assert routes["TypedDelay"] == {(pb.DELAY,)}
    assert routes["Untyped"] == {(pb.NORMAL,)}
    assert routes["NotCreatedYet"] == {(pb.NORMAL,)}  # its first send creates a normal topic
    assert answers["normal to TypedDelay"] == (
        pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        "TopicMessageType validate failed, the expected type is DELAY, but actual type is NORMAL",
    )
    assert answers["fifo to Untyped"] == (
        pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        "TopicMessageType validate failed, the expected type is NORMAL, but actual type is FIFO",
    )
    assert answers["delay to TypedDelay"][0] == pb.OK
    assert answers["normal to Untyped"][0] == pb.OK


async def _routes_and_sends(
    target: str,
) -> tuple[dict[str, set[tuple[int, ...]]], dict[str, tuple[int, str]]]:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = spb_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        routes = {}
        for topic in ("TypedDelay", "Untyped", "NotCreatedYet"):
            route = await stub.QueryRoute(
                spb.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=CLIENT, timeout=10
            )
            assert route.status.code == pb.OK, route.status
            routes[topic] = {tuple(queue.accept_message_types) for queue in route.message_queues}
        answers = {}
        for name, topic, kind in (
            ("normal to TypedDelay", "TypedDelay", pb.NORMAL),
            ("delay to TypedDelay", "TypedDelay", pb.DELAY),
            ("fifo to Untyped", "Untyped", pb.FIFO),
            ("normal to Untyped", "Untyped", pb.NORMAL),
        ):
            message = pb.Message(topic=pb.Resource(name=topic), body=name.encode())
            system = message.system_properties
            system.message_id = f"TYPES{len(answers):04d}"
            system.message_type = kind
            if kind == pb.FIFO:
                system.message_group = "g"
            if kind == pb.DELAY:
                system.delivery_timestamp.FromMilliseconds(1)
            sent = await stub.SendMessage(
                spb.SendMessageRequest(messages=[message]), metadata=CLIENT, timeout=10
            )
            # A send none of whose messages was stored answers with its status alone, no entries,
            # as Apache's proxy does; the status is the refused message's.
            answers[name] = (sent.status.code, sent.status.message)
        return routes, answers
