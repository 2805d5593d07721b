"""Staged writes on a SYNC_MASTER: COMMIT_STAGED is acknowledged only once a slave holds it.

Method: a SYNC_MASTER with one slave (``slaveTimeout`` 1 s). A commit answered while the slave
runs leaves nothing unacknowledged (the master reports the slave's diff 0 at once). With the
slave paused (SIGSTOP) the commit is stored but answered FLUSH_SLAVE_TIMEOUT after the slave
timeout, as a send is; once the slave resumes, the same commit sent again succeeds, and every
staged message is stored exactly once.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from orbitmq.client.staging import StagingProducer
from orbitmq.errors import BrokerResponseError
from orbitmq.model.message import Message
from orbitmq.protocol.codes import ResponseCode
from tests.integration.client.test_producer import create_topic, pull_all
from tests.support.replica_group import fetch_ha_status, start_replica_group

pytestmark = pytest.mark.integration

TOPIC = "StagedOnSyncMaster"


def _messages(prefix: str, count: int) -> list[Message]:
    return [Message(TOPIC, f"{prefix}{index}".encode()) for index in range(count)]


async def test_sync_master_acknowledges_a_commit_once_its_slave_holds_it(tmp_path: Path) -> None:
    group = start_replica_group(tmp_path, "SYNC_MASTER", slaveTimeout=1000)
    try:
        slave = group.slaves[0]
        assert slave.proc is not None
        await create_topic(group.namesrv_addr, TOPIC, 1)
        async with StagingProducer("PG_STAGED_SYNC", group.namesrv_addr) as producer:
            first = await producer.commit(
                "write-sync", 0, await producer.stage(_messages("a", 20), "write-sync", 0)
            )
            assert not first.already_committed
            connections = (await fetch_ha_status(group.master.addr))["haConnectionInfo"]
            assert [connection["diff"] for connection in connections] == [0]

            chunks = await producer.stage(_messages("b", 20), "write-sync", 1)
            os.kill(slave.proc.pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                with pytest.raises(BrokerResponseError) as refused:
                    await producer.commit("write-sync", 1, chunks)
                waited_s = time.monotonic() - started
            finally:
                os.kill(slave.proc.pid, signal.SIGCONT)
            assert refused.value.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, refused.value
            assert "is stored but not acknowledged" in refused.value.remark
            assert 0.95 <= waited_s < 5.0

            again = await producer.commit("write-sync", 1, chunks)
            assert again.brokers == 1
        bodies = [message.body for message in await pull_all(group.master.addr, TOPIC, 0)]
        assert sorted(bodies) == sorted(f"{prefix}{index}".encode() for prefix in "ab" for index in range(20))
    finally:
        group.kill_all()
