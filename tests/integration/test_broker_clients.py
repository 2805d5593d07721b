"""Broker client management over real processes: heartbeats, consumer lists, notifications,
queue locks, send-back to %RETRY% / %DLQ%, and unregistering.

Method: one name server and one broker subprocess for the module; each test plays one or two
clients with their own RemotingClient (one connection each, as RocketMQ clients keep).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import orjson
import pytest

from orbitmq.model.message import MessageConst
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.protocol.properties import encode_properties
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, start_broker, start_namesrv

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp_path: Path = tmp_path_factory.mktemp("broker_clients")
    started: list[ServerProcess] = []
    try:
        namesrv = start_namesrv(tmp_path)
        started.append(namesrv)
        # Short delay levels: a send-back retry (level 3 + reconsumeTimes) is due after 300 ms.
        delay_levels = " ".join(f"{100 * level}ms" for level in range(1, 19))
        started.append(start_broker(tmp_path, namesrv.addr, messageDelayLevel=delay_levels))
        yield started[-1]
    finally:
        for proc in reversed(started):
            proc.kill()


class Consumer:
    """A RemotingClient that records NOTIFY_CONSUMER_IDS_CHANGED requests from the broker."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.notified: list[str] = []
        self.client = RemotingClient(
            request_handlers={RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: self._on_notify}
        )

    async def _on_notify(self, addr: str, request: RemotingCommand) -> RemotingCommand | None:
        self.notified.append(request.ext_fields.get("consumerGroup", ""))
        return None

    async def heartbeat(self, addr: str, group: str, topic: str, expression: str = "*") -> RemotingCommand:
        body = {
            "clientID": self.client_id,
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": 1,
                    "messageModel": 1,
                    "consumeFromWhere": 0,
                    "subscriptionDataSet": [
                        {"topic": topic, "subString": expression, "subVersion": str(time.time_ns() // 1000)}
                    ],
                }
            ],
        }
        request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, orjson.dumps(body))
        return await self.client.invoke(addr, request)


@pytest.fixture
async def consumers() -> AsyncIterator[list[Consumer]]:
    made: list[Consumer] = []
    try:
        yield made
    finally:
        for consumer in made:
            await consumer.client.close()


async def _send(
    client: RemotingClient, addr: str, topic: str, body: bytes, reconsume_times: int = 0
) -> RemotingCommand:
    ext = {
        "producerGroup": "PG",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "1",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": str(int(time.time() * 1000)),
        "flag": "0",
        "properties": encode_properties({"UNIQ_KEY": f"U{time.time_ns()}", "TAGS": "t"}),
        "reconsumeTimes": str(reconsume_times),
        "unitMode": "0",
    }
    return await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE, ext, body))


async def _consumer_list(client: RemotingClient, addr: str, group: str) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    return await client.invoke(addr, request)


async def test_broker_heartbeat_registers_consumer_and_lists_client_id_verbatim(
    broker: ServerProcess, consumers: list[Consumer]
) -> None:
    consumer = Consumer("16792-127.0.0.1@DEFAULT")
    consumers.append(consumer)
    assert (await consumer.heartbeat(broker.addr, "CG_HB", "CliTopicA")).code == ResponseCode.SUCCESS
    listed = await _consumer_list(consumer.client, broker.addr, "CG_HB")
    assert listed.code == ResponseCode.SUCCESS
    assert orjson.loads(listed.body) == {"consumerIdList": ["16792-127.0.0.1@DEFAULT"]}


async def test_broker_consumer_list_of_unknown_group_is_system_error(
    broker: ServerProcess, consumers: list[Consumer]
) -> None:
    consumer = Consumer("c-unknown")
    consumers.append(consumer)
    listed = await _consumer_list(consumer.client, broker.addr, "CG_NOBODY")
    assert listed.code == ResponseCode.SYSTEM_ERROR
    assert "no consumer for this group" in (listed.remark or "")


