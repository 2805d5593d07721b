"""The corpus: short sequences of raw remoting requests, played against both brokers.

Each scenario names its own topic and group (``T_<scenario>``, ``G_<scenario>``), so scenarios
do not see each other's messages, and records each response it wants compared. Requests are
written out field by field, as a client puts them on the wire (see
/work/shared/docs/remoting-protocol.md for the header field names).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Callable

import orjson

from orbitmq.errors import RequestTimeoutError
from orbitmq.model.route import DataVersion, TopicConfig
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.bodies import (
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    encode_register_broker_body,
)
from orbitmq.protocol.codes import RequestCode as R
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.protocol.properties import encode_properties
from tests.oracle.harness import Scenario, Target

BROKER_NAME = "broker-a"
CLUSTER = "DefaultCluster"
CLIENT_ID = "127.0.0.1@oracle"

SCENARIOS: dict[str, Scenario] = {}
# request codes each scenario sends, for the coverage figure
CODES: dict[str, set[int]] = {}


def scenario(*codes: int) -> Callable[[Scenario], Scenario]:
    def register(function: Scenario) -> Scenario:
        SCENARIOS[function.__name__] = function
        CODES[function.__name__] = {int(code) for code in codes}
        return function

    return register


def names(target: Target) -> tuple[str, str]:
    """The scenario's topic and group (the current scenario's name is set by the test)."""
    return f"T_{target.scenario}", f"G_{target.scenario}"


async def create_topic(t: Target, topic: str, queues: int = 4, record: bool = False, **extra: object) -> None:
    ext: dict[str, object] = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": queues,
        "writeQueueNums": queues,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
        **extra,
    }
    response = await t.broker(R.UPDATE_AND_CREATE_TOPIC, ext)
    if record:
        t.record("create topic", response)
    assert response.code == 0, f"{t.name}: creating {topic}: {response.code} {response.remark}"


def send_ext(
    topic: str, group: str, queue_id: int = 0, properties: dict[str, str] | None = None, **extra: object
) -> dict[str, object]:
    """SEND_MESSAGE_V2's one-letter header."""
    ext: dict[str, object] = {
        "a": group,
        "b": topic,
        "c": "TBW102",
        "d": 4,
        "e": queue_id,
        "f": 0,
        "g": int(time.time() * 1000),
        "h": 0,
        "i": encode_properties(
            properties or {"UNIQ_KEY": "7F0000010000000000000000000" + topic[-5:].rjust(5, "0")}
        ),
        "j": 0,
        "k": False,
        "m": False,
    }
    ext.update(extra)
    return ext


async def send(
    t: Target, topic: str, group: str, body: bytes = b"hello", queue_id: int = 0, **props: str
) -> RemotingCommand:
    properties = {"WAIT": "true", "TAGS": "TagA", **props}
    response = await t.broker(R.SEND_MESSAGE_V2, send_ext(topic, group, queue_id, properties), body)
    assert response.code == 0, f"{t.name}: send to {topic}: {response.code} {response.remark}"
    return response


def pull_ext(
    topic: str, group: str, offset: int, queue_id: int = 0, sys_flag: int = 4, **extra: object
) -> dict[str, object]:
    ext: dict[str, object] = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": offset,
        "maxMsgNums": 32,
        "sysFlag": sys_flag,
        "commitOffset": 0,
        "suspendTimeoutMillis": 0,
        "subscription": "*",
        "subVersion": 0,
        "expressionType": "TAG",
    }
    ext.update(extra)
    return ext


def heartbeat_body(group: str, topic: str, producer_group: str | None = None) -> bytes:
    body = {
        "clientID": CLIENT_ID,
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [
                    {
                        "classFilterMode": False,
                        "topic": topic,
                        "subString": "*",
                        "tagsSet": [],
                        "codeSet": [],
                        "subVersion": 1,
                        "expressionType": "TAG",
                    }
                ],
                "unitMode": False,
            }
        ],
        "producerDataSet": [{"groupName": producer_group}] if producer_group else [],
    }
    return orjson.dumps(body)


