"""Broker administration over real processes: topic create/delete/list, permissions, reserved
names, auto-create off, registration with several name servers, persistence across a restart,
SYNC_FLUSH sends, and unregistering at shutdown.

Method: each test starts the processes it needs (127.0.0.1, free ports, tmp dirs) and kills
them in teardown; requests are raw commands through a RemotingClient.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import orjson
import pytest

from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.properties import encode_properties
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, start_broker, start_namesrv, write_conf

pytestmark = pytest.mark.integration


class Processes:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[ServerProcess] = []

    def namesrv(self, name: str = "namesrv", *extra: str) -> ServerProcess:
        proc = start_namesrv(self.tmp_path, name, *extra)
        self.started.append(proc)
        return proc

    def broker(self, namesrv_addr: str | None, **conf: object) -> ServerProcess:
        proc = start_broker(self.tmp_path, namesrv_addr, **conf)
        self.started.append(proc)
        return proc


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    processes = Processes(tmp_path)
    try:
        yield processes
    finally:
        for proc in reversed(processes.started):
            proc.kill()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    remoting = RemotingClient()
    try:
        yield remoting
    finally:
        await remoting.close()


def _send(topic: str, body: bytes = b"x") -> RemotingCommand:
    ext = {
        "producerGroup": "PG",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": str(int(time.time() * 1000)),
        "flag": "0",
        "properties": encode_properties({"UNIQ_KEY": f"U{time.time_ns()}", "WAIT": "true"}),
        "reconsumeTimes": "0",
        "unitMode": "0",
    }
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, ext, body)


def _create(topic: str, perm: int = 6, queues: int = 2) -> RemotingCommand:
    ext = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(queues),
        "writeQueueNums": str(queues),
        "perm": str(perm),
        "topicFilterType": "SINGLE_TAG",
    }
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)


def _pull(topic: str, group: str) -> RemotingCommand:
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
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)


async def _route(
    client: RemotingClient, namesrv: str, topic: str, want: int, timeout_s: float = 5.0
) -> RemotingCommand:
    deadline = time.monotonic() + timeout_s
    while True:
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        response = await client.invoke(namesrv, request)
        if response.code == want or time.monotonic() > deadline:
            return response
        await asyncio.sleep(0.1)


async def test_broker_topic_admin_create_list_delete(procs: Processes, client: RemotingClient) -> None:
    # The route goes with the broker's next registration: RocketMQ's deleteTopicWithBrokerRegistration
    # (without it, DELETE_TOPIC_IN_NAMESRV removes the route, as mqadmin deleteTopic sends it).
    conf = write_conf(procs.tmp_path / "namesrv.conf", {"deleteTopicWithBrokerRegistration": True})
    namesrv = procs.namesrv("namesrv", "-c", str(conf))
    broker = procs.broker(namesrv.addr)
    assert (await client.invoke(broker.addr, _create("AdminTopic", queues=3))).code == ResponseCode.SUCCESS
    configs = orjson.loads((await client.invoke(broker.addr, RemotingCommand.request(21))).body)
    assert configs["topicConfigTable"]["AdminTopic"]["writeQueueNums"] == 3
    route = await _route(client, namesrv.addr, "AdminTopic", ResponseCode.SUCCESS)
    assert route.code == ResponseCode.SUCCESS, "created topic was not registered promptly"
    delete = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "AdminTopic"})
    assert (await client.invoke(broker.addr, delete)).code == ResponseCode.SUCCESS
    configs = orjson.loads((await client.invoke(broker.addr, RemotingCommand.request(21))).body)
    assert "AdminTopic" not in configs["topicConfigTable"]
    gone = await _route(client, namesrv.addr, "AdminTopic", ResponseCode.TOPIC_NOT_EXIST)
    assert gone.code == ResponseCode.TOPIC_NOT_EXIST


async def test_broker_reserved_topic_names_refused_on_create(
    procs: Processes, client: RemotingClient
) -> None:
    broker = procs.broker(None)
    for topic in ("TBW102", "SCHEDULE_TOPIC_XXXX", "bad topic"):
        response = await client.invoke(broker.addr, _create(topic))
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert topic in (response.remark or "")


async def test_broker_topic_permissions_refuse_send_and_pull(
    procs: Processes, client: RemotingClient
) -> None:
    broker = procs.broker(None)
    await client.invoke(broker.addr, _create("ReadOnlyTopic", perm=4))
    await client.invoke(broker.addr, _create("WriteOnlyTopic", perm=2))
    assert (await client.invoke(broker.addr, _send("ReadOnlyTopic"))).code == ResponseCode.NO_PERMISSION
    assert (await client.invoke(broker.addr, _send("WriteOnlyTopic"))).code == ResponseCode.SUCCESS
    assert (
        await client.invoke(broker.addr, _pull("WriteOnlyTopic", "CG"))
    ).code == ResponseCode.NO_PERMISSION


async def test_broker_without_auto_create_answers_topic_not_exist(
    procs: Processes, client: RemotingClient
) -> None:
    broker = procs.broker(None, autoCreateTopicEnable=False)
    response = await client.invoke(broker.addr, _send("NeverCreated"))
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert "NeverCreated" in (response.remark or "")


async def test_broker_registers_with_every_namesrv_and_unregisters_at_shutdown(
    procs: Processes, client: RemotingClient
) -> None:
    first, second = procs.namesrv("ns1"), procs.namesrv("ns2")
    broker = procs.broker(f"{first.addr};{second.addr}")
    for namesrv in (first, second):
        route = await _route(client, namesrv.addr, "TBW102", ResponseCode.SUCCESS)
        assert route.code == ResponseCode.SUCCESS
        assert orjson.loads(route.body)["queueDatas"][0]["perm"] == 7
    assert broker.stop() == 0
    for namesrv in (first, second):
        gone = await _route(client, namesrv.addr, "TBW102", ResponseCode.TOPIC_NOT_EXIST)
        assert gone.code == ResponseCode.TOPIC_NOT_EXIST


async def test_broker_persists_offsets_and_topics_across_restart(
    procs: Processes, client: RemotingClient
) -> None:
    broker = procs.broker(None, listenPort=0)
    port = broker.port
    assert (await client.invoke(broker.addr, _send("PersistTopic", b"kept"))).code == ResponseCode.SUCCESS
    update = RemotingCommand.request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "CG_P", "topic": "PersistTopic", "queueId": "0", "commitOffset": "1"},
    )
    await client.invoke(broker.addr, update)
    assert broker.stop() == 0
    root = procs.tmp_path / "broker-a" / "store"
    offsets = json.loads((root / "config" / "consumerOffset.json").read_text())
    assert offsets["offsetTable"]["PersistTopic@CG_P"] == {"0": 1}
    assert not (root / "abort").exists()
    restarted = procs.broker(None, listenPort=port)
    fresh = RemotingClient()
    try:
        query = RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": "CG_P", "topic": "PersistTopic", "queueId": "0"},
        )
        assert (await fresh.invoke(restarted.addr, query)).ext_fields["offset"] == "1"
        pulled = await fresh.invoke(restarted.addr, _pull("PersistTopic", "CG_Q"))
        assert pulled.code == ResponseCode.SUCCESS
    finally:
        await fresh.close()


async def test_broker_sync_flush_send_succeeds(procs: Processes, client: RemotingClient) -> None:
    broker = procs.broker(None, flushDiskType="SYNC_FLUSH")
    started = time.monotonic()
    responses = await asyncio.gather(
        *(client.invoke(broker.addr, _send("SyncTopic", b"d")) for _ in range(20))
    )
    assert all(response.code == ResponseCode.SUCCESS for response in responses)
    assert time.monotonic() - started < 5
    offsets = sorted(int(response.ext_fields["queueOffset"]) for response in responses)
    assert offsets == list(range(20))
