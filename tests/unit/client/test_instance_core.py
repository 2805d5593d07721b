"""ClientInstance and ClientConfig without real servers: client ids, option sorting, the
per-loop registry, name-server fail-over, route caching, heartbeats and server callbacks,
against in-process RemotingServers on 127.0.0.1."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from orbitmq.client._instance import ClientInstance
from orbitmq.client._server_requests import decode_reset_offset_body
from orbitmq.client.config import ClientConfig, ProducerConfig, split_config
from orbitmq.errors import ClientStateError, ConfigError, ConnectError
from orbitmq.model.heartbeat import ConsumerData
from orbitmq.model.message import MessageQueue
from orbitmq.model.route import BrokerData, QueueData, TopicRouteData
from orbitmq.protocol.bodies import decode_heartbeat, encode_topic_route
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import GetRouteInfoRequestHeader
from orbitmq.transport.server import RemotingServer, RequestContext


def test_client_config_client_id_uses_pid_for_default_instance() -> None:
    assert ClientConfig("127.0.0.1:9876", client_ip="10.1.2.3").client_id == f"10.1.2.3@{os.getpid()}"
    named = ClientConfig("127.0.0.1:9876", client_ip="10.1.2.3", instance_name="app", unit_name="u1")
    assert named.client_id == "10.1.2.3@app@u1"


def test_client_config_rejects_empty_namesrv_and_bad_interval() -> None:
    with pytest.raises(ConfigError, match="names no name server"):
        ClientConfig(" ; ")
    with pytest.raises(ConfigError, match="request_timeout_ms"):
        ClientConfig("a:1", request_timeout_ms=0)
    assert ClientConfig("a:1; b:2").namesrv_addrs == ["a:1", "b:2"]


def test_split_config_sorts_options_and_names_unknown_ones() -> None:
    client, producer = split_config(
        "a:1", {"instance_name": "x", "retry_times_when_send_failed": 5}, ProducerConfig
    )
    assert client.instance_name == "x" and producer.retry_times_when_send_failed == 5
    with pytest.raises(ConfigError, match="did you mean 'send_msg_timeout_ms'"):
        split_config("a:1", {"send_msg_timeout": 5}, ProducerConfig)


def test_decode_reset_offset_body_reads_fastjson_object_keys() -> None:
    body = (
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:12,'
        b'{"brokerName":"broker-b","queueId":0,"topic":"T"}:-1}}'
    )
    assert decode_reset_offset_body(body) == {
        MessageQueue("T", "broker-a", 1): 12,
        MessageQueue("T", "broker-b", 0): -1,
    }


ROUTE = TopicRouteData(
    queue_datas=[QueueData("broker-a", 4, 4)],
    broker_datas=[BrokerData("c", "broker-a", {0: "127.0.0.1:1", 1: "127.0.0.1:2"})],
)


class FakeNamesrv:
    """Answers GET_ROUTEINFO_BY_TOPIC for topic T with ROUTE, TOPIC_NOT_EXIST otherwise."""

    def __init__(self) -> None:
        self.route_requests = 0
        self.heartbeats: list[bytes] = []
        self.server = RemotingServer(
            "127.0.0.1",
            0,
            {RequestCode.GET_ROUTEINFO_BY_TOPIC: self.route, RequestCode.HEART_BEAT: self.heartbeat},
        )

    async def route(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.route_requests += 1
        header = GetRouteInfoRequestHeader.from_ext(request.ext_fields)
        if header.topic != "T":
            return request.response(ResponseCode.TOPIC_NOT_EXIST, "no route")
        return request.response(ResponseCode.SUCCESS, None, {}, encode_topic_route(ROUTE))

    async def heartbeat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.heartbeats.append(request.body)
        return request.response(ResponseCode.SUCCESS)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"


@pytest.fixture
async def namesrv() -> AsyncIterator[FakeNamesrv]:
    fake = FakeNamesrv()
    await fake.server.start()
    try:
        yield fake
    finally:
        await fake.server.stop(0.1)


def _dead_addr() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


async def test_instance_registry_shares_one_instance_per_client_id(namesrv: FakeNamesrv) -> None:
    config = ClientConfig(namesrv.addr, instance_name="shared")
    first = ClientInstance.get_or_create(config)
    second = ClientInstance.get_or_create(config)
    other = ClientInstance.get_or_create(ClientConfig(namesrv.addr, instance_name="other"))
    assert first is second and first is not other
    await first.start()
    await first.close()
    assert first.started
    await second.close()
    assert not first.started
    await other.close()
    with pytest.raises(ClientStateError):
        await first.start()


async def test_instance_invoke_namesrv_fails_over_in_order(namesrv: FakeNamesrv) -> None:
    instance = ClientInstance.get_or_create(
        ClientConfig(f"{_dead_addr()};{namesrv.addr}", instance_name="fo")
    )
    try:
        instance._namesrv_index = 0
        route = await instance.get_route("T")
        assert route == ROUTE and instance._namesrv_index == 1
    finally:
        await instance.close()


async def test_instance_invoke_namesrv_raises_when_all_are_down() -> None:
    instance = ClientInstance.get_or_create(
        ClientConfig(f"{_dead_addr()};{_dead_addr()}", instance_name="down")
    )
    try:
        with pytest.raises(ConnectError):
            await instance.get_route("T")
    finally:
        await instance.close()


async def test_instance_get_route_caches_and_fills_broker_table(namesrv: FakeNamesrv) -> None:
    instance = ClientInstance.get_or_create(ClientConfig(namesrv.addr, instance_name="cache"))
    try:
        assert await instance.get_route("T") == ROUTE
        assert await instance.get_route("T") == ROUTE
        assert namesrv.route_requests == 1
        assert await instance.get_route("Unknown") is None
        assert instance.find_broker_addr("broker-a") == "127.0.0.1:1"
        assert instance.find_broker_addr("broker-a", 1, only_this=True) == "127.0.0.1:2"
        assert instance.find_broker_addr("broker-a", 5) == "127.0.0.1:1"
        assert instance.find_broker_addr("broker-a", 5, only_this=True) is None
        assert instance.broker_names() == {"broker-a"} and instance.master_addrs() == ["127.0.0.1:1"]
        await instance.refresh_routes()
        assert namesrv.route_requests == 4  # both topics asked for are refreshed
    finally:
        await instance.close()


class FakeConsumer:
    def __init__(self) -> None:
        self.woken = 0

    def consumer_data(self) -> ConsumerData:
        return ConsumerData("CG")

    def subscribed_topics(self) -> set[str]:
        return {"T"}

    async def rebalance(self) -> None:
        pass

    def rebalance_soon(self) -> None:
        self.woken += 1

    async def persist_offsets(self) -> None:
        pass

    async def on_reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        pass


async def test_instance_heartbeat_names_groups_and_notify_wakes_consumer(namesrv: FakeNamesrv) -> None:
    instance = ClientInstance.get_or_create(ClientConfig(namesrv.addr, instance_name="hb"))
    consumer = FakeConsumer()
    try:
        instance.register_producer("PG", object())
        instance.register_consumer("CG", consumer)
        with pytest.raises(ClientStateError):
            instance.register_consumer("CG", FakeConsumer())
        instance._broker_addrs["broker-a"] = {0: namesrv.addr}
        await instance.send_heartbeat_to_all_brokers()
        heartbeat = decode_heartbeat(namesrv.heartbeats[-1])
        assert heartbeat.client_id == instance.client_id
        assert [p.group_name for p in heartbeat.producer_data_set] == ["PG"]
        assert [c.group_name for c in heartbeat.consumer_data_set] == ["CG"]
        notify = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "CG"})
        await instance._on_notify_consumer_ids_changed(namesrv.addr, notify)
        assert consumer.woken == 1
    finally:
        await instance.close()