async def test_broker_heartbeat_creates_retry_topic(broker: ServerProcess, consumers: list[Consumer]) -> None:
    consumer = Consumer("c-retry")
    consumers.append(consumer)
    await consumer.heartbeat(broker.addr, "CG_RT", "CliTopicRT")
    configs = await consumer.client.invoke(
        broker.addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG)
    )
    table = orjson.loads(configs.body)["topicConfigTable"]
    assert table["%RETRY%CG_RT"]["readQueueNums"] == 1
    assert table["%RETRY%CG_RT"]["perm"] == 6


async def test_broker_member_join_and_leave_notify_the_group(
    broker: ServerProcess, consumers: list[Consumer]
) -> None:
    first, second = Consumer("c-first"), Consumer("c-second")
    consumers.extend([first, second])
    await first.heartbeat(broker.addr, "CG_N", "CliTopicN")
    await second.heartbeat(broker.addr, "CG_N", "CliTopicN")
    await asyncio.sleep(0.2)
    assert "CG_N" in first.notified
    listed = await _consumer_list(first.client, broker.addr, "CG_N")
    assert sorted(orjson.loads(listed.body)["consumerIdList"]) == ["c-first", "c-second"]
    first.notified.clear()
    await second.client.close()
    await asyncio.sleep(0.3)
    assert "CG_N" in first.notified
    listed = await _consumer_list(first.client, broker.addr, "CG_N")
    assert orjson.loads(listed.body)["consumerIdList"] == ["c-first"]


async def test_broker_unregister_client_removes_member(
    broker: ServerProcess, consumers: list[Consumer]
) -> None:
    consumer = Consumer("c-unreg")
    consumers.append(consumer)
    await consumer.heartbeat(broker.addr, "CG_U", "CliTopicU")
    request = RemotingCommand.request(
        RequestCode.UNREGISTER_CLIENT, {"clientID": "c-unreg", "producerGroup": "", "consumerGroup": "CG_U"}
    )
    assert (await consumer.client.invoke(broker.addr, request)).code == ResponseCode.SUCCESS
    listed = await _consumer_list(consumer.client, broker.addr, "CG_U")
    assert listed.code == ResponseCode.SYSTEM_ERROR


async def test_broker_pull_uses_heartbeat_subscription_when_flag_clear(
    broker: ServerProcess, consumers: list[Consumer]
) -> None:
    consumer = Consumer("c-sub")
    consumers.append(consumer)
    await _send(consumer.client, broker.addr, "CliTopicSub", b"x")
    pull_ext = {
        "consumerGroup": "CG_SUB",
        "topic": "CliTopicSub",
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "32",
        "sysFlag": "0",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subVersion": "0",
    }
    missing = await consumer.client.invoke(
        broker.addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, pull_ext)
    )
    assert missing.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    await consumer.heartbeat(broker.addr, "CG_SUB", "CliTopicSub", "t")
    found = await consumer.client.invoke(
        broker.addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, pull_ext)
    )
    assert found.code == ResponseCode.SUCCESS
    assert len(decode_stored_messages(found.body)) == 1


def _lock_body(group: str, client_id: str, queue_ids: list[int]) -> bytes:
    mqs = [{"topic": "CliTopicLock", "brokerName": "broker-a", "queueId": queue_id} for queue_id in queue_ids]
    return orjson.dumps({"consumerGroup": group, "clientId": client_id, "mqSet": mqs})


async def test_broker_lock_batch_mq_grants_each_queue_to_one_client(
    broker: ServerProcess, consumers: list[Consumer]
) -> None:
    first, second = Consumer("c-lock-1"), Consumer("c-lock-2")
    consumers.extend([first, second])
    lock = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, _lock_body("CG_L", "c-lock-1", [0, 1]))
    granted = await first.client.invoke(broker.addr, lock)
    assert granted.code == ResponseCode.SUCCESS
    assert {mq["queueId"] for mq in orjson.loads(granted.body)["lockOKMQSet"]} == {0, 1}
    contested = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, _lock_body("CG_L", "c-lock-2", [1, 2]))
    partial = await second.client.invoke(broker.addr, contested)
    assert {mq["queueId"] for mq in orjson.loads(partial.body)["lockOKMQSet"]} == {2}
    unlock = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, {}, _lock_body("CG_L", "c-lock-1", [1]))
    assert (await first.client.invoke(broker.addr, unlock)).code == ResponseCode.SUCCESS
    retry = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, _lock_body("CG_L", "c-lock-2", [1]))
    assert {
        mq["queueId"]
        for mq in orjson.loads((await second.client.invoke(broker.addr, retry)).body)["lockOKMQSet"]
    } == {1}