async def wait_max_offset(
    t: Target, topic: str, queue_id: int, expected: int, timeout_s: float = 10.0
) -> None:
    """Wait until the queue holds ``expected`` entries: Apache builds its consume queues
    behind the commit log, so a read right after a send can miss the newest messages."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = await t.broker(R.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
        if int(response.ext_fields.get("offset", "-1")) >= expected or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.05)


async def wait_route(t: Target, topic: str, timeout_s: float = 15.0) -> RemotingCommand:
    deadline = time.monotonic() + timeout_s
    while True:
        response = await t.namesrv(R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if response.code == 0 or time.monotonic() > deadline:
            return response
        await asyncio.sleep(0.1)


def topic_config_values(topic: str) -> list[str]:
    fields = (
        "readQueueNums",
        "writeQueueNums",
        "perm",
        "topicFilterType",
        "topicSysFlag",
        "order",
        "topicName",
    )
    return [f"topicConfigTable.{topic}.{name}" for name in fields]


# -- send --------------------------------------------------------------------------------------


@scenario(R.UPDATE_AND_CREATE_TOPIC, R.SEND_MESSAGE_V2)
async def send_v2_single(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic, record=True)
    t.record("send", await t.broker(R.SEND_MESSAGE_V2, send_ext(topic, group), b"hello"))
    t.record("send again", await t.broker(R.SEND_MESSAGE_V2, send_ext(topic, group), b"again"))


@scenario(R.SEND_MESSAGE)
async def send_v1_with_properties(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    properties = {
        "KEYS": "k1 k2",
        "TAGS": "TagA",
        "WAIT": "true",
        "color": "blue",
        "UNIQ_KEY": "7F00000100002A9F0000000000000001",
    }
    ext = {
        "producerGroup": group,
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": 4,
        "queueId": 1,
        "sysFlag": 0,
        "bornTimestamp": int(time.time() * 1000),
        "flag": 7,
        "properties": encode_properties(properties),
        "reconsumeTimes": 0,
        "unitMode": False,
        "batch": False,
    }
    t.record("send v1", await t.broker(R.SEND_MESSAGE, ext, b"body-with-properties"))
    await wait_max_offset(t, topic, 1, 1)
    t.record("pull", await t.broker(R.PULL_MESSAGE, pull_ext(topic, group, 0, queue_id=1)))


@scenario(R.SEND_BATCH_MESSAGE, R.PULL_MESSAGE)
async def send_batch(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    items = [
        (0, f"batch-{i}".encode(), {"UNIQ_KEY": f"7F00000100002A9F000000000000010{i}", "WAIT": "true"})
        for i in range(3)
    ]
    ext = send_ext(topic, group, 2, {"WAIT": "true"}, m=True)
    t.record("batch", await t.broker(R.SEND_BATCH_MESSAGE, ext, encode_batch(items)))
    await wait_max_offset(t, topic, 2, 3)
    t.record("pull", await t.broker(R.PULL_MESSAGE, pull_ext(topic, group, 0, queue_id=2)))


@scenario(R.SEND_MESSAGE_V2)
async def send_auto_creates_topic(t: Target) -> None:
    topic, group = names(t)
    t.record("send to new topic", await t.broker(R.SEND_MESSAGE_V2, send_ext(topic, group, 1), b"auto"))
    t.record(
        "topic config",
        await t.broker(R.GET_ALL_TOPIC_CONFIG),
        select=[f"topicConfigTable.{topic}"],
        values=topic_config_values(topic),
    )


@scenario(R.SEND_MESSAGE_V2)
async def send_refused(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    t.record("queue out of range", await t.broker(R.SEND_MESSAGE_V2, send_ext(topic, group, 99), b"x"))
    t.record("illegal topic name", await t.broker(R.SEND_MESSAGE_V2, send_ext("bad topic!", group), b"x"))
    t.record(
        "schedule topic", await t.broker(R.SEND_MESSAGE_V2, send_ext("SCHEDULE_TOPIC_XXXX", group), b"x")
    )
    t.record("empty body", await t.broker(R.SEND_MESSAGE_V2, send_ext(topic, group), b""))


# -- pull --------------------------------------------------------------------------------------


@scenario(R.PULL_MESSAGE)
async def pull_offsets(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    for index in range(3):
        await send(t, topic, group, f"m{index}".encode())
    await wait_max_offset(t, topic, 0, 3)
    t.record("in range", await t.broker(R.PULL_MESSAGE, pull_ext(topic, group, 1)))
    t.record("at max", await t.broker(R.PULL_MESSAGE, pull_ext(topic, group, 3)))
    t.record("past max", await t.broker(R.PULL_MESSAGE, pull_ext(topic, group, 100)))
    t.record("empty queue", await t.broker(R.PULL_MESSAGE, pull_ext(topic, group, 0, queue_id=3)))
    t.record("empty queue past max", await t.broker(R.PULL_MESSAGE, pull_ext(topic, group, 5, queue_id=3)))
    t.record(
        "tag filter miss", await t.broker(R.PULL_MESSAGE, pull_ext(topic, group, 0, subscription="TagB"))
    )
    t.record("unknown topic", await t.broker(R.PULL_MESSAGE, pull_ext(topic + "_missing", group, 0)))
    t.record("queue out of range", await t.broker(R.PULL_MESSAGE, pull_ext(topic, group, 0, queue_id=9)))


@scenario(R.PULL_MESSAGE)
async def pull_without_subscription(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    await send(t, topic, group)
    await wait_max_offset(t, topic, 0, 1)
    t.record(
        "no subscription flag, no heartbeat",
        await t.broker(R.PULL_MESSAGE, pull_ext(topic, group, 0, sys_flag=0)),
    )


# -- offsets -----------------------------------------------------------------------------------


@scenario(R.QUERY_CONSUMER_OFFSET, R.UPDATE_CONSUMER_OFFSET)
async def consumer_offsets(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    await send(t, topic, group)
    await wait_max_offset(t, topic, 0, 1)
    query = {"consumerGroup": group, "topic": topic, "queueId": 0}
    t.record("query before commit", await t.broker(R.QUERY_CONSUMER_OFFSET, query))
    update = {**query, "commitOffset": 1}
    t.record("update", await t.broker(R.UPDATE_CONSUMER_OFFSET, update))
    t.record("query after commit", await t.broker(R.QUERY_CONSUMER_OFFSET, query))
    t.record("query other queue", await t.broker(R.QUERY_CONSUMER_OFFSET, {**query, "queueId": 1}))
    t.record(
        "query unknown topic", await t.broker(R.QUERY_CONSUMER_OFFSET, {**query, "topic": topic + "_missing"})
    )


@scenario(R.GET_MAX_OFFSET, R.GET_MIN_OFFSET, R.GET_EARLIEST_MSG_STORETIME, R.SEARCH_OFFSET_BY_TIMESTAMP)
async def queue_offsets(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    for _ in range(3):
        await send(t, topic, group)
    await wait_max_offset(t, topic, 0, 3)
    queue = {"topic": topic, "queueId": 0}
    t.record("max", await t.broker(R.GET_MAX_OFFSET, queue))
    t.record("min", await t.broker(R.GET_MIN_OFFSET, queue))
    t.record("max empty queue", await t.broker(R.GET_MAX_OFFSET, {**queue, "queueId": 2}))
    t.record("max unknown topic", await t.broker(R.GET_MAX_OFFSET, {**queue, "topic": topic + "_missing"}))
    t.record("earliest store time", await t.broker(R.GET_EARLIEST_MSG_STORETIME, queue), ext_values=False)
    t.record("search at 0", await t.broker(R.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": 0}))
    future = int(time.time() * 1000) + 3_600_000
    t.record(
        "search in the future", await t.broker(R.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": future})
    )
    t.record(
        "search empty queue",
        await t.broker(R.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "queueId": 2, "timestamp": 0}),
    )


# -- clients -----------------------------------------------------------------------------------


@scenario(R.HEART_BEAT, R.GET_CONSUMER_LIST_BY_GROUP, R.UNREGISTER_CLIENT)
async def heartbeat_and_consumer_list(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    t.record("list before heartbeat", await t.broker(R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}))
    t.record("heartbeat", await t.broker(R.HEART_BEAT, body=heartbeat_body(group, topic, "P_" + group)))
    t.record(
        "list",
        await t.broker(R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}),
        values=["consumerIdList"],
    )
    unregister = {"clientID": CLIENT_ID, "consumerGroup": group, "producerGroup": "P_" + group}
    t.record("unregister", await t.broker(R.UNREGISTER_CLIENT, unregister))
    t.record("list after unregister", await t.broker(R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}))


@scenario(R.HEART_BEAT, R.LOCK_BATCH_MQ, R.UNLOCK_BATCH_MQ)
async def lock_and_unlock(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    await t.broker(R.HEART_BEAT, body=heartbeat_body(group, topic))
    queues = [{"topic": topic, "brokerName": BROKER_NAME, "queueId": q} for q in (0, 1)]
    body = orjson.dumps({"consumerGroup": group, "clientId": CLIENT_ID, "mqSet": queues})
    t.record("lock", await t.broker(R.LOCK_BATCH_MQ, body=body), values=["lockOKMQSet"])
    other = orjson.dumps({"consumerGroup": group, "clientId": "127.0.0.1@other", "mqSet": queues})
    t.record("lock by another client", await t.broker(R.LOCK_BATCH_MQ, body=other), values=["lockOKMQSet"])
    t.record("unlock", await t.broker(R.UNLOCK_BATCH_MQ, body=body))


# -- routes and admin --------------------------------------------------------------------------


@scenario(R.GET_ROUTEINFO_BY_TOPIC)
async def route_info(t: Target) -> None:
    topic, _group = names(t)
    await create_topic(t, topic, queues=2)
    t.record(
        "route",
        await wait_route(t, topic),
        values=["queueDatas", "brokerDatas.[].brokerName", "orderTopicConf"],
    )
    t.record("unknown topic", await t.namesrv(R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic + "_missing"}))


@scenario(R.GET_BROKER_CLUSTER_INFO)
async def cluster_info(t: Target) -> None:
    t.record(
        "cluster info",
        await t.namesrv(R.GET_BROKER_CLUSTER_INFO),
        select=[f"brokerAddrTable.{BROKER_NAME}", f"clusterAddrTable.{CLUSTER}"],
        values=[
            f"brokerAddrTable.{BROKER_NAME}.brokerName",
            f"brokerAddrTable.{BROKER_NAME}.cluster",
            f"clusterAddrTable.{CLUSTER}",
        ],
    )


@scenario(R.GET_ALL_TOPIC_CONFIG, R.UPDATE_AND_CREATE_TOPIC)
async def topic_config(t: Target) -> None:
    topic, _group = names(t)
    await create_topic(t, topic, queues=3, perm=4)
    t.record(
        "all topic config",
        await t.broker(R.GET_ALL_TOPIC_CONFIG),
        select=[f"topicConfigTable.{topic}", "dataVersion"],
        values=topic_config_values(topic),
    )
    await create_topic(t, topic, queues=5)
    t.record(
        "after update",
        await t.broker(R.GET_ALL_TOPIC_CONFIG),
        select=[f"topicConfigTable.{topic}"],
        values=topic_config_values(topic),
    )
    bad = {
        "topic": "bad topic!",
        "readQueueNums": 4,
        "writeQueueNums": 4,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
    }
    t.record("illegal name", await t.broker(R.UPDATE_AND_CREATE_TOPIC, bad))
    t.record(
        "create TBW102 again",
        await t.broker(R.UPDATE_AND_CREATE_TOPIC, {**bad, "topic": "TBW102", "perm": 7}),
    )


@scenario(R.DELETE_TOPIC_IN_BROKER, R.DELETE_TOPIC_IN_NAMESRV)
async def delete_topic(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    await send(t, topic, group)
    await wait_max_offset(t, topic, 0, 1)
    await wait_route(t, topic)
    t.record("delete in broker", await t.broker(R.DELETE_TOPIC_IN_BROKER, {"topic": topic}))
    t.record("max offset after delete", await t.broker(R.GET_MAX_OFFSET, {"topic": topic, "queueId": 0}))
    t.record("delete in namesrv", await t.namesrv(R.DELETE_TOPIC_IN_NAMESRV, {"topic": topic}))
    t.record("route after delete", await t.namesrv(R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
    t.record(
        "delete unknown in broker", await t.broker(R.DELETE_TOPIC_IN_BROKER, {"topic": topic + "_missing"})
    )


@scenario(R.GET_TOPIC_STATS_INFO)
async def topic_stats(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic, queues=2)
    await send(t, topic, group)
    await wait_max_offset(t, topic, 0, 1)
    t.record("stats", await t.broker(R.GET_TOPIC_STATS_INFO, {"topic": topic}))
    t.record("unknown topic", await t.broker(R.GET_TOPIC_STATS_INFO, {"topic": topic + "_missing"}))


@scenario(R.GET_BROKER_RUNTIME_INFO)
async def broker_runtime_info(t: Target) -> None:
    t.record(
        "runtime info",
        await t.broker(R.GET_BROKER_RUNTIME_INFO),
        select=["table.msgPutTotalTodayNow", "table.brokerVersionDesc", "table.bootTimestamp"],
    )


# -- queries -----------------------------------------------------------------------------------


@scenario(R.QUERY_MESSAGE, R.VIEW_MESSAGE_BY_ID)
async def query_and_view(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    sent = await send(t, topic, group, b"find-me", KEYS="order-1")
    offset = decode_offset_msg_id(sent.ext_fields["msgId"]).commit_log_offset
    t.record("view by id", await t.broker(R.VIEW_MESSAGE_BY_ID, {"offset": offset}))
    t.record("view past the end", await t.broker(R.VIEW_MESSAGE_BY_ID, {"offset": offset + 10_000_000}))
    query = {"topic": topic, "key": "order-1", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**62}
    deadline = time.monotonic() + 10
    while True:  # the key index is built behind the store, on both servers
        found = await t.broker(R.QUERY_MESSAGE, query)
        if found.code == 0 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    t.record("query by key", found, ext_values=False)
    t.record(
        "query missing key",
        await t.broker(R.QUERY_MESSAGE, {**query, "key": "nothing-here"}),
        ext_values=False,
    )


# -- transactions ------------------------------------------------------------------------------


@scenario(R.SEND_MESSAGE_V2, R.END_TRANSACTION)
async def transaction_commit(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    properties = {
        "TRAN_MSG": "true",
        "PGROUP": group,
        "WAIT": "true",
        "UNIQ_KEY": "7F00000100002A9F00000000000000AA",
    }
    half = await t.broker(R.SEND_MESSAGE_V2, send_ext(topic, group, 0, properties, f=4), b"half")
    t.record("half send", half)
    t.record("pull before commit", await t.broker(R.PULL_MESSAGE, pull_ext(topic, group, 0)))
    end = {
        "producerGroup": group,
        "tranStateTableOffset": half.ext_fields.get("queueOffset", "0"),
        "commitLogOffset": decode_offset_msg_id(half.ext_fields["msgId"]).commit_log_offset,
        "commitOrRollback": 8,
        "fromTransactionCheck": False,
        "msgId": properties["UNIQ_KEY"],
        "transactionId": properties["UNIQ_KEY"],
    }
    t.record("commit", await _maybe(t.broker(R.END_TRANSACTION, end, timeout_ms=3000)))
    await wait_max_offset(t, topic, 0, 1)
    t.record("pull after commit", await t.broker(R.PULL_MESSAGE, pull_ext(topic, group, 0)))
    t.record("commit again", await _maybe(t.broker(R.END_TRANSACTION, end, timeout_ms=3000)))


async def _maybe(call: object) -> RemotingCommand:
    """The response, or a code -1 stand-in when the server answered nothing in time."""
    try:
        return await call  # type: ignore[misc, no-any-return]
    except RequestTimeoutError:
        return RemotingCommand(code=-1, remark="no response")


# -- bad input ---------------------------------------------------------------------------------


@scenario()
async def unknown_request_code(t: Target) -> None:
    t.record("broker", await t.broker(9999))
    t.record("namesrv", await t.namesrv(9999))


@scenario(R.PULL_MESSAGE, R.SEND_MESSAGE_V2, R.GET_MAX_OFFSET, R.QUERY_CONSUMER_OFFSET)
async def bad_headers(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    t.record(
        "pull with a non-numeric offset",
        await _maybe(t.broker(R.PULL_MESSAGE, pull_ext(topic, group, "abc"), timeout_ms=3000)),
    )  # type: ignore[arg-type]
    t.record(
        "send without a topic",
        await _maybe(t.broker(R.SEND_MESSAGE_V2, {"a": group, "e": 0}, b"x", timeout_ms=3000)),
    )
    t.record("max offset without fields", await _maybe(t.broker(R.GET_MAX_OFFSET, {}, timeout_ms=3000)))
    t.record(
        "query offset without group",
        await _maybe(t.broker(R.QUERY_CONSUMER_OFFSET, {"topic": topic, "queueId": 0}, timeout_ms=3000)),
    )
    t.record(
        "heartbeat with a non-JSON body",
        await _maybe(t.broker(R.HEART_BEAT, body=b"not json", timeout_ms=3000)),
    )


# -- nameserver --------------------------------------------------------------------------------


@scenario(
    R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    R.PUT_KV_CONFIG,
    R.GET_KV_CONFIG,
    R.DELETE_KV_CONFIG,
    R.GET_KVLIST_BY_NAMESPACE,
)
async def namesrv_admin(t: Target) -> None:
    topic, _group = names(t)
    t.record("topic list", await t.namesrv(R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), select=["topicList"])
    kv = {"namespace": "ORACLE_NS", "key": topic}
    t.record("get missing kv", await t.namesrv(R.GET_KV_CONFIG, kv))
    t.record("put kv", await t.namesrv(R.PUT_KV_CONFIG, {**kv, "value": "v1"}))
    t.record("get kv", await t.namesrv(R.GET_KV_CONFIG, kv))
    t.record(
        "kv list", await t.namesrv(R.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORACLE_NS"}), values=["table"]
    )
    t.record("delete kv", await t.namesrv(R.DELETE_KV_CONFIG, kv))
    t.record(
        "kv list of unknown namespace", await t.namesrv(R.GET_KVLIST_BY_NAMESPACE, {"namespace": "NOPE_NS"})
    )


# -- subscription groups and consumption --------------------------------------------------------


@scenario(
    R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    R.GET_SUBSCRIPTIONGROUP_CONFIG,
    R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    R.DELETE_SUBSCRIPTIONGROUP,
)
async def subscription_groups(t: Target) -> None:
    _topic, group = names(t)
    config = {
        "groupName": group,
        "consumeEnable": True,
        "consumeBroadcastEnable": True,
        "retryQueueNums": 1,
        "retryMaxTimes": 5,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "consumeMessageOrderly": False,
    }
    t.record("create", await t.broker(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(config)))
    t.record(
        "get",
        await t.broker(R.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group}),
        values=["groupName", "retryMaxTimes", "retryQueueNums", "consumeBroadcastEnable"],
    )
    t.record(
        "get all",
        await t.broker(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
        select=[f"subscriptionGroupTable.{group}"],
    )
    t.record("delete", await t.broker(R.DELETE_SUBSCRIPTIONGROUP, {"groupName": group}))
    t.record("get deleted", await t.broker(R.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group}))


@scenario(
    R.GET_CONSUME_STATS,
    R.GET_CONSUMER_CONNECTION_LIST,
    R.GET_PRODUCER_CONNECTION_LIST,
    R.QUERY_TOPIC_CONSUME_BY_WHO,
)
async def consume_stats(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic, queues=1)
    await send(t, topic, group)
    await wait_max_offset(t, topic, 0, 1)
    await t.broker(R.HEART_BEAT, body=heartbeat_body(group, topic, "P_" + group))
    await t.broker(
        R.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": 0, "commitOffset": 1}
    )
    t.record("consume stats", await t.broker(R.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic}))
    t.record(
        "consumer connections",
        await t.broker(R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}),
        values=["consumeType", "messageModel", "consumeFromWhere"],
    )
    t.record(
        "producer connections",
        await t.broker(R.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "P_" + group}),
    )
    t.record(
        "consumed by", await t.broker(R.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}), values=["groupList"]
    )
    t.record(
        "consume stats unknown group",
        await t.broker(R.GET_CONSUME_STATS, {"consumerGroup": group + "_x", "topic": topic}),
    )


@scenario(R.CONSUMER_SEND_MSG_BACK)
async def consumer_send_back(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    sent = await send(t, topic, group)
    offset = decode_offset_msg_id(sent.ext_fields["msgId"]).commit_log_offset
    back = {
        "offset": offset,
        "group": group,
        "delayLevel": 0,
        "originMsgId": sent.ext_fields["msgId"],
        "originTopic": topic,
        "unitMode": False,
        "maxReconsumeTimes": 16,
    }
    t.record("send back", await t.broker(R.CONSUMER_SEND_MSG_BACK, back))
    # delayLevel 0: the broker delays it by level 3 + reconsumeTimes (10 s), in queue 2 of the
    # schedule topic (whose offset every scenario shares: compared by kind only).
    await wait_max_offset(t, "SCHEDULE_TOPIC_XXXX", 2, 1)
    schedule_queue = {"topic": "SCHEDULE_TOPIC_XXXX", "queueId": 2}
    t.record("schedule queue max offset", await t.broker(R.GET_MAX_OFFSET, schedule_queue), ext_values=False)
    t.record(
        "retry topic max offset", await t.broker(R.GET_MAX_OFFSET, {"topic": "%RETRY%" + group, "queueId": 0})
    )
    t.record(
        "send back bad offset",
        await t.broker(R.CONSUMER_SEND_MSG_BACK, {**back, "offset": offset + 50_000_000}),
    )


# -- broker admin and sync codes -----------------------------------------------------------------


@scenario(R.GET_BROKER_CONFIG, R.VIEW_BROKER_STATS_DATA, R.GET_BROKER_CONSUME_STATS)
async def broker_admin_reads(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic, queues=1)
    await send(t, topic, group)
    await wait_max_offset(t, topic, 0, 1)
    t.record("broker config", await t.broker(R.GET_BROKER_CONFIG), ext_values=False)
    stats = {"statsName": "TOPIC_PUT_NUMS", "statsKey": topic}
    t.record("stats data", await t.broker(R.VIEW_BROKER_STATS_DATA, stats))
    t.record(
        "stats data of unknown name", await t.broker(R.VIEW_BROKER_STATS_DATA, {**stats, "statsName": "NOPE"})
    )
    t.record(
        "broker consume stats",
        await t.broker(R.GET_BROKER_CONSUME_STATS, {"isOrder": False, "timeoutMillis": 5000}),
        select=["totalDiff", "brokerAddr"],
    )


@scenario(R.GET_ALL_CONSUMER_OFFSET, R.GET_ALL_DELAY_OFFSET, R.CLONE_GROUP_OFFSET)
async def offset_tables(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic, queues=1)
    await send(t, topic, group)
    await wait_max_offset(t, topic, 0, 1)
    await t.broker(R.HEART_BEAT, body=heartbeat_body(group, topic))
    await t.broker(
        R.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": 0, "commitOffset": 1}
    )
    key = f"{topic}@{group}"
    t.record(
        "all consumer offsets",
        await t.broker(R.GET_ALL_CONSUMER_OFFSET),
        select=[f"offsetTable.{key}"],
        values=[f"offsetTable.{key}"],
    )
    # Delay offsets are shared by every scenario (and level 3 is used by consumer_send_back):
    # the answer's code and JSON-ness are compared, through a level no scenario uses.
    t.record("all delay offsets", await t.broker(R.GET_ALL_DELAY_OFFSET), select=["offsetTable.18"])
    clone = {"srcGroup": group, "destGroup": group + "_copy", "topic": topic, "offline": True}
    t.record("clone group offset", await t.broker(R.CLONE_GROUP_OFFSET, clone))
    query = {"consumerGroup": group + "_copy", "topic": topic, "queueId": 0}
    t.record("cloned offset", await t.broker(R.QUERY_CONSUMER_OFFSET, query))


@scenario(R.GET_TIMER_CHECK_POINT, R.GET_BROKER_HA_STATUS, R.GET_BROKER_EPOCH_CACHE)
async def replication_reads(t: Target) -> None:
    t.record("timer check point", await t.broker(R.GET_TIMER_CHECK_POINT), ext_values=False)
    t.record(
        "HA status",
        await t.broker(R.GET_BROKER_HA_STATUS),
        select=["masterCommitLogMaxOffset", "inSyncSlaveNums"],
    )
    t.record("epoch cache", await t.broker(R.GET_BROKER_EPOCH_CACHE), ext_values=False)


@scenario(R.CHECK_CLIENT_CONFIG)
async def check_client_config(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    subscription = {
        "topic": topic,
        "subString": "*",
        "expressionType": "TAG",
        "classFilterMode": False,
        "tagsSet": [],
        "codeSet": [],
        "subVersion": 1,
    }
    body = {"clientId": CLIENT_ID, "group": group, "subscriptionData": subscription}
    t.record("tag subscription", await t.broker(R.CHECK_CLIENT_CONFIG, body=orjson.dumps(body)))
    sql = {**subscription, "expressionType": "SQL92", "subString": "a > 1"}
    t.record(
        "sql92 subscription",
        await t.broker(R.CHECK_CLIENT_CONFIG, body=orjson.dumps({**body, "subscriptionData": sql})),
    )
    bad = {**subscription, "expressionType": "SQL92", "subString": "a >"}
    t.record(
        "bad sql92",
        await t.broker(R.CHECK_CLIENT_CONFIG, body=orjson.dumps({**body, "subscriptionData": bad})),
    )


@scenario(R.GET_CONSUMER_RUNNING_INFO, R.CONSUME_MESSAGE_DIRECTLY, R.INVOKE_BROKER_TO_RESET_OFFSET)
async def relays_to_absent_clients(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic, queues=1)
    await send(t, topic, group)
    await wait_max_offset(t, topic, 0, 1)
    info = {"consumerGroup": group, "clientId": "127.0.0.1@absent", "jstackEnable": False}
    t.record("running info", await _maybe(t.broker(R.GET_CONSUMER_RUNNING_INFO, info, timeout_ms=5000)))
    direct = {
        "consumerGroup": group,
        "clientId": "127.0.0.1@absent",
        "msgId": "0" * 32,
        "brokerName": BROKER_NAME,
    }
    t.record("consume directly", await _maybe(t.broker(R.CONSUME_MESSAGE_DIRECTLY, direct, timeout_ms=5000)))
    reset = {"topic": topic, "group": group, "timestamp": 0, "isForce": True}
    t.record(
        "reset offset, no consumer",
        await _maybe(t.broker(R.INVOKE_BROKER_TO_RESET_OFFSET, reset, timeout_ms=5000)),
    )


@scenario(R.SEND_REPLY_MESSAGE, R.SEND_REPLY_MESSAGE_V2)
async def reply_to_absent_requester(t: Target) -> None:
    _topic, group = names(t)
    properties = {
        "CLUSTER": CLUSTER,
        "REPLY_TO_CLIENT": "127.0.0.1@absent",
        "CORRELATION_ID": "corr-1",
        "MSG_TYPE": "reply",
        "UNIQ_KEY": "7F00000100002A9F00000000000000BB",
    }
    ext = send_ext(f"{CLUSTER}_REPLY_TOPIC", group, 0, properties)
    t.record(
        "reply v2",
        await _maybe(t.broker(R.SEND_REPLY_MESSAGE_V2, ext, b"reply", timeout_ms=5000)),
        ext_values=False,
    )


@scenario(R.POP_MESSAGE, R.ACK_MESSAGE, R.CHANGE_MESSAGE_INVISIBLETIME)
async def pop_and_ack(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic, queues=1)
    pop = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": -1,
        "maxMsgNums": 4,
        "invisibleTime": 60_000,
        "pollTime": 0,
        "bornTime": int(time.time() * 1000),
        "initMode": 0,
        "expType": "TAG",
        "exp": "*",
    }
    t.record("pop empty", await t.broker(R.POP_MESSAGE, pop), ext_values=False)
    await send(t, topic, group, b"pop-me")
    await wait_max_offset(t, topic, 0, 1)
    popped = await t.broker(R.POP_MESSAGE, {**pop, "bornTime": int(time.time() * 1000)})
    t.record("pop one", popped, ext_values=False)
    from orbitmq.protocol.message_codec import decode_stored_messages

    messages = decode_stored_messages(popped.body) if popped.body else []
    if not messages:
        return
    # The client builds the receipt handle (RocketMQ's ExtraInfoUtil) from the pop answer:
    # checkpoint offset, pop time, invisible time, revive queue, retry mark, broker, queue, offset.
    ext = popped.ext_fields
    ck_offset = ext.get("startOffsetInfo", "0 0 0").split(";")[0].split()[-1]
    fields = [ck_offset, ext.get("popTime", "0"), ext.get("invisibleTime", "0"), ext.get("reviveQid", "0")]
    extra_info = " ".join(
        [*fields, "0", BROKER_NAME, str(messages[0].queue_id), str(messages[0].queue_offset)]
    )
    handle = {"consumerGroup": group, "topic": topic, "queueId": 0, "extraInfo": extra_info, "offset": 0}
    changed = await t.broker(R.CHANGE_MESSAGE_INVISIBLETIME, {**handle, "invisibleTime": 30_000})
    t.record("change invisible time", changed, ext_values=False)
    t.record("ack with the first handle", await t.broker(R.ACK_MESSAGE, handle))
    t.record("ack with an empty handle", await t.broker(R.ACK_MESSAGE, {**handle, "extraInfo": ""}))


@scenario(R.RECALL_MESSAGE)
async def recall_bad_handle(t: Target) -> None:
    topic, group = names(t)
    await create_topic(t, topic)
    t.record(
        "recall with a bad handle",
        await t.broker(
            R.RECALL_MESSAGE, {"producerGroup": group, "topic": topic, "recallHandle": "not-a-handle"}
        ),
    )


@scenario(R.QUERY_DATA_VERSION)
async def namesrv_data_version(t: Target) -> None:
    stale = orjson.dumps({"timestamp": 0, "counter": 0})
    query = {"brokerName": BROKER_NAME, "brokerAddr": t.broker_addr, "clusterName": CLUSTER, "brokerId": 0}
    t.record("stale data version", await t.namesrv(R.QUERY_DATA_VERSION, query, stale))
    unknown = {**query, "brokerAddr": "127.0.0.1:1"}
    t.record("unknown broker", await t.namesrv(R.QUERY_DATA_VERSION, unknown, stale))


@scenario(R.UPDATE_BROKER_CONFIG)
async def update_broker_config(t: Target) -> None:
    # Set to what it already is: later scenarios must still see a writable broker.
    t.record("same permission", await t.broker(R.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6\n"))
    t.record(
        "not properties", await _maybe(t.broker(R.UPDATE_BROKER_CONFIG, body=b"\xff\xfe", timeout_ms=3000))
    )


@scenario(
    R.GET_BROKER_CLUSTER_ACL_INFO,
    R.GET_BROKER_CLUSTER_ACL_CONFIG,
    R.UPDATE_AND_CREATE_ACL_CONFIG,
    R.DELETE_ACL_CONFIG,
    R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
)
async def acl_admin_with_acl_off(t: Target) -> None:
    t.record(
        "cluster acl info",
        await _maybe(t.broker(R.GET_BROKER_CLUSTER_ACL_INFO, timeout_ms=3000)),
        ext_values=False,
    )
    t.record(
        "cluster acl config",
        await _maybe(t.broker(R.GET_BROKER_CLUSTER_ACL_CONFIG, timeout_ms=3000)),
        ext_values=False,
    )
    account = {
        "accessKey": "oracleKey",
        "secretKey": "oracleSecret123",
        "defaultTopicPerm": "PUB",
        "admin": False,
    }
    t.record(
        "create account", await _maybe(t.broker(R.UPDATE_AND_CREATE_ACL_CONFIG, account, timeout_ms=3000))
    )
    t.record(
        "delete account",
        await _maybe(t.broker(R.DELETE_ACL_CONFIG, {"accessKey": "oracleKey"}, timeout_ms=3000)),
    )
    white = {"globalWhiteAddrs": "10.0.0.*"}
    t.record(
        "global white addrs",
        await _maybe(t.broker(R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, white, timeout_ms=3000)),
    )


@scenario(R.GET_TOPIC_CONFIG, R.LITE_PULL_MESSAGE, R.QUERY_CONSUME_QUEUE)
async def lite_pull_and_queue_reads(t: Target) -> None:
    # The Java clients' lite pull consumer and its topic config read, and mqadmin's queryCq.
    topic, group = names(t)
    await create_topic(t, topic)
    await send(t, topic, group)
    await wait_max_offset(t, topic, 0, 1)
    t.record("topic config", await t.broker(R.GET_TOPIC_CONFIG, {"topic": topic}), select=["topicConfig"])
    t.record(
        "topic config of unknown topic", await t.broker(R.GET_TOPIC_CONFIG, {"topic": topic + "_missing"})
    )
    t.record("lite pull", await t.broker(R.LITE_PULL_MESSAGE, pull_ext(topic, group, 0, sys_flag=0)))
    t.record("lite pull past max", await t.broker(R.LITE_PULL_MESSAGE, pull_ext(topic, group, 5, sys_flag=0)))
    query = {"topic": topic, "queueId": 0, "index": 0, "count": 1, "consumerGroup": group}
    t.record(
        "consume queue", await t.broker(R.QUERY_CONSUME_QUEUE, query), select=["queueData", "maxQueueIndex"]
    )


@scenario(R.WIPE_WRITE_PERM_OF_BROKER, R.ADD_WRITE_PERM_OF_BROKER)
async def namesrv_write_permission(t: Target) -> None:
    # mqadmin's wipeWritePerm and addWritePerm; the second gives back what the first took, so
    # later scenarios still see a writable broker. The topic counts differ with the system topics
    # each broker has: compared by kind.
    broker = {"brokerName": BROKER_NAME}
    t.record("wipe write permission", await t.namesrv(R.WIPE_WRITE_PERM_OF_BROKER, broker), ext_values=False)
    t.record("add write permission", await t.namesrv(R.ADD_WRITE_PERM_OF_BROKER, broker), ext_values=False)
    unknown = {"brokerName": BROKER_NAME + "_missing"}
    t.record("wipe unknown broker", await t.namesrv(R.WIPE_WRITE_PERM_OF_BROKER, unknown))


@scenario(R.GET_NAMESRV_CONFIG, R.UPDATE_NAMESRV_CONFIG)
async def namesrv_config(t: Target) -> None:
    # The answer is a properties text whose keys differ between the two servers: compared by code
    # and kind. The update sets the scan interval to OrbitMQ's default on both (Apache's is 5 s;
    # a slower scan changes nothing the scenarios see).
    t.record("name server config", await t.namesrv(R.GET_NAMESRV_CONFIG), ext_values=False)
    t.record(
        "update name server config",
        await t.namesrv(R.UPDATE_NAMESRV_CONFIG, body=b"scanNotActiveBrokerInterval=10000\n"),
    )
    t.record(
        "update a key not implemented",
        await t.namesrv(R.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=false\n"),
    )


@scenario(R.STAGE_MESSAGES, R.COMMIT_STAGED, R.MERGE_CONSUMER_OFFSET)
async def orbitmq_only_codes(t: Target) -> None:
    topic, group = names(t)
    t.record("stage messages", await t.broker(R.STAGE_MESSAGES, {"topic": topic, "producerGroup": group}))
    t.record("commit staged", await t.broker(R.COMMIT_STAGED, {"topic": topic, "producerGroup": group}))
    offsets = orjson.dumps({"offsetTable": {f"{topic}@{group}": {"0": 1}}})
    t.record("merge consumer offset", await t.broker(R.MERGE_CONSUMER_OFFSET, body=offsets))


def _registration(topics: list[str], counter: int) -> bytes:
    table = {topic: TopicConfig(topic, read_queue_nums=2, write_queue_nums=2) for topic in topics}
    wrapper = TopicConfigSerializeWrapper(
        table, DataVersion(timestamp=1_700_000_000_000 + counter, counter=counter)
    )
    return encode_register_broker_body(RegisterBrokerBody(wrapper))


@scenario(R.REGISTER_BROKER, R.UNREGISTER_BROKER)
async def register_broker(t: Target) -> None:
    # A broker of its own (an address nothing listens on: the name server never dials it). The
    # second registration lists only the topic just created, with a new data version, as a
    # RocketMQ 5 broker's registerIncrementBrokerData does: the first topics stay routed.
    topic, _group = names(t)
    broker = {
        "brokerName": f"reg_{t.scenario}",
        "brokerAddr": "127.0.0.1:9",
        "clusterName": f"RegCluster_{t.scenario}",
        "haServerAddr": "127.0.0.1:10",
        "brokerId": 0,
        "compressed": False,
    }
    for label, topics, counter in (
        ("register", [topic + "_a", topic + "_b"], 1),
        ("increment", [topic + "_c"], 2),
    ):
        body = _registration(topics, counter)
        crc = {"bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
        t.record(label, await t.namesrv(R.REGISTER_BROKER, {**broker, **crc}, body), ext_values=False)
    for suffix in ("_a", "_c"):
        route = await t.namesrv(R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic + suffix})
        t.record(f"route{suffix}", route, select=["queueDatas"], values=["queueDatas"])
    unregister = {key: broker[key] for key in ("brokerName", "brokerAddr", "clusterName", "brokerId")}
    t.record("unregister", await t.namesrv(R.UNREGISTER_BROKER, unregister))
    # RocketMQ 5's name server unregisters in batches on a thread of its own
    # (BatchUnregistrationService): its route may outlive the answer for a moment. Compare the
    # settled state, waiting a bounded time on either side.
    for _ in range(50):
        route = await t.namesrv(R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic + "_a"})
        if route.code != ResponseCode.SUCCESS:
            break
        await asyncio.sleep(0.1)
    t.record("route after unregister", route)
