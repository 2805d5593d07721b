"""Transactions against an in-process broker, with raw SEND_MESSAGE / END_TRANSACTION commands.

Method: a BrokerApp on 127.0.0.1 (port 0, tmp dir, short transactionTimeOut and check
interval). A RemotingClient plays the producer: it sends half messages, heartbeats its
producer group so the broker can check back, and answers CHECK_TRANSACTION_STATE through a
registered handler. Results are observed in the store (real topic, op topic).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import orjson
import pytest

from orbitmq.broker.app import BrokerApp
from orbitmq.broker.handlers.transaction import TransactionHandlers
from orbitmq.broker.validation import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from orbitmq.model.message import MessageConst, MessageExt, SysFlag
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
)
from orbitmq.protocol.message_codec import decode_stored_message, decode_stored_messages
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.protocol.properties import encode_properties
from orbitmq.store.message_store import GetStatus
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.server import RequestContext
from tests.unit.broker._apps import start_broker_app

GROUP = "PG_TX"
COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0


async def start_app(tmp_path: Path, **extra: str) -> BrokerApp:
    conf = {"transactionTimeOut": "100", "transactionCheckInterval": "150", "transactionCheckMax": "3"}
    return await start_broker_app(tmp_path, **{**conf, **extra})


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    """A broker whose check service stays away: a half message checked back is copied in the half
    topic, so on a slow machine the short timings would change what a test that is not about
    checks reads there."""
    app = await start_app(tmp_path, transactionCheckInterval="100000")
    try:
        yield app
    finally:
        await app.shutdown()


@pytest.fixture
async def checking_broker(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    """A broker that checks back a half message 100 ms old every 150 ms."""
    app = await start_app(tmp_path)
    try:
        yield app
    finally:
        await app.shutdown()


def half_command(topic: str, body: bytes, extra: dict[str, str] | None = None) -> RemotingCommand:
    properties = {"UNIQ_KEY": f"TX{time.time_ns()}", "TRAN_MSG": "true", "PGROUP": GROUP, **(extra or {})}
    header = SendMessageRequestHeader(
        producer_group=GROUP,
        topic=topic,
        queue_id=1,
        default_topic_queue_nums=4,
        born_timestamp=int(time.time() * 1000),
        properties=encode_properties(properties),
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext(), body)


async def send_half(client: RemotingClient, app: BrokerApp, topic: str, body: bytes) -> tuple[int, int]:
    """(half queue offset, half commit-log offset) from the send response."""
    response = await client.invoke(app.address, half_command(topic, body))
    assert response.code == ResponseCode.SUCCESS, response.remark
    offset = decode_offset_msg_id(response.ext_fields["msgId"]).commit_log_offset
    return int(response.ext_fields["queueOffset"]), offset


def end_command(
    queue_offset: int, commit_log_offset: int, decision: int, group: str = GROUP, msg_id: str = ""
) -> RemotingCommand:
    """END_TRANSACTION as a client sends it; ``msg_id`` (the UNIQ_KEY) is left out unless given."""
    header = EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=queue_offset,
        commit_log_offset=commit_log_offset,
        commit_or_rollback=decision,
        msg_id=msg_id,
    )
    return RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext())


def messages(app: BrokerApp, topic: str, queue_id: int = 0) -> list[MessageExt]:
    result = app.state.store.get_messages(topic, queue_id, 0, 256, 1 << 24)
    if result.status is not GetStatus.FOUND:
        return []
    return [decode_stored_message(buffer)[0] for buffer in result.buffers]


async def heartbeat_producer(client: RemotingClient, app: BrokerApp, client_id: str = "tx-client") -> None:
    body = {"clientID": client_id, "producerDataSet": [{"groupName": GROUP}], "consumerDataSet": []}
    response = await client.invoke(
        app.address, RemotingCommand.request(RequestCode.HEART_BEAT, {}, orjson.dumps(body))
    )
    assert response.code == ResponseCode.SUCCESS


async def test_transaction_half_is_hidden_until_commit(broker: BrokerApp, client: RemotingClient) -> None:
    queue_offset, offset = await send_half(client, broker, "TxCommit", b"payload")
    (half,) = messages(broker, TRANS_HALF_TOPIC)
    assert (half.commit_log_offset, half.queue_offset) == (offset, queue_offset)
    assert half.properties[MessageConst.REAL_TOPIC] == "TxCommit"
    assert half.sys_flag & SysFlag.TRANSACTION_MASK == 0
    assert messages(broker, "TxCommit", 1) == []
    response = await client.invoke(broker.address, end_command(queue_offset, offset, COMMIT))
    assert response.code == ResponseCode.SUCCESS, response.remark
    (real,) = messages(broker, "TxCommit", 1)
    assert real.body == b"payload"
    assert real.sys_flag & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_COMMIT_TYPE
    assert real.prepared_transaction_offset == offset
    for key in (MessageConst.REAL_TOPIC, MessageConst.REAL_QUEUE_ID):
        assert key not in real.properties
    assert real.uniq_key == half.uniq_key
    (op,) = messages(broker, TRANS_OP_HALF_TOPIC)
    assert (op.body, op.tags) == (str(queue_offset).encode(), "d")
    # A repeated decision settles nothing twice.
    again = await client.invoke(broker.address, end_command(queue_offset, offset, COMMIT))
    assert again.code == ResponseCode.SUCCESS
    assert len(messages(broker, "TxCommit", 1)) == 1


async def test_transaction_commit_keeps_tran_msg_and_transaction_id(
    broker: BrokerApp, client: RemotingClient
) -> None:
    # RocketMQ's broker keeps TRAN_MSG on the committed copy and stores the UNIQ_KEY as
    # __transactionId__ on the half message, which the commit carries over (oracle tier:
    # transaction_commit); the Java consumer reads the transaction id of a TRAN_MSG message.
    queue_offset, offset = await send_half(client, broker, "TxKeeps", b"kept")
    (half,) = messages(broker, TRANS_HALF_TOPIC)
    assert half.properties["__transactionId__"] == half.uniq_key
    response = await client.invoke(broker.address, end_command(queue_offset, offset, COMMIT))
    assert response.code == ResponseCode.SUCCESS, response.remark
    (real,) = messages(broker, "TxKeeps", 1)
    assert real.properties[MessageConst.TRANSACTION_PREPARED] == "true"
    assert real.properties["__transactionId__"] == half.uniq_key
    assert real.sys_flag & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_COMMIT_TYPE


async def test_transaction_rollback_delivers_nothing(broker: BrokerApp, client: RemotingClient) -> None:
    queue_offset, offset = await send_half(client, broker, "TxRollback", b"x")
    response = await client.invoke(broker.address, end_command(queue_offset, offset, ROLLBACK))
    assert response.code == ResponseCode.SUCCESS
    late_commit = await client.invoke(broker.address, end_command(queue_offset, offset, COMMIT))
    assert late_commit.code == ResponseCode.SUCCESS
    assert messages(broker, "TxRollback", 1) == []
    assert len(messages(broker, TRANS_OP_HALF_TOPIC)) == 1


async def test_transaction_end_verifies_group_and_offsets(broker: BrokerApp, client: RemotingClient) -> None:
    queue_offset, offset = await send_half(client, broker, "TxVerify", b"x")
    wrong_group = await client.invoke(
        broker.address, end_command(queue_offset, offset, COMMIT, group="OTHER")
    )
    assert wrong_group.code == ResponseCode.SYSTEM_ERROR
    assert "OTHER" in (wrong_group.remark or "")
    wrong_queue = await client.invoke(broker.address, end_command(queue_offset + 7, offset, COMMIT))
    assert wrong_queue.code == ResponseCode.SYSTEM_ERROR
    wrong_offset = await client.invoke(broker.address, end_command(queue_offset, offset + 1, COMMIT))
    assert wrong_offset.code == ResponseCode.SYSTEM_ERROR
    wrong_id = await client.invoke(broker.address, end_command(queue_offset, offset, COMMIT, msg_id="other"))
    assert wrong_id.code == ResponseCode.SYSTEM_ERROR
    assert "other" in (wrong_id.remark or "")
    assert messages(broker, "TxVerify", 1) == []
    (half,) = messages(broker, TRANS_HALF_TOPIC)
    right_id = await client.invoke(
        broker.address, end_command(queue_offset, offset, COMMIT, msg_id=half.uniq_key or "")
    )
    assert right_id.code == ResponseCode.SUCCESS, right_id.remark
    assert len(messages(broker, "TxVerify", 1)) == 1


async def test_transaction_unknown_decision_gets_no_answer(broker: BrokerApp) -> None:
    ctx = RequestContext(None, "127.0.0.1", 1, "127.0.0.1", 2)  # type: ignore[arg-type]
    answer = await TransactionHandlers(broker.state).end_transaction(ctx, end_command(0, 0, UNKNOWN))
    assert answer is None


async def test_transaction_cannot_be_delayed_or_batched(broker: BrokerApp, client: RemotingClient) -> None:
    delayed = await client.invoke(broker.address, half_command("TxDelayed", b"x", {"DELAY": "2"}))
    assert delayed.code == ResponseCode.MESSAGE_ILLEGAL
    assert "TxDelayed" in (delayed.remark or "")
    timed = await client.invoke(broker.address, half_command("TxTimed", b"x", {"TIMER_DELAY_MS": "500"}))
    assert timed.code == ResponseCode.MESSAGE_ILLEGAL
    header = SendMessageRequestHeader(producer_group=GROUP, topic="TxBatch", queue_id=0, batch=True)
    body = encode_batch([(0, b"a", {"TRAN_MSG": "true", "PGROUP": GROUP})])
    batch = await client.invoke(
        broker.address, RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header.to_ext(), body)
    )
    assert batch.code == ResponseCode.MESSAGE_ILLEGAL
    assert messages(broker, TRANS_HALF_TOPIC) == []


def checking_client(
    answer: Callable[[CheckTransactionStateRequestHeader, MessageExt], Awaitable[int | None]],
) -> tuple[RemotingClient, list[tuple[dict[str, str], MessageExt]]]:
    """A producer connection whose CHECK_TRANSACTION_STATE handler calls ``answer``."""
    seen: list[tuple[dict[str, str], MessageExt]] = []
    remoting = RemotingClient()

    async def on_check(addr: str, request: RemotingCommand) -> RemotingCommand | None:
        header = CheckTransactionStateRequestHeader.from_ext(request.ext_fields)
        (message,) = decode_stored_messages(request.body)
        seen.append((dict(request.ext_fields), message))
        decision = await answer(header, message)
        if decision is not None:
            end = end_command(
                header.tran_state_table_offset, header.commit_log_offset, decision, msg_id=header.msg_id or ""
            )
            end.ext_fields["fromTransactionCheck"] = "true"
            await remoting.invoke_oneway(addr, end)
        return None

    remoting.register(RequestCode.CHECK_TRANSACTION_STATE, on_check)
    return remoting, seen


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def test_transaction_check_back_commits(checking_broker: BrokerApp, client: RemotingClient) -> None:
    async def commit(header: CheckTransactionStateRequestHeader, message: MessageExt) -> int:
        return COMMIT

    producer, seen = checking_client(commit)
    try:
        await heartbeat_producer(producer, checking_broker)
        await send_half(client, checking_broker, "TxCheck", b"checked")  # no decision from the sender
        await wait_until(lambda: len(messages(checking_broker, "TxCheck", 1)) == 1)
        ext, body = seen[0]
        assert body.topic == "TxCheck" and body.queue_id == 1
        assert body.properties[MessageConst.PRODUCER_GROUP] == GROUP
        assert all(isinstance(value, str) for value in ext.values())
        assert ext["msgId"] == ext["transactionId"] == body.uniq_key
        await asyncio.sleep(0.5)
        assert len(messages(checking_broker, "TxCheck", 1)) == 1  # checked once, committed once
        assert len(seen) == 1
    finally:
        await producer.close()


async def test_transaction_check_limit_rolls_back(checking_broker: BrokerApp, client: RemotingClient) -> None:
    async def unknown(header: CheckTransactionStateRequestHeader, message: MessageExt) -> None:
        return None

    producer, seen = checking_client(unknown)
    try:
        await heartbeat_producer(producer, checking_broker)
        queue_offset, _ = await send_half(client, checking_broker, "TxLimit", b"x")
        service = checking_broker.state.transactions
        assert service is not None
        await wait_until(lambda: service.rolled_back_by_limit == 1)
        assert len(seen) == 3  # transactionCheckMax
        checks = [int(message.properties[MessageConst.TRANSACTION_CHECK_TIMES]) for _, message in seen]
        assert checks == [1, 2, 3]
        (op,) = messages(checking_broker, TRANS_OP_HALF_TOPIC)
        assert op.body == str(queue_offset).encode()
        await asyncio.sleep(0.5)
        assert len(seen) == 3
        assert messages(checking_broker, "TxLimit", 1) == []
    finally:
        await producer.close()


async def test_transaction_decisions_survive_restart(tmp_path: Path) -> None:
    app = await start_app(tmp_path, transactionCheckInterval="100000")
    client = RemotingClient()
    try:
        committed = await send_half(client, app, "TxRestart", b"done")
        pending = await send_half(client, app, "TxRestart", b"later")
        assert (
            await client.invoke(app.address, end_command(*committed, COMMIT))
        ).code == ResponseCode.SUCCESS
    finally:
        await app.shutdown()
    app = await start_app(tmp_path)
    try:
        assert app.state.transactions is not None
        assert committed[0] in app.state.transactions.decided
        again = await client.invoke(app.address, end_command(*committed, COMMIT))
        assert again.code == ResponseCode.SUCCESS
        late = await client.invoke(app.address, end_command(*pending, COMMIT))
        assert late.code == ResponseCode.SUCCESS
        assert [message.body for message in messages(app, "TxRestart", 1)] == [b"done", b"later"]
    finally:
        await client.close()
        await app.shutdown()
