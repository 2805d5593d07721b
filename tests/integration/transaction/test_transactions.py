"""Transactions against broker processes: check-back through a surviving producer, the check limit,
and decisions that survive a broker crash.

Method: broker subprocesses on 127.0.0.1 (free ports, tmp dirs, killed in teardown) with short
transactionTimeOut / transactionCheckInterval. Producers are raw RemotingClients (one of them
a separate process that is SIGKILLed before deciding); the checking producer answers
CHECK_TRANSACTION_STATE with END_TRANSACTION fromTransactionCheck=true, as RocketMQ clients do.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from orbitmq.model.message import MessageConst, MessageExt
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.transport.connection import RemotingClient
from tests.integration.delay.raw_commands import pull_all, pull_until, send_command
from tests.support.processes import ServerProcess, start_broker

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
GROUP = "PG_TXI"
COMMIT, UNKNOWN = 8, 0
TX_CONF = {"transactionTimeOut": 300, "transactionCheckInterval": 200, "flushConsumerOffsetInterval": 100}


@pytest.fixture
def processes() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    try:
        yield started
    finally:
        for proc in reversed(started):
            proc.kill()


class CheckingProducer:
    """A producer connection of GROUP that answers every check with ``decision``."""

    def __init__(self, decision: int) -> None:
        self.decision = decision
        self.checks: list[MessageExt] = []
        self.client = RemotingClient()
        self.client.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)

    async def join(self, addr: str) -> None:
        body = {
            "clientID": f"checker-{os.getpid()}",
            "producerDataSet": [{"groupName": GROUP}],
            "consumerDataSet": [],
        }
        response = await self.client.invoke(
            addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, orjson.dumps(body))
        )
        assert response.code == ResponseCode.SUCCESS

    async def _on_check(self, addr: str, request: RemotingCommand) -> RemotingCommand | None:
        header = CheckTransactionStateRequestHeader.from_ext(request.ext_fields)
        self.checks.extend(decode_stored_messages(request.body))
        end = EndTransactionRequestHeader(
            producer_group=GROUP,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=self.decision,
            msg_id=header.msg_id or "",
            from_transaction_check=True,
        )
        await self.client.invoke_oneway(
            addr, RemotingCommand.request(RequestCode.END_TRANSACTION, end.to_ext())
        )
        return None


async def wait_until(predicate: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_transaction_dead_producer_resolved_by_another_of_its_group(
    tmp_path: Path, processes: list[ServerProcess]
) -> None:
    broker = start_broker(tmp_path, None, **TX_CONF)
    processes.append(broker)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    dying = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.transaction.half_sender", broker.addr, GROUP, "TxDead"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert dying.stdout is not None
        line = dying.stdout.readline().decode()
        half = json.loads(line)
        assert "queue_offset" in half, line
    finally:
        dying.send_signal(signal.SIGKILL)
        dying.wait(10)
        if dying.stdout is not None:
            dying.stdout.close()
    survivor = CheckingProducer(COMMIT)
    reader = RemotingClient()
    try:
        await survivor.join(broker.addr)
        delivered = await pull_until(reader, broker.addr, "TxDead", 1, 10, queue_id=0)
        assert delivered[0].body == b"from the dying producer"
        assert survivor.checks[0].topic == "TxDead"
        assert survivor.checks[0].properties[MessageConst.PRODUCER_GROUP] == GROUP
        await asyncio.sleep(0.8)
        assert len(await pull_all(reader, broker.addr, "TxDead")) == 1  # committed once
    finally:
        await survivor.client.close()
        await reader.close()


async def test_transaction_default_check_max_rolls_back_after_15(
    tmp_path: Path, processes: list[ServerProcess]
) -> None:
    broker = start_broker(tmp_path, None, transactionTimeOut=0, transactionCheckInterval=100)
    processes.append(broker)
    producer = CheckingProducer(UNKNOWN)
    try:
        await producer.join(broker.addr)
        response = await producer.client.invoke(
            broker.addr, send_command("TxLimit15", b"x", {"TRAN_MSG": "true", "PGROUP": GROUP}, group=GROUP)
        )
        assert response.code == ResponseCode.SUCCESS
        await wait_until(lambda: "rolled back" in broker.log(), 15)
        assert len(producer.checks) == 15
        times = [int(message.properties[MessageConst.TRANSACTION_CHECK_TIMES]) for message in producer.checks]
        assert times == list(range(1, 16))
        uniq_key = producer.checks[0].uniq_key or ""
        warning = next(line for line in broker.log().splitlines() if "rolled back" in line)
        assert "TxLimit15" in warning and uniq_key in warning
        await asyncio.sleep(0.5)
        assert len(producer.checks) == 15
        assert await pull_all(producer.client, broker.addr, "TxLimit15") == []
    finally:
        await producer.client.close()


async def test_transaction_decisions_survive_broker_crash(
    tmp_path: Path, processes: list[ServerProcess]
) -> None:
    conf = {**TX_CONF, "transactionCheckInterval": 100_000}
    broker = start_broker(tmp_path, None, **conf)
    processes.append(broker)
    client = RemotingClient()
    try:
        halves = []
        for body in (b"decided", b"pending"):
            response = await client.invoke(
                broker.addr, send_command("TxCrash", body, {"TRAN_MSG": "true", "PGROUP": GROUP}, group=GROUP)
            )
            assert response.code == ResponseCode.SUCCESS
            offset = decode_offset_msg_id(response.ext_fields["msgId"]).commit_log_offset
            halves.append((int(response.ext_fields["queueOffset"]), offset))

        def end(half: tuple[int, int]) -> RemotingCommand:
            header = EndTransactionRequestHeader(
                producer_group=GROUP,
                tran_state_table_offset=half[0],
                commit_log_offset=half[1],
                commit_or_rollback=COMMIT,
            )
            return RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext())

        assert (await client.invoke(broker.addr, end(halves[0]))).code == ResponseCode.SUCCESS
        await asyncio.sleep(0.3)  # let the topic table reach the disk
        await client.close()
        broker.kill()
        client = RemotingClient()
        broker = start_broker(tmp_path, None, **TX_CONF)
        processes.append(broker)
        # The same decision again must not deliver twice; the pending one is resolved by a check.
        assert (await client.invoke(broker.addr, end(halves[0]))).code == ResponseCode.SUCCESS
        checker = CheckingProducer(COMMIT)
        try:
            await checker.join(broker.addr)
            delivered = await pull_until(client, broker.addr, "TxCrash", 2, 10)
            await asyncio.sleep(0.6)
            delivered = await pull_all(client, broker.addr, "TxCrash")
            assert sorted(message.body for message in delivered) == [b"decided", b"pending"]
        finally:
            await checker.client.close()
    finally:
        await client.close()
