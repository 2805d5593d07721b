"""Offset stores: the pure table, the broadcasting JSON file, and the remote store's requests."""

from __future__ import annotations

import json
from pathlib import Path

from orbitmq.client.offset_store import LocalFileOffsetStore, OffsetTable, RemoteOffsetStore
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand

MQ = MessageQueue("T", "broker-a", 1)
MQ2 = MessageQueue("T2", "broker-b", 0)


def test_offset_table_increase_only_keeps_the_higher_value() -> None:
    table = OffsetTable()
    table.update(MQ, 10)
    table.update(MQ, 5, increase_only=True)
    assert table.get(MQ) == 10
    table.update(MQ, 5)
    assert table.get(MQ) == 5
    table.update(MQ, -1)
    assert table.get(MQ) == 5
    assert table.snapshot([MQ, MQ2]) == {MQ: 5}
    table.remove(MQ)
    assert table.get(MQ) is None


async def test_offset_store_local_file_round_trips_atomically(tmp_path: Path) -> None:
    store = LocalFileOffsetStore(tmp_path, "10.0.0.1@7", "g")
    assert await store.load(MQ) is None
    store.table.update(MQ, 12)
    store.table.update(MQ2, 3)
    await store.persist([MQ, MQ2])
    store.table.update(MQ, 20)
    await store.persist([MQ])
    document = json.loads(store.path.read_text())
    assert document == {"offsetTable": {"T@broker-a@1": 20, "T2@broker-b@0": 3}}
    assert not store.path.with_suffix(".json.tmp").exists()
    reopened = LocalFileOffsetStore(tmp_path, "10.0.0.1@7", "g")
    assert await reopened.load(MQ) == 20
    assert await reopened.load(MQ2) == 3


async def test_offset_store_local_file_falls_back_to_backup(tmp_path: Path) -> None:
    store = LocalFileOffsetStore(tmp_path, "c", "g")
    store.table.update(MQ, 1)
    await store.persist([MQ])
    store.table.update(MQ, 2)
    await store.persist([MQ])
    store.path.write_text("{torn")
    assert await LocalFileOffsetStore(tmp_path, "c", "g").load(MQ) == 1


class FakeBroker:
    def __init__(self, answer: RemotingCommand) -> None:
        self.answer = answer
        self.requests: list[tuple[str, RemotingCommand]] = []
        self.refreshed: list[str] = []

    async def invoke_broker(
        self, broker_name: str, request: RemotingCommand, timeout_ms: int | None = None, broker_id: int = 0
    ) -> RemotingCommand:
        self.requests.append((broker_name, request))
        return self.answer

    def find_broker_addr(
        self, broker_name: str, broker_id: int = 0, *, only_this: bool = False
    ) -> str | None:
        return "127.0.0.1:1"

    def refresh_route_soon(self, topic: str) -> None:
        self.refreshed.append(topic)


async def test_offset_store_remote_query_not_found_is_none() -> None:
    broker = FakeBroker(RemotingCommand.request(0).response(ResponseCode.QUERY_NOT_FOUND, "none"))
    store = RemoteOffsetStore(broker, "g")
    assert await store.load(MQ) is None
    name, request = broker.requests[0]
    assert name == "broker-a" and request.code == RequestCode.QUERY_CONSUMER_OFFSET
    assert request.ext_fields["queueId"] == "1"


async def test_offset_store_remote_persist_sends_updates() -> None:
    broker = FakeBroker(RemotingCommand.request(0).response(ResponseCode.SUCCESS, None, {"offset": "7"}))
    store = RemoteOffsetStore(broker, "g")
    assert await store.load(MQ) == 7
    store.table.update(MQ, 9)
    await store.persist([MQ, MQ2])
    updates = [r for _, r in broker.requests if r.code == RequestCode.UPDATE_CONSUMER_OFFSET]
    assert len(updates) == 1 and updates[0].ext_fields["commitOffset"] == "9"


async def test_offset_store_remote_commit_refused_as_not_available_refreshes_the_route() -> None:
    broker = FakeBroker(RemotingCommand.request(0).response(ResponseCode.SERVICE_NOT_AVAILABLE, "slave"))
    store = RemoteOffsetStore(broker, "g")
    assert await store.commit(MQ, 5) is False
    assert broker.refreshed == [MQ.topic]
