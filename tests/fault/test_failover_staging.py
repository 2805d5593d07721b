"""Staged writes in controller mode: the exactly-once commit survives a failover.

Method: a controller-mode group of two brokers, a topic of one queue. Through the master, batch
0 of a write is staged and committed, and batch 1 only staged; the commit answers once the slave
holds every byte (``allAckInSyncStateSet``). The master is then paused (SIGSTOP) until the
controller makes the slave master. On the new master, batch 0 is committed again with the same
key and the same staged records (a replayed Spark batch): it must be reported committed and
write nothing. Batch 1 is committed there twice: once for real, then reported committed. The old
master is resumed: it follows the new one and must refuse staged writes (it is no master) rather
than answer from its old ledger. Checker: the queue holds each message of both batches exactly
once, by body.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from orbitmq.client.staging import CommitResult, StagedChunk, StagingProducer
from orbitmq.model.message import Message
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.staging import CommitBody, CommitStagedRequestHeader
from orbitmq.transport.connection import RemotingClient
from tests.integration.client.test_producer import pull_all
from tests.support.failover_group import broker_status, start_failover_group

pytestmark = pytest.mark.fault

TOPIC = "StagedFailover"
WRITE_ID = "write-failover"
PER_BATCH = 20


def _messages(batch: int) -> list[Message]:
    return [Message(TOPIC, f"b{batch}-m{index}".encode()) for index in range(PER_BATCH)]


async def _stage_both(namesrv: str) -> tuple[list[StagedChunk], list[StagedChunk], CommitResult]:
    async with StagingProducer("PG_STAGED_FAILOVER", namesrv) as producer:
        first = await producer.stage(_messages(0), WRITE_ID, 0)
        second = await producer.stage(_messages(1), WRITE_ID, 1)
        committed = await producer.commit(WRITE_ID, 0, first)
    return first, second, committed


async def _commit_on(addr: str, batch_id: int, chunks: Sequence[StagedChunk]) -> RemotingCommand:
    """One COMMIT_STAGED to ``addr``; its raw answer (``alreadyCommitted``, ``messages``)."""
    client = RemotingClient()
    try:
        header = CommitStagedRequestHeader(write_id=WRITE_ID, batch_id=batch_id).to_ext()
        body = CommitBody([chunk.commit_log_offset for chunk in chunks]).encode()
        request = RemotingCommand.request(RequestCode.COMMIT_STAGED, header, body)
        return await client.invoke(addr, request, 3000)
    finally:
        await client.close()


async def _commit_retrying(addr: str, batch_id: int, chunks: Sequence[StagedChunk]) -> dict[str, str]:
    """COMMIT_STAGED to a new master, sent again while it answers a retriable code."""
    deadline = time.monotonic() + 20
    while True:
        response = await _commit_on(addr, batch_id, chunks)
        if response.code == ResponseCode.SUCCESS:
            return response.ext_fields
        assert response.code in _RETRIABLE, (response.code, response.remark)
        assert time.monotonic() < deadline, (response.code, response.remark)
        await asyncio.sleep(0.1)


_RETRIABLE = (ResponseCode.SYSTEM_BUSY, ResponseCode.SERVICE_NOT_AVAILABLE)


def test_failover_staging_commit_is_exactly_once_on_the_promoted_master(tmp_path: Path) -> None:
    group = start_failover_group(tmp_path, brokers=2, topic=TOPIC, queues=1)
    try:
        master, epoch = group.master()
        group.wait_full_sync_state_set()
        first, second, committed = asyncio.run(_stage_both(group.namesrv_addr))
        assert not committed.already_committed
        assert master.proc is not None
        os.kill(master.proc.pid, signal.SIGSTOP)
        try:
            new_master, _ = group.master(not_epoch_below=epoch + 1)
            assert new_master is not master

            replayed = asyncio.run(_commit_retrying(new_master.addr, 0, first))
            assert replayed["alreadyCommitted"] == "true", f"batch 0 committed again: {replayed}"
            finished = asyncio.run(_commit_retrying(new_master.addr, 1, second))
            assert (finished["alreadyCommitted"], finished["messages"]) == ("false", str(PER_BATCH))
            again = asyncio.run(_commit_retrying(new_master.addr, 1, second))
            assert again["alreadyCommitted"] == "true"
        finally:
            os.kill(master.proc.pid, signal.SIGCONT)

        deadline = time.monotonic() + 20
        while (status := broker_status(master.addr)) is None or status["role"] != "SLAVE":
            assert time.monotonic() < deadline, f"the old master never followed: {status}"
            time.sleep(0.1)
        refused = asyncio.run(_commit_on(master.addr, 0, first))
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, (refused.code, refused.remark)

        # The promoted master serves what its SyncStateSet confirms: while the old master catches
        # up after rejoining, the newest commit may be held back for a moment (a read that ends
        # early), never lost. Every committed message must be readable, each once, within 20 s.
        expected = Counter(message.body for batch in (0, 1) for message in _messages(batch))
        deadline = time.monotonic() + 20
        while (
            bodies := Counter(m.body for m in asyncio.run(pull_all(new_master.addr, TOPIC, 0)))
        ) != expected:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert bodies == expected
    except BaseException:
        print(group.logs())
        raise
    finally:
        group.kill_all()
