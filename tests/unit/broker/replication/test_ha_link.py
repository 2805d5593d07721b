"""The HA link between two in-process brokers on 127.0.0.1, and against hand-written peers.

Method: a master BrokerApp and a slave BrokerApp (haMasterAddress set, no nameserver) in one
event loop, with tiny frames (haTransferBatchSize 1000, so frames split records) and short
keep-alive and reconnect intervals. Messages are put into the master's store and the slave's
log must become byte-identical. Hand-written peers on raw sockets play the parts a real
broker would not: a slave that never acknowledges, one that acknowledges what it was never
sent, and a master that sends garbage.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from orbitmq.broker.app import BrokerApp
from orbitmq.broker.replication import ReplicationService
from orbitmq.broker.replication.codec import (
    TransferDecoder,
    encode_offset_report,
    encode_transfer_header,
)
from orbitmq.store.message_store import MessageStore, PutMessageRequest, PutStatus
from orbitmq.transport.stream import ByteStream, StreamServer, open_stream
from tests.unit.broker._apps import start_broker_app

HA_CONF = {
    "haTransferBatchSize": "1000",
    "haSendHeartbeatInterval": "200",
    "haHousekeepingInterval": "3000",
    "haReconnectInterval": "100",
    "slaveTimeout": "400",
}

StartApp = Callable[..., Awaitable[BrokerApp]]


@pytest.fixture
async def start_app(tmp_path: Path) -> AsyncIterator[StartApp]:
    apps: list[BrokerApp] = []

    async def start(name: str, **conf: str) -> BrokerApp:
        app = await start_broker_app(tmp_path / name, **HA_CONF, **conf)
        apps.append(app)
        return app

    yield start
    for app in reversed(apps):
        await app.shutdown()


def _replication(app: BrokerApp) -> ReplicationService:
    replication = app.state.replication
    assert replication is not None
    return replication


def _put(store: MessageStore, count: int, size: int = 700) -> int:
    end = 0
    for index in range(count):
        result = store.put_message(
            PutMessageRequest("TopicHA", index % 2, os.urandom(size), properties={"KEYS": "k"})
        )
        assert result.status is PutStatus.PUT_OK
        end = result.commit_log_offsets[0] + result.wrote_bytes
    return end


async def _until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def _same_log(master: MessageStore, slave: MessageStore) -> bool:
    if slave.max_commit_log_offset != master.max_commit_log_offset:
        return False
    position = 0
    while position < master.max_commit_log_offset:
        chunk = master.read_commit_log(position, 1 << 20)
        if slave.read_commit_log(position, 1 << 20) != chunk:
            return False
        position += len(chunk)
    return True


async def test_ha_link_slave_copies_master_and_resumes_after_restart(start_app: StartApp) -> None:
    master = await start_app("master")
    address = _replication(master).ha_address
    _put(master.state.store, 300)  # over 200 KB: the 1 MiB segment rolls in frames of 1000 bytes
    slave = await start_app("slave", brokerRole="SLAVE", brokerId="1", haMasterAddress=address)
    await _until(lambda: _same_log(master.state.store, slave.state.store))
    assert slave.state.store.get_max_queue_offset("TopicHA", 1) == 150
    # The slave's acknowledgement of its last append reaches the master a moment later.
    await _until(lambda: _replication(master).runtime_info()["haConnectionInfo"][0]["diff"] == 0)
    assert _replication(master).runtime_info()["haConnectionInfo"][0]["inSync"]
    # A slave stopped while the master writes resumes at its own max offset.
    await slave.shutdown()
    stopped_at = slave.state.store.max_commit_log_offset
    _put(master.state.store, 1500)  # rolls the master's segment
    restarted = await start_app("slave", brokerRole="SLAVE", brokerId="1", haMasterAddress=address)
    await _until(lambda: _same_log(master.state.store, restarted.state.store))
    links = list(_replication(master).master.links)
    assert [link.request_offset for link in links] == [stopped_at]


class _FakeSlave:
    """A slave on a raw socket: reports what the test says, reads and discards frames."""

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self.decoder = TransferDecoder()
        self.received_end = 0
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while data := await self.stream.read(1 << 20):
            for frame in self.decoder.feed(data):
                self.received_end = max(self.received_end, frame.end_offset)

    def report(self, offset: int) -> None:
        self.stream.write(encode_offset_report(offset))

    async def close(self) -> None:
        self._reader.cancel()
        self.stream.close()


async def _fake_slave(master: BrokerApp, request_offset: int = 0) -> _FakeSlave:
    fake = _FakeSlave(await open_stream(_replication(master).ha_address, 2000))
    fake.report(request_offset)
    await _until(lambda: any(link.usable for link in _replication(master).master.links))
    return fake


async def test_ha_link_sync_master_sends_share_one_acknowledgement(start_app: StartApp) -> None:
    master = await start_app("master", brokerRole="SYNC_MASTER")
    replication = _replication(master)
    # No slave at all: SLAVE_NOT_AVAILABLE at once.
    assert await replication.wait_replicated(_put(master.state.store, 1)) is PutStatus.SLAVE_NOT_AVAILABLE
    fake = await _fake_slave(master)
    ends = [_put(master.state.store, 1) for _ in range(64)]
    waits = [asyncio.create_task(replication.wait_replicated(end)) for end in ends]
    await _until(lambda: fake.received_end >= ends[-1])
    assert not any(wait.done() for wait in waits)
    fake.report(ends[-1])  # one acknowledgement for all 64
    assert await asyncio.gather(*waits) == [PutStatus.PUT_OK] * 64
    await fake.close()


async def test_ha_link_sync_master_times_out_at_the_deadline(start_app: StartApp) -> None:
    master = await start_app("master", brokerRole="SYNC_MASTER")
    fake = await _fake_slave(master)
    end = _put(master.state.store, 3)
    started = time.monotonic()
    status = await _replication(master).wait_replicated(end)
    elapsed = time.monotonic() - started
    assert status is PutStatus.FLUSH_SLAVE_TIMEOUT
    assert 0.39 <= elapsed < 1.5  # slaveTimeout is 400 ms: not a wake-up count, a deadline
    await fake.close()


async def test_ha_link_never_believes_an_ack_above_what_was_sent(start_app: StartApp) -> None:
    master = await start_app("master", brokerRole="SYNC_MASTER")
    replication = _replication(master)
    fake = await _fake_slave(master, request_offset=0)
    end = _put(master.state.store, 2)
    wait = asyncio.create_task(replication.wait_replicated(end))
    fake.report(end + 10_000)  # above the master's max: a stray process faking acks
    await _until(lambda: not list(replication.master.links))
    assert replication.master.bogus_acks == 1
    assert await wait is PutStatus.FLUSH_SLAVE_TIMEOUT
    await fake.close()


async def test_ha_link_slave_survives_a_master_that_sends_garbage(start_app: StartApp) -> None:
    sessions: list[int] = []

    async def garbage_master(stream: ByteStream) -> None:
        sessions.append(len(sessions))
        await stream.read(8)
        kind = len(sessions) % 3
        if kind == 1:
            stream.write(os.urandom(64))  # no frame at all
        elif kind == 2:
            # A well-formed frame of bytes that are no record.
            stream.write(encode_transfer_header(0, 200) + os.urandom(200))
        else:
            stream.write(encode_transfer_header(5 << 20, 10)[:7])  # half a header, then silence
            await asyncio.sleep(0.5)
        await stream.drain()
        await asyncio.sleep(0.05)

    server = StreamServer("127.0.0.1", 0, garbage_master)
    await server.start()
    try:
        slave = await start_app(
            "slave", brokerRole="SLAVE", brokerId="1", haMasterAddress=f"127.0.0.1:{server.port}"
        )
        await _until(lambda: len(sessions) >= 6)
        store = slave.state.store
        assert store.max_commit_log_offset == 0  # nothing that is not a record was appended
        replication = _replication(slave)
        assert replication.slave is not None and replication.slave.sessions >= 6
    finally:
        await server.stop()


async def test_ha_port_busy_default_falls_back_to_a_free_port(start_app: StartApp) -> None:
    # listenPort + 1 taken by someone else: a broker without haListenPort still starts.
    for _ in range(20):
        occupied = socket.socket()
        occupied.bind(("127.0.0.1", 0))
        listen_port = occupied.getsockname()[1] - 1
        try:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", listen_port))
            break
        except OSError:
            occupied.close()
    try:
        app = await start_app("busy", listenPort=str(listen_port), bindAddress="127.0.0.1")
        ha_port = int(_replication(app).ha_address.rsplit(":", 1)[1])
        assert ha_port not in (0, listen_port + 1)
    finally:
        occupied.close()
