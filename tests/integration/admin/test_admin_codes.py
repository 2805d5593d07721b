"""The admin codes at the protocol level: requests shaped as RocketMQ's Java admin sends them.

Method: one standalone server and one OrbitMQ push consumer for the module. Each test sends
raw remoting commands with the ext fields Java's request headers carry (and, where Java sends
a body, the golden bodies in ``tests/fixtures/admin``), then parses each answer as fastjson and
checks its shape against operations-features §3.3: the keys RocketMQ's tools read, the
MessageQueue object keys, the value formats (``putTps`` as three numbers), and the codes and
remarks of refusals (unknown group, unknown stats item, a key that cannot change live).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from orbitmq.client import ConsumeResult, Message, Producer, PushConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import MessageExt
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.fastjson import ObjectKey, loads
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, create_topic, start_standalone

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "admin"
TOPIC = "GoldenTopic"
GROUP = "CG_GOLDEN_LIVE"
MQ_KEYS = {"brokerName", "queueId", "topic"}
_RATE = re.compile(r"^\d+\.\d+ \d+\.\d+ \d+\.\d+$")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_standalone(tmp_path_factory.mktemp("admin-codes"))
    try:
        create_topic(f"127.0.0.1:{proc.extra_ports[0]}", TOPIC, 2)
        yield proc
    finally:
        proc.kill()


class Live:
    """The module's running client side: a consumer of TOPIC and what it received."""

    def __init__(self, consumer: PushConsumer, received: list[MessageExt], sent: list[str]) -> None:
        self.consumer = consumer
        self.received = received
        self.offset_msg_ids = sent


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def live(server: ServerProcess) -> AsyncIterator[Live]:
    received: list[MessageExt] = []

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        received.extend(messages)
        return ConsumeResult.CONSUME_SUCCESS

    sent: list[str] = []
    async with Producer("PG_GOLDEN", server.addr) as producer:
        for index in range(6):
            message = Message(TOPIC, f"golden-{index}".encode())
            message.keys = [f"gk-{index}"]
            sent.append((await producer.send(message)).offset_msg_id)
    consumer = PushConsumer(
        GROUP, server.addr, listener, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    for _ in range(200):
        if len(received) >= 6:
            break
        await asyncio.sleep(0.05)
    await consumer.persist_offsets()
    try:
        yield Live(consumer, received, sent)
    finally:
        await consumer.shutdown()


async def _call(
    addr: str, code: int, ext: dict[str, str] | None = None, body: bytes = b""
) -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(addr, RemotingCommand.request(code, ext or {}, body), 10_000)
    finally:
        await client.close()


def _broker(server: ServerProcess) -> str:
    return f"127.0.0.1:{server.extra_ports[0]}"


def _mq_table(table: dict[object, object]) -> dict[tuple[str, str, int], dict[str, object]]:
    found = {}
    for key, value in table.items():
        assert isinstance(key, ObjectKey) and set(key.fields) == MQ_KEYS, key
        assert isinstance(value, dict)
        found[(key.fields["topic"], key.fields["brokerName"], key.fields["queueId"])] = value
    return found


pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]


async def test_get_broker_runtime_info_has_rocketmq_keys_and_formats(
    server: ServerProcess, live: Live
) -> None:
    response = await _call(_broker(server), RequestCode.GET_BROKER_RUNTIME_INFO)
    assert response.code == ResponseCode.SUCCESS
    table = loads(response.body)["table"]
    assert all(isinstance(value, str) for value in table.values())
    for key in ("putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps"):
        assert _RATE.match(table[key]), (key, table[key])
    assert int(table["msgPutTotalTodayNow"]) >= 6
    assert re.match(r"^\[ \d+ days, \d+ hours, \d+ minutes, \d+ seconds \]$", table["runtime"])
    assert re.match(r"^Total : .+, Free : .+\.$", table["commitLogDirCapacity"])
    assert table["putMessageDistributeTime"].startswith("[<=0ms]:")
    assert {"brokerVersionDesc", "bootTimestamp", "commitLogMaxOffset", "earliestMessageTimeStamp"} <= set(
        table
    )


