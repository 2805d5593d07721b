"""The staging client follows a broker group through a failover (controller mode, no Spark).

Method: a controller-mode group of two brokers, a topic of one queue. Through the master, batch
0 of a write is staged; the master is SIGKILLed. At once, while the controller has not yet
made the slave master, one ``StagingProducer`` commits batch 0 and stages batch 1 concurrently
(the name server may still name the dead master, or no master). Both must wait for the new
master and succeed there, within their budgets, rather than spin on the dead address. Batch 1
is then committed, and batch 0 replayed (staged again, committed) is reported committed. Checker: the new
master's queue holds each message of both batches exactly once, by body.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest

from orbitmq.client.staging import CommitResult, StagedChunk, StagingProducer
from orbitmq.model.message import Message
from tests.integration.client.test_producer import pull_all
from tests.support.failover_group import start_failover_group

pytestmark = pytest.mark.fault

TOPIC = "StagedClientFailover"
WRITE_ID = "write-client-failover"
PER_BATCH = 20
BUDGET_MS = 30_000


def _messages(batch: int) -> list[Message]:
    return [Message(TOPIC, f"b{batch}-m{index}".encode()) for index in range(PER_BATCH)]


def test_staging_producer_commits_and_stages_on_the_new_master_after_a_failover(tmp_path: Path) -> None:
    group = start_failover_group(tmp_path, brokers=2, topic=TOPIC, queues=1)
    try:
        master, epoch = group.master()
        group.wait_full_sync_state_set()

        async def scenario() -> tuple[CommitResult, list[StagedChunk], CommitResult, CommitResult, float]:
            async with StagingProducer("PG_STAGED_CLIENT_FAILOVER", group.namesrv_addr) as producer:
                first = await producer.stage(_messages(0), WRITE_ID, 0)
                master.kill()
                started = time.monotonic()
                committed, second = await asyncio.gather(
                    producer.commit(WRITE_ID, 0, first, timeout_ms=BUDGET_MS),
                    producer.stage(_messages(1), WRITE_ID, 1, timeout_ms=BUDGET_MS),
                )
                elapsed_s = time.monotonic() - started
                finished = await producer.commit(WRITE_ID, 1, second, timeout_ms=BUDGET_MS)
                # A replayed batch stages its rows again and commits the new chunks: refused.
                again = await producer.stage(_messages(0), WRITE_ID, 0, timeout_ms=BUDGET_MS)
                replayed = await producer.commit(WRITE_ID, 0, again, timeout_ms=BUDGET_MS)
            return committed, second, finished, replayed, elapsed_s

        committed, second, finished, replayed, elapsed_s = asyncio.run(scenario())
        assert not committed.already_committed
        assert not finished.already_committed
        assert replayed.already_committed
        assert elapsed_s < BUDGET_MS / 1000
        new_master, _ = group.master(not_epoch_below=epoch + 1)
        assert new_master is not master
        expected = Counter(message.body for batch in (0, 1) for message in _messages(batch))
        deadline = time.monotonic() + 10
        while True:  # the consume queue is built from the CommitLog asynchronously
            bodies = Counter(message.body for message in asyncio.run(pull_all(new_master.addr, TOPIC, 0)))
            if bodies.total() >= expected.total() or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert bodies == expected
    except BaseException:
        print(group.logs())
        raise
    finally:
        group.kill_all()
