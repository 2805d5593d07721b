"""NameServer handlers, served by an in-process NamesrvApp on 127.0.0.1 port 0.

Method: a RemotingClient plays a broker (REGISTER_BROKER with JSON or compressed bodies) and
a client (route, cluster and topic lookups); a fake clock drives broker expiry without waiting.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator

import orjson
import pytest

from orbitmq.model.route import PERM_INHERIT, PERM_READ_WRITE, DataVersion, TopicConfig
from orbitmq.namesrv.app import NamesrvApp
from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.protocol.bodies import (
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    decode_cluster_info,
    decode_data_version,
    decode_topic_list,
    decode_topic_route,
    encode_data_version,
    encode_register_broker_body,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import RemotingClient
from tests.support.calls import python_calls_while

BROKER_ADDR = "127.0.0.1:10911"


class FakeClock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def namesrv(clock: FakeClock) -> AsyncIterator[NamesrvApp]:
    app = NamesrvApp(NamesrvConfig(listen_port=0, bind_address="127.0.0.1"), clock_ms=clock)
    await app.startup()
    yield app
    await app.shutdown()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    remoting_client = RemotingClient()
    yield remoting_client
    await remoting_client.close()


def register_request(
    topics: dict[str, TopicConfig],
    *,
    broker_name: str = "broker-a",
    broker_addr: str = BROKER_ADDR,
    broker_id: int = 0,
    version: DataVersion = DataVersion(1, 1),  # noqa: B008 - frozen value, safe to share
    compressed: bool = False,
    crc32: int | None = None,
) -> RemotingCommand:
    body = encode_register_broker_body(
        RegisterBrokerBody(TopicConfigSerializeWrapper(topics, version)), compressed=compressed
    )
    ext = {
        "brokerName": broker_name,
        "brokerAddr": broker_addr,
        "clusterName": "DefaultCluster",
        "haServerAddr": "127.0.0.1:10912",
        "brokerId": str(broker_id),
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF if crc32 is None else crc32),
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)


def route_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


TOPICS = {
    "TopicA": TopicConfig("TopicA", 4, 4),
    "TBW102": TopicConfig("TBW102", 8, 8, PERM_READ_WRITE | PERM_INHERIT),
}


async def test_namesrv_register_then_route_lookup(namesrv: NamesrvApp, client: RemotingClient) -> None:
    registered = await client.invoke(namesrv.address, register_request(TOPICS))
    assert registered.code == ResponseCode.SUCCESS
    response = await client.invoke(namesrv.address, route_request("TopicA"))
    assert response.code == ResponseCode.SUCCESS
    raw = orjson.loads(response.body)
    assert raw["brokerDatas"][0]["brokerAddrs"] == {"0": BROKER_ADDR}
    assert raw["queueDatas"][0]["writeQueueNums"] == 4
    route = decode_topic_route(response.body)
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]


async def test_namesrv_compressed_register_body_is_accepted(
    namesrv: NamesrvApp, client: RemotingClient
) -> None:
    registered = await client.invoke(namesrv.address, register_request(TOPICS, compressed=True))
    assert registered.code == ResponseCode.SUCCESS
    tbw = await client.invoke(namesrv.address, route_request("TBW102"))
    assert decode_topic_route(tbw.body).queue_datas[0].perm == 7


async def test_namesrv_register_with_bad_crc_is_refused(namesrv: NamesrvApp, client: RemotingClient) -> None:
    response = await client.invoke(namesrv.address, register_request(TOPICS, crc32=12345))
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert namesrv.route_table.all_topics() == []


async def test_namesrv_register_without_required_header_names_it(
    namesrv: NamesrvApp, client: RemotingClient
) -> None:
    request = register_request(TOPICS)
    del request.ext_fields["brokerAddr"]
    response = await client.invoke(namesrv.address, request)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "brokerAddr" in (response.remark or "")


@pytest.mark.parametrize(
    ("field", "address"),
    [
        ("brokerAddr", "not-an-address"),
        ("brokerAddr", "127.0.0.1"),
        ("brokerAddr", "127.0.0.1:99999"),
        ("brokerAddr", "../../x:10911"),
        ("brokerAddr", "evil host:10911"),
        ("brokerAddr", ""),
        ("haServerAddr", "ha:"),
    ],
)
async def test_namesrv_register_refuses_address_not_host_port(
    namesrv: NamesrvApp, client: RemotingClient, field: str, address: str, caplog: pytest.LogCaptureFixture
) -> None:
    request = register_request(TOPICS)
    request.ext_fields[field] = address
    response = await client.invoke(namesrv.address, request)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert f"{field}: the address" in (response.remark or ""), response.remark
    info = await client.invoke(namesrv.address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert decode_cluster_info(info.body).broker_addr_table == {}
    assert namesrv.route_table.all_topics() == []
    assert len([r for r in caplog.records if "refused request code 103" in r.getMessage()]) == 1


async def test_namesrv_register_accepts_host_names_and_ipv6(
    namesrv: NamesrvApp, client: RemotingClient
) -> None:
    for broker_id, address in enumerate(
        ("broker-a.example.com:10911", "[::1]:10911", "0:0:0:0:0:0:0:1:10915")
    ):
        response = await client.invoke(
            namesrv.address, register_request(TOPICS, broker_addr=address, broker_id=broker_id)
        )
        assert response.code == ResponseCode.SUCCESS, (address, response.remark)


async def test_namesrv_slave_registration_answers_master_address(
    namesrv: NamesrvApp, client: RemotingClient
) -> None:
    await client.invoke(namesrv.address, register_request(TOPICS))
    response = await client.invoke(
        namesrv.address, register_request({}, broker_addr="127.0.0.1:10921", broker_id=1)
    )
    assert response.ext_fields == {"haServerAddr": "127.0.0.1:10912", "masterAddr": BROKER_ADDR}


async def test_namesrv_unknown_topic_answers_topic_not_exist(
    namesrv: NamesrvApp, client: RemotingClient
) -> None:
    response = await client.invoke(namesrv.address, route_request("Nope"))
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert "Nope" in (response.remark or "") and response.body == b""


async def test_namesrv_illegal_topic_name_is_named_in_error(
    namesrv: NamesrvApp, client: RemotingClient
) -> None:
    response = await client.invoke(namesrv.address, route_request("bad topic!"))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "'bad topic!'" in (response.remark or "")


async def test_namesrv_cluster_info_and_topic_list(namesrv: NamesrvApp, client: RemotingClient) -> None:
    await client.invoke(namesrv.address, register_request(TOPICS))
    info = await client.invoke(namesrv.address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    cluster = decode_cluster_info(info.body)
    assert cluster.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    assert cluster.broker_addr_table["broker-a"].broker_addrs == {0: BROKER_ADDR}
    listed = await client.invoke(
        namesrv.address, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    )
    assert decode_topic_list(listed.body).topic_list == ["TBW102", "TopicA"]


async def test_namesrv_delete_topic_removes_route(namesrv: NamesrvApp, client: RemotingClient) -> None:
    await client.invoke(namesrv.address, register_request(TOPICS))
    delete = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TopicA"})
    assert (await client.invoke(namesrv.address, delete)).code == ResponseCode.SUCCESS
    assert (
        await client.invoke(namesrv.address, route_request("TopicA"))
    ).code == ResponseCode.TOPIC_NOT_EXIST


async def test_namesrv_query_data_version_reports_change(namesrv: NamesrvApp, client: RemotingClient) -> None:
    await client.invoke(namesrv.address, register_request(TOPICS, version=DataVersion(5, 3)))
    ext = {
        "brokerName": "broker-a",
        "brokerAddr": BROKER_ADDR,
        "clusterName": "DefaultCluster",
        "brokerId": "0",
    }

    async def query(version: DataVersion) -> RemotingCommand:
        request = RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, ext, encode_data_version(version))
        return await client.invoke(namesrv.address, request)

    same = await query(DataVersion(5, 3))
    assert same.ext_fields["changed"] == "false"
    assert decode_data_version(same.body) == DataVersion(5, 3)
    assert (await query(DataVersion(6, 4))).ext_fields["changed"] == "true"


async def test_namesrv_kv_config_is_not_found(namesrv: NamesrvApp, client: RemotingClient) -> None:
    request = RemotingCommand.request(
        RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}
    )
    response = await client.invoke(namesrv.address, request)
    assert response.code == ResponseCode.QUERY_NOT_FOUND


async def test_namesrv_scan_expires_silent_broker(
    namesrv: NamesrvApp, client: RemotingClient, clock: FakeClock
) -> None:
    await client.invoke(namesrv.address, register_request(TOPICS))
    clock.now_ms += 120_000
    assert namesrv.scan_once() == []
    clock.now_ms += 1
    assert namesrv.scan_once() == [BROKER_ADDR]
    assert (
        await client.invoke(namesrv.address, route_request("TopicA"))
    ).code == ResponseCode.TOPIC_NOT_EXIST


async def test_namesrv_broker_connection_close_removes_its_routes(namesrv: NamesrvApp) -> None:
    broker = RemotingClient()
    await broker.invoke(namesrv.address, register_request(TOPICS))
    await broker.close()
    for _ in range(200):
        if not namesrv.route_table.all_topics():
            break
        await asyncio.sleep(0.01)
    assert namesrv.route_table.all_topics() == []
    assert namesrv.route_table.cluster_info().broker_addr_table == {}


async def test_namesrv_route_answer_follows_every_route_change(
    namesrv: NamesrvApp, client: RemotingClient
) -> None:
    async def route() -> RemotingCommand:
        return await client.invoke(namesrv.address, route_request("TopicA"))

    await client.invoke(namesrv.address, register_request(TOPICS))
    first = await route()
    await client.invoke(namesrv.address, register_request(TOPICS))
    assert (await route()).body == first.body, "an unchanged re-registration keeps the same answer"

    await client.invoke(namesrv.address, register_request({}, broker_addr="127.0.0.1:20911", broker_id=1))
    assert orjson.loads((await route()).body)["brokerDatas"][0]["brokerAddrs"] == {
        "0": BROKER_ADDR,
        "1": "127.0.0.1:20911",
    }
    wider = {**TOPICS, "TopicA": TopicConfig("TopicA", 16, 16)}
    await client.invoke(namesrv.address, register_request(wider, version=DataVersion(2, 2)))
    assert orjson.loads((await route()).body)["queueDatas"][0]["writeQueueNums"] == 16

    put = RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG,
        {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicA", "value": "broker-a:16"},
    )
    assert (await client.invoke(namesrv.address, put)).code == ResponseCode.SUCCESS
    assert orjson.loads((await route()).body)["orderTopicConf"] == "broker-a:16"

    delete = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TopicA"})
    assert (await client.invoke(namesrv.address, delete)).code == ResponseCode.SUCCESS
    assert (await route()).code == ResponseCode.TOPIC_NOT_EXIST


@pytest.mark.parametrize("compressed", [False, True])
async def test_namesrv_reregistration_of_a_published_version_leaves_its_topics_undecoded(
    namesrv: NamesrvApp, client: RemotingClient, compressed: bool
) -> None:
    # A broker registers every 30 s with its whole table: with 50,000 topics, decoding and
    # checking them each time held the standalone's event loop. The version comes first.
    # (A compressed body is decoded on a thread, where the calls are not counted.)
    topics = {f"T{index}": TopicConfig(f"T{index}", 4, 4) for index in range(300)}
    first, decoded = await python_calls_while(
        client.invoke(namesrv.address, register_request(topics, compressed=compressed)), "_topic_config"
    )
    assert first.code == ResponseCode.SUCCESS and decoded == (0 if compressed else 300)
    # The same version with other topics: the name server keeps what it published.
    others = {"Other": TopicConfig("Other", 1, 1)}
    again, decoded = await python_calls_while(
        client.invoke(namesrv.address, register_request(others, compressed=compressed)), "_topic_config"
    )
    assert again.code == ResponseCode.SUCCESS and decoded == 0
    assert sorted(namesrv.route_table.all_topics()) == sorted(topics)
    # A new version is decoded and published: one topic more.
    topics["New"] = TopicConfig("New", 1, 1)
    newer = register_request(topics, compressed=compressed, version=DataVersion(1, 2))
    published, decoded = await python_calls_while(client.invoke(namesrv.address, newer), "_topic_config")
    assert published.code == ResponseCode.SUCCESS and decoded == (0 if compressed else 301)
    route = await client.invoke(namesrv.address, route_request("New"))
    assert route.code == ResponseCode.SUCCESS
