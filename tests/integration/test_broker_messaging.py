"""Broker messaging end to end over real processes: send, pull, long polling, offsets, lookups.

Method: one name server and one broker subprocess per module (127.0.0.1, free ports, tmp dirs,
killed in teardown); each test talks to the broker with a RemotingClient and raw commands, the
way RocketMQ clients do, and uses its own topic/group names so tests do not interfere.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import orjson
import pytest

from orbitmq.model.message import MessageConst
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_codec import decode_stored_messages, stored_message_property_bytes
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.protocol.properties import encode_properties
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, start_broker, start_namesrv

pytestmark = pytest.mark.integration

PULL_SUSPEND_SUBSCRIPTION = 0x2 | 0x4


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp_path: Path = tmp_path_factory.mktemp("broker_messaging")
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


def send_request(
    topic: str,
    body: bytes,
    *,
    queue_id: int = 0,
    properties: dict[str, str] | None = None,
    code: int = RequestCode.SEND_MESSAGE,
    extra: dict[str, str] | None = None,
) -> RemotingCommand:
    props = {"UNIQ_KEY": f"U{time.time_ns()}", "WAIT": "true", **(properties or {})}
    ext = {
        "producerGroup": "PG",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": str(queue_id),
        "sysFlag": "0",
        "bornTimestamp": str(int(time.time() * 1000)),
        "flag": "0",
        "properties": encode_properties(props),
        "reconsumeTimes": "0",
        "unitMode": "0",
        "batch": "0",
        **(extra or {}),
    }
    return RemotingCommand.request(code, ext, body)


def pull_request(
    topic: str,
    group: str,
    queue_offset: int,
    *,
    queue_id: int = 0,
    suspend_ms: int = 0,
    subscription: str = "*",
) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": group,
            "topic": topic,
            "queueId": str(queue_id),
            "queueOffset": str(queue_offset),
            "maxMsgNums": "32",
            "sysFlag": str(PULL_SUSPEND_SUBSCRIPTION if suspend_ms else 0x4),
            "commitOffset": "0",
            "suspendTimeoutMillis": str(suspend_ms),
            "subscription": subscription,
            "subVersion": "0",
        },
    )


async def send(
    client: RemotingClient, addr: str, topic: str, body: bytes, **kwargs: object
) -> RemotingCommand:
    response = await client.invoke(addr, send_request(topic, body, **kwargs))  # type: ignore[arg-type]
    return response


async def test_broker_send_auto_creates_topic_and_pull_returns_records(
    broker: ServerProcess, client: RemotingClient
) -> None:
    response = await send(
        client, broker.addr, "MsgTopicA", b"hello", properties={"TAGS": "tagA", "KEYS": "k1"}
    )
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert response.ext_fields["queueId"] == "0"
    assert response.ext_fields["queueOffset"] == "0"
    assert response.ext_fields["MSG_REGION"] == "DefaultRegion"
    msg_id = decode_offset_msg_id(response.ext_fields["msgId"])
    assert msg_id.addr == broker.addr

    pulled = await client.invoke(broker.addr, pull_request("MsgTopicA", "CG_A", 0))
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
    assert pulled.ext_fields["nextBeginOffset"] == "1"
    assert pulled.ext_fields["maxOffset"] == "1"
    assert pulled.ext_fields["suggestWhichBrokerId"] == "0"
    (message,) = decode_stored_messages(pulled.body)
    assert message.body == b"hello"
    assert message.tags == "tagA"
    assert message.properties[MessageConst.CLUSTER] == "DefaultCluster"
    assert message.store_host == ("127.0.0.1", broker.port)
    assert message.commit_log_offset == msg_id.commit_log_offset


async def test_broker_send_v2_header_is_understood(broker: ServerProcess, client: RemotingClient) -> None:
    v1 = send_request("MsgTopicV2", b"v2body")
    letters = {
        "producerGroup": "a",
        "topic": "b",
        "defaultTopic": "c",
        "defaultTopicQueueNums": "d",
        "queueId": "e",
        "sysFlag": "f",
        "bornTimestamp": "g",
        "flag": "h",
        "properties": "i",
        "reconsumeTimes": "j",
        "unitMode": "k",
        "batch": "m",
    }
    ext = {letters[key]: value for key, value in v1.ext_fields.items()}
    response = await client.invoke(
        broker.addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"v2body")
    )
    assert response.code == ResponseCode.SUCCESS, response.remark
    pulled = await client.invoke(broker.addr, pull_request("MsgTopicV2", "CG_V2", 0))
    assert [m.body for m in decode_stored_messages(pulled.body)] == [b"v2body"]


async def test_broker_batch_with_cpp_flag_stores_each_message(
    broker: ServerProcess, client: RemotingClient
) -> None:
    items = [(0, f"m{i}".encode(), {"UNIQ_KEY": f"B{i}", "WAIT": "true"}) for i in range(3)]
    request = send_request("MsgTopicBatch", encode_batch(items), extra={"batch": "1"})
    response = await client.invoke(broker.addr, request)
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert len(response.ext_fields["msgId"].split(",")) == 3
    pulled = await client.invoke(broker.addr, pull_request("MsgTopicBatch", "CG_B", 0))
    messages = decode_stored_messages(pulled.body)
    assert [m.body for m in messages] == [b"m0", b"m1", b"m2"]
    assert [m.queue_offset for m in messages] == [0, 1, 2]


async def test_broker_batch_stores_each_property_string_with_the_broker_stamps(
    broker: ServerProcess, client: RemotingClient
) -> None:
    """Canonical strings (stored as sent, stamps appended), a C++ trailing separator, a producer's
    own CLUSTER (replaced in place), a repeated key and an empty item (stored as decoded)."""
    raw = [
        b"UNIQ_KEY\x01P0\x02WAIT\x01true",
        b"UNIQ_KEY\x01P1\x02KEYS\x01k1 k2\x02",
        b"UNIQ_KEY\x01P2\x02CLUSTER\x01mine\x02TAGS\x01t",
        b"UNIQ_KEY\x01P3\x02K\x01a\x02K\x01b",
        b"UNIQ_KEY\x01P4\x02\x02X\x01y",
        b"",
    ]
    body = b"".join(
        struct.pack(">iiiii", 22 + 2 + len(props), 0, 0, 7, 2)
        + f"b{i}".encode()
        + struct.pack(">h", len(props))
        + props
        for i, props in enumerate(raw)
    )
    response = await client.invoke(
        broker.addr, send_request("MsgTopicBatchProps", body, code=RequestCode.SEND_BATCH_MESSAGE)
    )
    assert response.code == ResponseCode.SUCCESS, response.remark
    msg_ids = response.ext_fields["msgId"].split(",")
    pulled = await client.invoke(broker.addr, pull_request("MsgTopicBatchProps", "CG_BP", 0))
    messages = decode_stored_messages(pulled.body)
    assert [m.body for m in messages] == [f"b{i}".encode() for i in range(len(raw))]
    assert [m.flag for m in messages] == [7] * len(raw)
    assert msg_ids == [m.offset_msg_id for m in messages]
    stamps = {"CLUSTER": "DefaultCluster", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
    assert [m.properties for m in messages] == [
        {"UNIQ_KEY": "P0", "WAIT": "true", **stamps},
        {"UNIQ_KEY": "P1", "KEYS": "k1 k2", **stamps},
        {
            "UNIQ_KEY": "P2",
            "CLUSTER": "DefaultCluster",
            "TAGS": "t",
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        },
        {"UNIQ_KEY": "P3", "K": "b", **stamps},
        {"UNIQ_KEY": "P4", "X": "y", **stamps},
        stamps,
    ]
    # The stored string is the mapping encoded in order (no trailing, empty or repeated items).
    position = 0
    for message in messages:
        record = pulled.body[position : position + message.store_size]
        position += message.store_size
        assert stored_message_property_bytes(record) == encode_properties(message.properties).encode()
    now_ms = int(time.time() * 1000)
    for key, expected in (("k2", [b"b1"]), ("P3", [b"b3"])):
        query_ext = {
            "topic": "MsgTopicBatchProps",
            "key": key,
            "maxNum": "32",
            "beginTimestamp": str(now_ms - 60_000),
            "endTimestamp": str(now_ms + 60_000),
        }
        found = await client.invoke(
            broker.addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, query_ext)
        )
        assert [m.body for m in decode_stored_messages(found.body)] == expected


async def test_broker_pull_filters_by_tag(broker: ServerProcess, client: RemotingClient) -> None:
    for tag in ("tagA", "tagB", "tagA"):
        assert (
            await send(client, broker.addr, "MsgTopicTags", tag.encode(), properties={"TAGS": tag})
        ).code == 0
    pulled = await client.invoke(broker.addr, pull_request("MsgTopicTags", "CG_T", 0, subscription="tagB"))
    assert pulled.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_stored_messages(pulled.body)] == [b"tagB"]
    assert pulled.ext_fields["nextBeginOffset"] == "3"


async def test_broker_pull_status_codes_for_offsets(broker: ServerProcess, client: RemotingClient) -> None:
    await send(client, broker.addr, "MsgTopicCodes", b"x")
    at_end = await client.invoke(broker.addr, pull_request("MsgTopicCodes", "CG_C", 1))
    assert at_end.code == ResponseCode.PULL_NOT_FOUND
    assert at_end.ext_fields["nextBeginOffset"] == "1"
    beyond = await client.invoke(broker.addr, pull_request("MsgTopicCodes", "CG_C", 9))
    assert beyond.code == ResponseCode.PULL_OFFSET_MOVED
    assert beyond.ext_fields["nextBeginOffset"] == "1"
    unknown = await client.invoke(broker.addr, pull_request("NoSuchTopicHere", "CG_C", 0))
    assert unknown.code == ResponseCode.TOPIC_NOT_EXIST


async def test_broker_long_poll_wakes_within_milliseconds_of_a_put(
    broker: ServerProcess, client: RemotingClient
) -> None:
    await send(client, broker.addr, "MsgTopicPoll", b"first")
    poll = asyncio.create_task(
        client.invoke(
            broker.addr, pull_request("MsgTopicPoll", "CG_P", 1, suspend_ms=10_000), timeout_ms=15_000
        )
    )
    await asyncio.sleep(0.3)
    assert not poll.done()
    sent_at = time.monotonic()
    assert (await send(client, broker.addr, "MsgTopicPoll", b"second")).code == ResponseCode.SUCCESS
    pulled = await poll
    latency_s = time.monotonic() - sent_at
    assert pulled.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_stored_messages(pulled.body)] == [b"second"]
    assert latency_s < 0.2, f"long poll woke after {latency_s * 1000:.1f} ms"


async def test_broker_long_poll_expires_with_pull_not_found(
    broker: ServerProcess, client: RemotingClient
) -> None:
    await send(client, broker.addr, "MsgTopicExpire", b"only")
    started = time.monotonic()
    pulled = await client.invoke(
        broker.addr, pull_request("MsgTopicExpire", "CG_E", 1, suspend_ms=500), timeout_ms=5_000
    )
    elapsed_s = time.monotonic() - started
    assert pulled.code == ResponseCode.PULL_NOT_FOUND
    assert 0.45 <= elapsed_s < 2.0


async def test_broker_parked_pull_does_not_block_other_requests(
    broker: ServerProcess, client: RemotingClient
) -> None:
    await send(client, broker.addr, "MsgTopicBusy", b"x")
    poll = asyncio.create_task(
        client.invoke(
            broker.addr, pull_request("MsgTopicBusy", "CG_BUSY", 1, suspend_ms=3_000), timeout_ms=10_000
        )
    )
    await asyncio.sleep(0.1)
    started = time.monotonic()
    max_offset = await client.invoke(
        broker.addr,
        RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "MsgTopicBusy", "queueId": "0"}),
    )
    assert time.monotonic() - started < 0.5
    assert max_offset.ext_fields["offset"] == "1"
    poll.cancel()


async def test_broker_consumer_offsets_query_update_and_fresh_group(
    broker: ServerProcess, client: RemotingClient
) -> None:
    await send(client, broker.addr, "MsgTopicOffsets", b"x")
    query = RemotingCommand.request(
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": "CG_O", "topic": "MsgTopicOffsets", "queueId": "0"},
    )
    fresh = await client.invoke(broker.addr, query)
    assert fresh.code == ResponseCode.SUCCESS
    assert fresh.ext_fields["offset"] == "0"
    update = RemotingCommand.request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "CG_O", "topic": "MsgTopicOffsets", "queueId": "0", "commitOffset": "1"},
    )
    assert (await client.invoke(broker.addr, update)).code == ResponseCode.SUCCESS
    query.opaque = 0
    again = await client.invoke(broker.addr, query)
    assert again.ext_fields["offset"] == "1"


async def test_broker_queue_offset_lookups(broker: ServerProcess, client: RemotingClient) -> None:
    before_ms = int(time.time() * 1000)
    for i in range(3):
        await send(client, broker.addr, "MsgTopicLookups", f"m{i}".encode())
    ext = {"topic": "MsgTopicLookups", "queueId": "0"}
    max_offset = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, ext))
    min_offset = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.GET_MIN_OFFSET, ext))
    earliest = await client.invoke(
        broker.addr, RemotingCommand.request(RequestCode.GET_EARLIEST_MSG_STORETIME, ext)
    )
    assert max_offset.ext_fields["offset"] == "3"
    assert min_offset.ext_fields["offset"] == "0"
    assert int(earliest.ext_fields["timestamp"]) >= before_ms - 1000
    search = await client.invoke(
        broker.addr,
        RemotingCommand.request(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**ext, "timestamp": str(before_ms - 60_000)}
        ),
    )
    assert search.code == ResponseCode.SUCCESS
    assert search.ext_fields["offset"] == "0"


async def test_broker_view_message_by_id_and_query_by_key(
    broker: ServerProcess, client: RemotingClient
) -> None:
    response = await send(
        client, broker.addr, "MsgTopicQuery", b"keyed", properties={"KEYS": "order-17 other"}
    )
    msg_id = decode_offset_msg_id(response.ext_fields["msgId"])
    view = await client.invoke(
        broker.addr,
        RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(msg_id.commit_log_offset)}),
    )
    assert view.code == ResponseCode.SUCCESS
    assert decode_stored_messages(view.body)[0].body == b"keyed"
    now_ms = int(time.time() * 1000)
    query_ext = {
        "topic": "MsgTopicQuery",
        "key": "order-17",
        "maxNum": "32",
        "beginTimestamp": str(now_ms - 60_000),
        "endTimestamp": str(now_ms + 60_000),
    }
    found = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, query_ext))
    assert found.code == ResponseCode.SUCCESS, found.remark
    assert [m.body for m in decode_stored_messages(found.body)] == [b"keyed"]
    missing = await client.invoke(
        broker.addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, {**query_ext, "key": "nope"})
    )
    assert missing.code == ResponseCode.QUERY_NOT_FOUND


async def test_broker_send_validation_errors(broker: ServerProcess, client: RemotingClient) -> None:
    illegal = await send(client, broker.addr, "bad topic", b"x")
    assert illegal.code == ResponseCode.SYSTEM_ERROR
    assert "bad topic" in (illegal.remark or "")
    system = await send(client, broker.addr, "SCHEDULE_TOPIC_XXXX", b"x")
    assert system.code == ResponseCode.NO_PERMISSION
    big = await send(client, broker.addr, "MsgTopicBig", b"x" * (4 * 1024 * 1024 + 1))
    assert big.code == ResponseCode.MESSAGE_ILLEGAL
    await send(client, broker.addr, "MsgTopicQid", b"x")
    bad_queue = await send(client, broker.addr, "MsgTopicQid", b"x", queue_id=99)
    assert bad_queue.code == ResponseCode.SYSTEM_ERROR
    assert "queueId[99] is illegal" in (bad_queue.remark or "")


async def test_broker_topic_route_published_to_namesrv(broker: ServerProcess, client: RemotingClient) -> None:
    await send(client, broker.addr, "MsgTopicRoute", b"x")
    namesrv_addr = broker.args[broker.args.index("-c") + 1]
    conf = Path(namesrv_addr).read_text()
    namesrv = next(line.split("=", 1)[1] for line in conf.splitlines() if line.startswith("namesrvAddr="))
    deadline = time.monotonic() + 5
    route = None
    while time.monotonic() < deadline:
        route = await client.invoke(
            namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "MsgTopicRoute"})
        )
        if route.code == ResponseCode.SUCCESS:
            break
        await asyncio.sleep(0.1)
    assert route is not None and route.code == ResponseCode.SUCCESS, (
        "auto-created topic never reached the name server"
    )
    data = orjson.loads(route.body)
    assert data["brokerDatas"][0]["brokerAddrs"]["0"] == broker.addr
    assert data["queueDatas"][0]["writeQueueNums"] == 4


async def test_broker_pull_commits_offset_when_flag_set(
    broker: ServerProcess, client: RemotingClient
) -> None:
    await send(client, broker.addr, "MsgTopicCommit", b"x")
    request = pull_request("MsgTopicCommit", "CG_COMMIT", 0)
    request.ext_fields["sysFlag"] = str(0x1 | 0x4)
    request.ext_fields["commitOffset"] = "1"
    assert (await client.invoke(broker.addr, request)).code == ResponseCode.SUCCESS
    query = RemotingCommand.request(
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": "CG_COMMIT", "topic": "MsgTopicCommit", "queueId": "0"},
    )
    assert (await client.invoke(broker.addr, query)).ext_fields["offset"] == "1"


async def test_broker_java_style_batch_code_320_with_v2_header(
    broker: ServerProcess, client: RemotingClient
) -> None:
    items = [(0, b"j0", {"UNIQ_KEY": "J0"}), (0, b"j1", {"UNIQ_KEY": "J1"})]
    ext = {
        "a": "PG",
        "b": "MsgTopicJavaBatch",
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": "",
        "j": "0",
        "k": "false",
        "m": "true",
    }
    request = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch(items))
    response = await client.invoke(broker.addr, request)
    assert response.code == ResponseCode.SUCCESS, response.remark
    pulled = await client.invoke(broker.addr, pull_request("MsgTopicJavaBatch", "CG_JB", 0))
    assert [m.body for m in decode_stored_messages(pulled.body)] == [b"j0", b"j1"]


# Requests the Apache Java clients send that OrbitMQ once refused (found by tests/interop, which
# drives the real clients); these hold the behaviour without a JVM.


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
