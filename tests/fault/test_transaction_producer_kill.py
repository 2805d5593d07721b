"""A transaction producer is SIGKILLed before deciding; a replacement that has only started
settles every one of its transactions, on every broker of the cluster.

Goal: a broker asks only producers of the group it has heard from to check a transaction, so
a replacement producer must be heard by every broker at start, before it sends anything (as
RocketMQ's producer heartbeats to every broker it learns from the TBW102 route). Method: a
name server and two brokers (short transaction timeout and check interval, enough checks not
to roll back during the test); a child process sends eight transactional messages with
OrbitMQ's TransactionProducer, leaves them UNKNOWN and is SIGKILLed; a TransactionProducer of
the same group is started in this process and sends nothing. Every message must be checked
through it and, committed by its answer, be readable from its topic on both brokers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orbitmq.client import AdminClient, LocalTransactionState, MessageExt, TransactionProducer
from tests.integration.client.test_producer import create_topic
from tests.support.processes import ServerProcess, start_broker, start_namesrv

pytestmark = pytest.mark.fault

REPO_ROOT = Path(__file__).resolve().parents[2]
GROUP = "PG_TX_TAKEOVER"
TOPIC = "TxTakeover"
COUNT = 8
TX_CONF = {"transactionTimeOut": 300, "transactionCheckInterval": 200, "transactionCheckMax": 100}


def _run_dying_producer(namesrv_addr: str) -> list[list[str]]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.fault.tx_producer_child", namesrv_addr, GROUP, TOPIC, str(COUNT)],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        line = child.stdout.readline().decode()
        return list(json.loads(line)["sent"])
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        if child.stdout is not None:
            child.stdout.close()


async def test_transaction_producer_started_after_a_kill_is_asked_by_every_broker(tmp_path: Path) -> None:
    started: list[ServerProcess] = []
    try:
        namesrv = start_namesrv(tmp_path)
        started.append(namesrv)
        for name in ("broker-a", "broker-b"):
            started.append(start_broker(tmp_path, namesrv.addr, name=name, **TX_CONF))
        await create_topic(namesrv.addr, TOPIC, 4, broker_count=2)
        sent = _run_dying_producer(namesrv.addr)
        assert {broker for _, broker in sent} == {"broker-a", "broker-b"}, sent

        checked: dict[str, MessageExt] = {}

        async def commit(message: MessageExt) -> LocalTransactionState:
            checked[message.msg_id] = message
            return LocalTransactionState.COMMIT

        async def never_called(*_: object) -> LocalTransactionState:
            raise AssertionError("the replacement sends nothing")

        async with (
            TransactionProducer(
                GROUP, namesrv.addr, execute_local_transaction=never_called, check_local_transaction=commit
            ),
            AdminClient(namesrv.addr) as admin,
        ):
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and len(checked) < COUNT:
                await asyncio.sleep(0.1)
            assert sorted(checked) == sorted(msg_id for msg_id, _ in sent)
            # Committed by the checks: every message is in its topic, once.
            written = 0
            while time.monotonic() < deadline + 5 and written < COUNT:
                await asyncio.sleep(0.1)
                status = await admin.topic_status(TOPIC)
                written = sum(item.max_offset for item in status.values())
            assert written == COUNT
    finally:
        for proc in reversed(started):
            proc.kill()