async def test_topic_stats_and_consume_stats_use_message_queue_keys(
    server: ServerProcess, live: Live
) -> None:
    response = await _call(_broker(server), RequestCode.GET_TOPIC_STATS_INFO, {"topic": TOPIC})
    stats = _mq_table(loads(response.body)["offsetTable"])
    assert {key[2] for key in stats} == {0, 1}
    assert all(set(value) == {"lastUpdateTimestamp", "maxOffset", "minOffset"} for value in stats.values())
    assert sum(int(value["maxOffset"]) for value in stats.values()) == 6  # type: ignore[call-overload]
    missing = await _call(_broker(server), RequestCode.GET_TOPIC_STATS_INFO, {"topic": "NoSuchTopic"})
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST

    response = await _call(
        _broker(server), RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP, "topic": TOPIC}
    )
    body = loads(response.body)
    assert set(body) == {"consumeTps", "offsetTable"}
    offsets = _mq_table(body["offsetTable"])
    assert all(
        {"brokerOffset", "consumerOffset", "lastTimestamp"} <= set(value) for value in offsets.values()
    )
    assert sum(int(value["consumerOffset"]) for value in offsets.values()) == 6  # type: ignore[call-overload]

    response = await _call(_broker(server), RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    body = loads(response.body)
    assert set(body) == {"brokerAddr", "consumeStatsList", "totalDiff"}
    assert any(GROUP in entry for entry in body["consumeStatsList"])


async def test_connections_and_consumers_of_topic(server: ServerProcess, live: Live) -> None:
    response = await _call(
        _broker(server), RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP}
    )
    body = loads(response.body)
    assert set(body) == {
        "connectionSet",
        "consumeFromWhere",
        "consumeType",
        "messageModel",
        "subscriptionTable",
    }
    assert body["consumeType"] == "CONSUME_PASSIVELY" and body["messageModel"] == "CLUSTERING"
    assert [set(item) for item in body["connectionSet"]] == [
        {"clientAddr", "clientId", "language", "version"}
    ]
    subscription = body["subscriptionTable"][TOPIC]
    assert set(subscription) == {
        "classFilterMode",
        "codeSet",
        "expressionType",
        "subString",
        "subVersion",
        "tagsSet",
        "topic",
    }
    offline = await _call(
        _broker(server), RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG_NOBODY"}
    )
    assert (offline.code, offline.remark) == (
        ResponseCode.CONSUMER_NOT_ONLINE,
        "the consumer group[CG_NOBODY] not online",
    )

    producers = await _call(
        _broker(server), RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG_NOBODY"}
    )
    assert (producers.code, producers.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "the producer group[PG_NOBODY] not exist",
    )

    response = await _call(_broker(server), RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})
    assert GROUP in loads(response.body)["groupList"]


async def test_view_broker_stats_data_windows_and_unknown_item(server: ServerProcess, live: Live) -> None:
    await asyncio.sleep(1.1)  # the stats sampler runs every second
    response = await _call(
        _broker(server),
        RequestCode.VIEW_BROKER_STATS_DATA,
        {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC},
    )
    body = loads(response.body)
    assert set(body) == {"statsDay", "statsHour", "statsMinute"}
    assert all(set(window) == {"avgpt", "sum", "tps"} for window in body.values())
    assert body["statsMinute"]["sum"] == 6 and body["statsDay"]["sum"] == 6
    group_get = await _call(
        _broker(server),
        RequestCode.VIEW_BROKER_STATS_DATA,
        {"statsName": "GROUP_GET_NUMS", "statsKey": f"{TOPIC}@{GROUP}"},
    )
    assert loads(group_get.body)["statsDay"]["sum"] == 6
    unknown = await _call(
        _broker(server),
        RequestCode.VIEW_BROKER_STATS_DATA,
        {"statsName": "TOPIC_PUT_NUMS", "statsKey": "Nope"},
    )
    assert (unknown.code, unknown.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "The stats <TOPIC_PUT_NUMS> <Nope> not exist",
    )


