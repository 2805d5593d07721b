"""A replicated broker group seen from outside: routes, cluster list, refusals, metadata copy, reads.

Method: a nameserver, a SYNC_MASTER ``broker-a`` and slaves as processes (tests/support/
replica_group.py), driven through OrbitMQ's client, the ``orbitmq admin`` CLI, raw remoting
commands and the real C++ producer. Slave 1 copies metadata only on change (its periodic copy
is 60 s away); slave 2 copies every second.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import orjson
import pytest

from orbitmq.cli.admin import main as admin_main
from orbitmq.client import (
    ConsumeResult,
    LocalTransactionState,
    Message,
    Producer,
    PushConsumer,
    SendStatus,
    TransactionProducer,
)
from orbitmq.model.message import MessageExt
from orbitmq.protocol.bodies import decode_topic_config_wrapper, decode_topic_route
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SendMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from orbitmq.protocol.timer_checkpoint import decode_timer_checkpoint
from orbitmq.transport.connection import RemotingClient
from tests.integration.client.test_producer import create_topic
from tests.integration.conftest import CppClient
from tests.support.replica_group import fetch_ha_status, start_replica_group

TOPIC = "HaBasicsTopic"


async def _invoke(addr: str, code: RequestCode, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(addr, RemotingCommand.request(code, ext, body), 5000)
    finally:
        await client.close()


async def _until(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        outcome = predicate()  # type: ignore[operator]
        if asyncio.iscoroutine(outcome):
            outcome = await outcome
        if outcome:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s: {what}")
        await asyncio.sleep(0.1)


async def test_replica_group_routes_refusals_and_cluster_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = start_replica_group(tmp_path, "SYNC_MASTER", slaveTimeout=1000)
    try:
        master, slave = group.master, group.slaves[0]
        await create_topic(group.namesrv_addr, TOPIC, 2)
        # The route lists every member of the group.
        route = await _invoke(group.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
        brokers = decode_topic_route(route.body).broker_datas
        assert [broker.broker_addrs for broker in brokers] == [{0: master.addr, 1: slave.addr}]
        async with Producer("PG_HA_BASICS", group.namesrv_addr) as producer:
            results = await asyncio.gather(*(producer.send(Message(TOPIC, b"m%d" % i)) for i in range(20)))
        assert {result.status for result in results} == {SendStatus.OK}

        # The slave refuses sends with RocketMQ's code (14) and transactions with 11.
        header = SendMessageRequestHeader(producer_group="PG_RAW", topic=TOPIC, queue_id=0, properties="")
        refused = await _invoke(slave.addr, RequestCode.SEND_MESSAGE, header.to_ext(), b"to the slave")
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE and "slave" in (refused.remark or "")

        # cluster list: roles, the slave in sync with no lag.
        await _until(lambda: _slave_caught_up(master.addr), 10, "the slave to catch up")
        assert await asyncio.to_thread(admin_main, ["-n", group.namesrv_addr, "cluster", "list"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split() == [
            "cluster", "broker", "id", "address", "role", "max_offset", "lag_bytes", "lag_ms", "in_sync", "ha_link"
        ]  # fmt: skip
        master_row, slave_row = (line.split() for line in lines[1:])
        assert master_row[2:5] == ["0", master.addr, "SYNC_MASTER"]
        assert slave_row[2:5] == ["1", slave.addr, "SLAVE"] and slave_row[5] == master_row[5]
        assert slave_row[6:] == ["0", "0", "yes", "STREAMING"]
    finally:
        group.kill_all()


async def _slave_caught_up(master_addr: str) -> bool:
    status = await fetch_ha_status(master_addr)
    connections = status["haConnectionInfo"]
    return bool(connections) and all(c["diff"] == 0 and c["inSync"] for c in connections)


async def test_sync_master_without_its_slave_answers_11_and_12_and_the_cpp_client_resends(
    tmp_path: Path,
) -> None:
    group = start_replica_group(tmp_path, "SYNC_MASTER", slaveTimeout=1000)
    cpp = CppClient(tmp_path / "cpp-home")
    try:
        master, slave = group.master, group.slaves[0]
        await create_topic(group.namesrv_addr, TOPIC, 1)
        async with Producer("PG_HA_CODES", group.namesrv_addr, send_msg_timeout_ms=5000) as producer:
            assert (await producer.send(Message(TOPIC, b"ok"))).status is SendStatus.OK
            # A paused slave: the send waits slaveTimeout, then FLUSH_SLAVE_TIMEOUT (stored).
            assert slave.proc is not None
            os.kill(slave.proc.pid, signal.SIGSTOP)
            started = time.monotonic()
            paused = await producer.send(Message(TOPIC, b"paused"))
            waited_s = time.monotonic() - started
            os.kill(slave.proc.pid, signal.SIGCONT)
            assert paused.status is SendStatus.FLUSH_SLAVE_TIMEOUT and 0.95 <= waited_s < 3.0
            # No slave at all: SLAVE_NOT_AVAILABLE at once (stored too).
            slave.kill()
            await _until(lambda: _no_links(master.addr), 10, "the master to see its slave gone")
            started = time.monotonic()
            gone = await producer.send(Message(TOPIC, b"gone"))
            assert gone.status is SendStatus.SLAVE_NOT_AVAILABLE and time.monotonic() - started < 0.5
        # The C++ client treats 11 as a failure and sends again: every try is stored (§1.7).
        sent = await asyncio.to_thread(_cpp_send_one, cpp, group.namesrv_addr)
        stored = await _pull_bodies(master.addr, TOPIC)
        assert stored.count(b"paused") == 1 and stored.count(b"gone") == 1
        copies = sum(1 for body in stored if body.startswith(b"\x01"))  # the C++ driver's body for seq 0
        print(
            f"C++ producer against a SYNC_MASTER without slave: {sent} after {cpp.client_retries + 1} "
            f"send_sync calls; {copies} stored copies"
        )
        assert copies >= 2
    finally:
        cpp.kill_all()
        group.kill_all()


def _cpp_send_one(cpp: CppClient, namesrv: str) -> str:
    try:
        events = cpp.produce(namesrv, TOPIC, "--count", "1", "--size", "16", "--timeout-ms", "3000")
    except AssertionError as exc:
        return f"raised ({str(exc).splitlines()[-1][:120]})"
    return f"returned {events[0]['status']}"


async def _no_links(master_addr: str) -> bool:
    return not (await fetch_ha_status(master_addr))["haConnectionInfo"]


async def _pull_bodies(addr: str, topic: str) -> list[bytes]:
    from tests.integration.client.test_producer import pull_all

    return [message.body for message in await pull_all(addr, topic, 0)]


async def test_slave_copies_metadata_on_change_and_every_interval(tmp_path: Path) -> None:
    group = start_replica_group(
        tmp_path,
        "ASYNC_MASTER",
        slaveSyncInterval=60_000,
        transactionCheckInterval=300,
        transactionTimeOut=0,
        messageDelayLevel="1s 2s",
    )
    try:
        master, on_change = group.master, group.slaves[0]
        periodic = group.add_slave(2, slaveSyncInterval=1000)
        # On change: a send creates a topic on the master; the slave copies the table when the
        # first record of that topic arrives, not 60 s later.
        async with Producer("PG_HA_META", group.namesrv_addr) as producer:
            await producer.send(Message("HaAutoCreated", b"new topic"))
            later = Message(TOPIC + "Delayed", b"in a second")
            later.delay_level = 1
            await producer.send(later)
            timed = Message(TOPIC + "Timed", b"timed")
            timed.deliver_time_ms = int(time.time() * 1000) + 500
            await producer.send(timed)
        await _until(lambda: _has_topic(on_change.addr, "HaAutoCreated"), 5, "the topic copied on change")

        # Every interval: offsets, groups, delay and timer progress, transaction progress.
        # An offset is stored only for a queue the broker hosts (TOPIC_NOT_EXIST otherwise).
        await create_topic(group.namesrv_addr, TOPIC, 1)
        committed = await _invoke(master.addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                                  UpdateConsumerOffsetRequestHeader("CG_HA_META", TOPIC, 0, 42).to_ext())  # fmt: skip
        assert committed.code == ResponseCode.SUCCESS, committed.remark
        async with TransactionProducer(
            "PG_HA_TX", group.namesrv_addr, execute_local_transaction=_commit, check_local_transaction=_check
        ) as tx_producer:
            await tx_producer.send_message_in_transaction(Message(TOPIC + "Tx", b"paid"))
        consumed: list[MessageExt] = []
        consumer = PushConsumer("CG_HA_META_GROUP", group.namesrv_addr, _collect(consumed))
        consumer.subscribe("HaAutoCreated", "*")
        await consumer.start()
        try:
            await _until(lambda: _offset_is(periodic.addr, "CG_HA_META", 42), 10, "offsets")
            await _until(lambda: _has_group(periodic.addr, "CG_HA_META_GROUP"), 10, "subscription groups")
            await _until(lambda: _file_json(periodic, "delayOffset.json").get("offsetTable", {}).get("1") == 1, 10,
                         "delay offsets")  # fmt: skip
            await _until(lambda: _file_json(periodic, "timerProgress.json").get("enqueueQueueOffset") == 1, 10,
                         "timer progress")  # fmt: skip
            await _until(lambda: _file_json(periodic, "transactionCheckOffset.json").get("halfQueueOffset") == 1, 10,
                         "transaction progress")  # fmt: skip
        finally:
            await consumer.shutdown()
        # RocketMQ's binary TimerCheckpoint, which Java slaves read too.
        timer_body = (await _invoke(master.addr, RequestCode.GET_TIMER_CHECK_POINT, {})).body
        master_timer = decode_timer_checkpoint(bytes(timer_body))
        assert master_timer.last_timer_queue_offset == master_timer.master_timer_queue_offset == 1
    finally:
        group.kill_all()


async def _commit(message: Message, arg: object) -> LocalTransactionState:
    return LocalTransactionState.COMMIT


async def _check(message: MessageExt) -> LocalTransactionState:
    return LocalTransactionState.COMMIT


def _collect(into: list[MessageExt]):  # type: ignore[no-untyped-def]
    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        into.extend(messages)
        return ConsumeResult.CONSUME_SUCCESS

    return listener


async def _has_topic(addr: str, topic: str) -> bool:
    response = await _invoke(addr, RequestCode.GET_ALL_TOPIC_CONFIG, {})
    return topic in decode_topic_config_wrapper(response.body).topic_config_table


async def _has_group(addr: str, group: str) -> bool:
    response = await _invoke(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
    return group in orjson.loads(response.body)["subscriptionGroupTable"]


async def _offset_is(addr: str, group: str, expected: int) -> bool:
    return await _offset(addr, group) == expected


async def _offset(addr: str, group: str) -> int | None:
    header = QueryConsumerOffsetRequestHeader(group, TOPIC, 0, set_zero_if_not_found=False)
    response = await _invoke(addr, RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())
    if response.code != ResponseCode.SUCCESS:
        return None
    return QueryConsumerOffsetResponseHeader.from_ext(response.ext_fields).queue_offset


def _file_json(proc: object, name: str) -> dict[str, object]:
    path = Path(proc.workdir) / "store" / "config" / name  # type: ignore[attr-defined]
    try:
        document: dict[str, object] = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return document


async def test_consumer_follows_the_masters_suggestion_to_read_from_the_slave(tmp_path: Path) -> None:
    # accessMessageInMemoryMaxRatio=0: any read behind the log's end is "slow": go to the slave.
    group = start_replica_group(
        tmp_path, "SYNC_MASTER", slaveReadEnable=True, accessMessageInMemoryMaxRatio=0
    )
    try:
        master = group.master
        await create_topic(group.namesrv_addr, TOPIC, 1)
        async with Producer("PG_HA_SUGGEST", group.namesrv_addr) as producer:
            for start in range(0, 400, 50):
                await asyncio.gather(
                    *(producer.send(Message(TOPIC, b"%d" % i)) for i in range(start, start + 50))
                )
        header = PullMessageRequestHeader(consumer_group="CG_HA_SUGGEST", topic=TOPIC, queue_id=0, queue_offset=0,
                                          max_msg_nums=8, sys_flag=0x4, subscription="*", expression_type="TAG")  # fmt: skip
        answer = await _invoke(master.addr, RequestCode.PULL_MESSAGE, header.to_ext())
        assert answer.code == ResponseCode.SUCCESS and answer.ext_fields["suggestWhichBrokerId"] == "1"

        received: list[MessageExt] = []
        consumer = PushConsumer("CG_HA_SUGGEST", group.namesrv_addr, _collect(received), pull_batch_size=8,
                                pull_threshold_for_queue=16)  # fmt: skip
        consumer.subscribe(TOPIC, "*")
        await consumer.start()
        try:
            await _until(lambda: len(received) >= 16, 15, "the first messages")
            # Paused master, still in the route: only a consumer that moved to the slave goes on.
            assert master.proc is not None
            os.kill(master.proc.pid, signal.SIGSTOP)
            try:
                await _until(
                    lambda: len({m.queue_offset for m in received}) == 400, 15, "every message from the slave"
                )
            finally:
                os.kill(master.proc.pid, signal.SIGCONT)
        finally:
            await consumer.shutdown()
    finally:
        group.kill_all()
