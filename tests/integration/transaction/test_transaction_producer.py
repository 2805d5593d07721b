"""TransactionProducer against `orbitmq standalone`: commit, rollback, and check-back answers.

Method: one standalone process (name server + broker, free ports, tmp dir, killed in teardown)
with a short transactionTimeOut / transactionCheckInterval; results are read back with raw
pulls, so only the producer side of the client is under test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.client.transaction_producer import LocalTransactionState, TransactionProducer
from orbitmq.errors import MessageValidationError
from orbitmq.model.message import Message, MessageExt
from orbitmq.transport.connection import RemotingClient
from tests.integration.delay.raw_commands import pull_all
from tests.support.processes import ServerProcess, start_standalone, write_conf

pytestmark = pytest.mark.integration


@pytest.fixture
def standalone_tx(tmp_path: Path) -> Iterator[ServerProcess]:
    conf = write_conf(
        tmp_path / "tx.conf",
        {"transactionTimeOut": 200, "transactionCheckInterval": 200, "transactionCheckMax": 5},
    )
    proc = start_standalone(tmp_path, "-c", str(conf))
    try:
        yield proc
    finally:
        proc.kill()


async def delivered(broker_addr: str, topic: str) -> list[MessageExt]:
    client = RemotingClient()
    try:
        found: list[MessageExt] = []
        for queue_id in range(8):
            found += await pull_all(client, broker_addr, topic, queue_id)
        return found
    finally:
        await client.close()


async def test_transaction_producer_commit_rollback_and_check(standalone_tx: ServerProcess) -> None:
    broker_addr = f"127.0.0.1:{standalone_tx.extra_ports[0]}"
    decisions = {
        b"commit": LocalTransactionState.COMMIT,
        b"rollback": LocalTransactionState.ROLLBACK,
        b"unknown": LocalTransactionState.UNKNOWN,
    }
    checked: list[bytes] = []
    executed: list[object] = []

    def execute(message: Message, arg: object) -> LocalTransactionState:
        executed.append(arg)
        if message.body == b"raises":
            raise RuntimeError("local transaction failed")
        return decisions[message.body]

    async def check(message: MessageExt) -> LocalTransactionState:
        checked.append(message.body)
        return LocalTransactionState.COMMIT

    producer = TransactionProducer(
        "PG_TXP", standalone_tx.addr, execute_local_transaction=execute, check_local_transaction=check
    )
    await producer.start()
    try:
        results = {}
        for body in (b"commit", b"rollback", b"unknown", b"raises"):
            results[body] = await producer.send_message_in_transaction(Message("TxProducer", body), arg=body)
        assert results[b"commit"].local_transaction_state is LocalTransactionState.COMMIT
        assert results[b"raises"].local_transaction_state is LocalTransactionState.UNKNOWN
        assert executed == [b"commit", b"rollback", b"unknown", b"raises"]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            bodies = sorted(message.body for message in await delivered(broker_addr, "TxProducer"))
            if bodies == [b"commit", b"raises", b"unknown"]:
                break
            await asyncio.sleep(0.2)
        assert bodies == [b"commit", b"raises", b"unknown"]  # the two UNKNOWNs resolved by check-back
        assert sorted(checked) == [b"raises", b"unknown"]
        with pytest.raises(MessageValidationError):
            delayed = Message("TxProducer", b"late")
            delayed.delay_level = 2
            await producer.send_message_in_transaction(delayed)
        msg_ids = {message.uniq_key for message in await delivered(broker_addr, "TxProducer")}
        assert results[b"commit"].msg_id in msg_ids
    finally:
        await producer.shutdown()


def test_message_timer_setters_write_rocketmq_properties() -> None:
    message = Message("T", b"x")
    message.deliver_time_ms = 1_700_000_000_000
    message.delay_ms = 1500
    assert message.properties["TIMER_DELIVER_MS"] == "1700000000000"
    assert message.properties["TIMER_DELAY_MS"] == "1500"
    assert (message.deliver_time_ms, message.delay_ms) == (1_700_000_000_000, 1500)
    message.deliver_time_ms = None
    assert "TIMER_DELIVER_MS" not in message.properties