async def test_subscription_group_create_list_clone_delete(server: ServerProcess, live: Live) -> None:
    body = (FIXTURES / "update_and_create_subscription_group.json").read_bytes()
    created = await _call(_broker(server), RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
    assert created.code == ResponseCode.SUCCESS
    listed = loads((await _call(_broker(server), RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
    assert set(listed) == {"dataVersion", "subscriptionGroupTable"}
    assert listed["subscriptionGroupTable"]["CG_GOLDEN"]["retryMaxTimes"] == 5
    clone = await _call(
        _broker(server),
        RequestCode.CLONE_GROUP_OFFSET,
        {"srcGroup": GROUP, "destGroup": "CG_GOLDEN", "topic": TOPIC, "offline": "false"},
    )
    assert clone.code == ResponseCode.SUCCESS
    stats = loads(
        (await _call(_broker(server), RequestCode.GET_CONSUME_STATS, {"consumerGroup": "CG_GOLDEN"})).body
    )
    assert sum(int(value["consumerOffset"]) for value in _mq_table(stats["offsetTable"]).values()) == 6  # type: ignore[call-overload]
    deleted = await _call(
        _broker(server),
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        {"groupName": "CG_GOLDEN", "cleanOffset": "true"},
    )
    assert deleted.code == ResponseCode.SUCCESS
    listed = loads((await _call(_broker(server), RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
    assert "CG_GOLDEN" not in listed["subscriptionGroupTable"]


async def test_broker_config_get_and_live_update(server: ServerProcess, live: Live) -> None:
    before = await _call(_broker(server), RequestCode.GET_BROKER_CONFIG)
    assert before.code == ResponseCode.SUCCESS and '"counter"' in before.ext_fields["version"]
    assert "enablePropertyFilter=false" in before.body.decode().splitlines()
    body = (FIXTURES / "update_broker_config.properties").read_bytes()
    assert (
        await _call(_broker(server), RequestCode.UPDATE_BROKER_CONFIG, body=body)
    ).code == ResponseCode.SUCCESS
    after = (await _call(_broker(server), RequestCode.GET_BROKER_CONFIG)).body.decode().splitlines()
    assert "enablePropertyFilter=true" in after and "maxReconsumeTimes=7" in after
    refused = await _call(_broker(server), RequestCode.UPDATE_BROKER_CONFIG, body=b"listenPort=1\n")
    assert refused.code == ResponseCode.SYSTEM_ERROR and "listenPort" in (refused.remark or "")

    check = (FIXTURES / "check_client_config.json").read_bytes()
    assert (
        await _call(_broker(server), RequestCode.CHECK_CLIENT_CONFIG, body=check)
    ).code == ResponseCode.SUCCESS
    bad = check.replace(b"a > 5", b"a >> 5")
    answer = await _call(_broker(server), RequestCode.CHECK_CLIENT_CONFIG, body=bad)
    assert answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "line 1, column 4" in (
        answer.remark or ""
    )
    await _call(_broker(server), RequestCode.UPDATE_BROKER_CONFIG, body=b"enablePropertyFilter=false\n")
    off = await _call(_broker(server), RequestCode.CHECK_CLIENT_CONFIG, body=check)
    assert off.code == ResponseCode.SYSTEM_ERROR and "enablePropertyFilter" in (off.remark or "")


async def test_query_and_view_message(server: ServerProcess, live: Live) -> None:
    query = await _call(
        _broker(server),
        RequestCode.QUERY_MESSAGE,
        {"topic": TOPIC, "key": "gk-3", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": str(2**62)},
    )
    assert query.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_stored_messages(query.body)] == [b"golden-3"]
    offset = int(live.offset_msg_ids[2][-16:], 16)
    viewed = await _call(_broker(server), RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
    assert decode_stored_messages(viewed.body)[0].body == b"golden-2"


async def test_running_info_and_consume_directly_are_relayed_to_the_client(
    server: ServerProcess, live: Live
) -> None:
    client_id = live.consumer.running_info().properties["clientId"]
    info = await _call(
        _broker(server),
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        {"consumerGroup": GROUP, "clientId": client_id, "jstackEnable": "false"},
    )
    assert info.code == ResponseCode.SUCCESS
    body = loads(info.body)
    assert {"jstack", "mqTable", "properties", "statusTable", "subscriptionSet"} <= set(body)
    assert _mq_table(body["mqTable"]) and TOPIC in body["statusTable"]
    assert {"pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS", "consumeFailedMsgs"} == set(
        body["statusTable"][TOPIC]
    )
    absent = await _call(
        _broker(server), RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": GROUP, "clientId": "nobody"}
    )
    assert absent.code == ResponseCode.SYSTEM_ERROR and "not online" in (absent.remark or "")

    before = len(live.received)
    direct = await _call(
        _broker(server),
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        {
            "consumerGroup": GROUP,
            "clientId": client_id,
            "msgId": live.offset_msg_ids[0],
            "brokerName": "broker-a",
        },
    )
    result = loads(direct.body)
    assert result["consumeResult"] == "CR_SUCCESS" and {
        "autoCommit",
        "order",
        "remark",
        "spentTimeMills",
    } <= set(result)
    assert len(live.received) == before + 1 and live.received[-1].body == b"golden-0"


async def test_reset_offset_refusals_and_answer(server: ServerProcess, live: Live) -> None:
    ext = {"topic": TOPIC, "group": GROUP, "timestamp": "0", "isForce": "true"}
    answer = await _call(_broker(server), RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
    assert answer.code == ResponseCode.SUCCESS
    table = loads(answer.body)["offsetTable"]
    assert all(isinstance(key, ObjectKey) and set(key.fields) == MQ_KEYS for key in table)
    assert set(table.values()) == {0}
    no_topic = await _call(
        _broker(server), RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**ext, "topic": "NoSuchTopic"}
    )
    assert no_topic.code == ResponseCode.TOPIC_NOT_EXIST
    # A group the broker has never seen is reset too, as Apache RocketMQ 5.5's broker does (the
    # oracle tier's relays_to_absent_clients scenario); the admin tools refuse a group nobody
    # knows before asking (test_admin_consumer_progress_and_reset_refuse_a_group_nobody_knows).
    no_group = await _call(
        _broker(server), RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**ext, "group": "CG_NEVER"}
    )
    assert no_group.code == ResponseCode.SUCCESS, no_group.remark
    assert set(loads(no_group.body)["offsetTable"].values()) == {0}


async def test_name_server_kv_config(server: ServerProcess, live: Live) -> None:
    namesrv = server.addr
    ext = {"namespace": "ORDER_TOPIC_CONFIG", "key": TOPIC, "value": "broker-a:2"}
    assert (await _call(namesrv, RequestCode.PUT_KV_CONFIG, ext)).code == ResponseCode.SUCCESS
    got = await _call(namesrv, RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": TOPIC})
    assert got.ext_fields["value"] == "broker-a:2"
    listed = await _call(namesrv, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"})
    assert loads(listed.body) == {"table": {TOPIC: "broker-a:2"}}
    route = await _call(namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    assert loads(route.body)["orderTopicConf"] == "broker-a:2"
    deleted = await _call(
        namesrv, RequestCode.DELETE_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": TOPIC}
    )
    assert deleted.code == ResponseCode.SUCCESS
    gone = await _call(namesrv, RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": TOPIC})
    assert gone.code == ResponseCode.QUERY_NOT_FOUND