async def _pull_all(client: RemotingClient, addr: str, topic: str, group: str) -> list[object]:
    ext = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "32",
        "sysFlag": "4",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext))
    if response.code != ResponseCode.SUCCESS:
        return []
    return list(decode_stored_messages(response.body))


async def test_broker_send_back_stores_retry_message_consumable_from_retry_topic(
    broker: ServerProcess, consumers: list[Consumer]
) -> None:
    consumer = Consumer("c-back")
    consumers.append(consumer)
    await consumer.heartbeat(broker.addr, "CG_BACK", "CliTopicBack")
    sent = await _send(consumer.client, broker.addr, "CliTopicBack", b"failing")
    offset = decode_offset_msg_id(sent.ext_fields["msgId"]).commit_log_offset
    back = RemotingCommand.request(
        RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "CG_BACK", "delayLevel": "0", "offset": str(offset)}
    )
    sent_back_ms = int(time.time() * 1000)
    assert (await consumer.client.invoke(broker.addr, back)).code == ResponseCode.SUCCESS
    # The retry waits in SCHEDULE_TOPIC_XXXX for delay level 3 (300 ms here), then moves to %RETRY%.
    retried_list: list[object] = []
    deadline = time.monotonic() + 10
    while not retried_list and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        retried_list = await _pull_all(consumer.client, broker.addr, "%RETRY%CG_BACK", "CG_BACK")
    (retried,) = retried_list
    assert retried.body == b"failing"  # type: ignore[attr-defined]
    assert retried.reconsume_times == 1  # type: ignore[attr-defined]
    assert retried.properties[MessageConst.RETRY_TOPIC] == "CliTopicBack"  # type: ignore[attr-defined]
    assert MessageConst.DELAY_TIME_LEVEL not in retried.properties  # type: ignore[attr-defined]
    assert retried.properties[MessageConst.ORIGIN_MESSAGE_ID] == sent.ext_fields["msgId"]  # type: ignore[attr-defined]
    assert retried.store_timestamp >= sent_back_ms + 300  # type: ignore[attr-defined]


async def test_broker_send_back_after_max_reconsume_goes_to_dlq(
    broker: ServerProcess, consumers: list[Consumer]
) -> None:
    consumer = Consumer("c-dlq")
    consumers.append(consumer)
    sent = await _send(consumer.client, broker.addr, "%RETRY%CG_DLQ", b"doomed", reconsume_times=16)
    assert sent.code == ResponseCode.SUCCESS
    configs = await consumer.client.invoke(
        broker.addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG)
    )
    assert "%DLQ%CG_DLQ" in orjson.loads(configs.body)["topicConfigTable"]
    max_offset = await consumer.client.invoke(
        broker.addr,
        RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "%DLQ%CG_DLQ", "queueId": "0"}),
    )
    assert max_offset.ext_fields["offset"] == "1"
    sent_plain = await _send(consumer.client, broker.addr, "CliTopicDlq", b"again")
    offset = decode_offset_msg_id(sent_plain.ext_fields["msgId"]).commit_log_offset
    back = RemotingCommand.request(
        RequestCode.CONSUMER_SEND_MSG_BACK,
        {"group": "CG_DLQ", "delayLevel": "0", "offset": str(offset), "maxReconsumeTimes": "0"},
    )
    assert (await consumer.client.invoke(broker.addr, back)).code == ResponseCode.SUCCESS
    max_offset = await consumer.client.invoke(
        broker.addr,
        RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "%DLQ%CG_DLQ", "queueId": "0"}),
    )
    assert max_offset.ext_fields["offset"] == "2"
