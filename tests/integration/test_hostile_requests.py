"""No request can lose, corrupt or wedge: one test per class of defect a hostile request used to hit.

Method: `orbitmq standalone` (name server + broker in one process, 127.0.0.1, free ports, a
temporary directory); each test sends the hand-made frames of one defect class on raw
connections or through RemotingClient, then checks what must hold: the broker answers with
RocketMQ's code and a short remark naming the field, every earlier and later message reads
back (after a restart where the defect used to show only then), nothing is written outside
the store, and the log stays free of tracebacks and small.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import orjson
import pytest

from orbitmq.client import PullConsumer
from orbitmq.client.push_consumer import ConsumeResult, PushConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import MessageExt, MessageQueue, SysFlag
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    EndTransactionRequestHeader,
    GetMaxOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from orbitmq.protocol.message_codec import (
    decode_stored_messages,
    encode_stored_message,
)
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.transport.connection import RemotingClient
from tests.integration.test_broker_messaging import pull_request, send_request
from tests.support.processes import ServerProcess, start_standalone


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One standalone for the tests that do not restart it (each uses its own topics)."""
    proc = start_standalone(tmp_path_factory.mktemp("hostile"))
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    remoting = RemotingClient()
    try:
        yield remoting
    finally:
        await remoting.close()


def _addr(standalone: ServerProcess) -> str:
    return f"127.0.0.1:{standalone.extra_ports[0]}"


def _data(standalone: ServerProcess) -> Path:
    return standalone.workdir / "data"


async def _send(client: RemotingClient, addr: str, topic: str, body: bytes, **extra: str) -> RemotingCommand:
    return await client.invoke(addr, send_request(topic, body, extra=extra or None), timeout_ms=10_000)


async def _bodies(client: RemotingClient, addr: str, topic: str, queue_id: int = 0) -> list[bytes]:
    bodies: list[bytes] = []
    queue_offset = 0
    while True:
        request = pull_request(topic, "CG_HOSTILE", queue_offset, queue_id=queue_id)
        response = await client.invoke(addr, request, timeout_ms=10_000)
        if response.code != ResponseCode.SUCCESS:
            return bodies
        bodies += [message.body for message in decode_stored_messages(response.body)]
        queue_offset = int(response.ext_fields["nextBeginOffset"])


async def _create(client: RemotingClient, addr: str, topic: str, queues: int = 1) -> None:
    header = CreateTopicRequestHeader(topic=topic, read_queue_nums=queues, write_queue_nums=queues)
    response = await client.invoke(
        addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
    )
    assert response.code == ResponseCode.SUCCESS, response.remark


def _restart(standalone: ServerProcess) -> None:
    assert standalone.stop() == 0, standalone.log()
    standalone.start()


def _raw_frame(header: dict[str, object], body: bytes = b"") -> bytes:
    encoded = orjson.dumps(header)
    return struct.pack(">ii", 4 + len(encoded) + len(body), len(encoded)) + encoded + body


def _answer_or_close(port: int, payload: bytes, timeout_s: float = 5.0) -> bytes | None:
    """What the server sent before closing; None when it neither answered nor closed in time."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(payload)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
                if len(b"".join(chunks)) >= 4:
                    (length,) = struct.unpack_from(">i", b"".join(chunks))
                    if len(b"".join(chunks)) >= 4 + length:
                        return b"".join(chunks)
        except TimeoutError:
            return None
        except ConnectionResetError:
            pass
        return b"".join(chunks)


# -- the stored record ---------------------------------------------------------------------------


async def test_broker_stores_ipv6_flagged_send_as_a_record_recovery_keeps(
    standalone: ServerProcess, client: RemotingClient
) -> None:
    """sysFlag claims IPv6 hosts on an IPv4 connection: the record must still be one recovery keeps."""
    addr = _addr(standalone)
    first = {}
    for sys_flag in (SysFlag.BORNHOST_V6, SysFlag.STOREHOST_V6, SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6):
        topic = f"HostileRecord{sys_flag}"
        flagged = await _send(client, addr, topic, b"claims IPv6 hosts", sysFlag=str(sys_flag))
        assert flagged.code in (ResponseCode.SUCCESS, ResponseCode.MESSAGE_ILLEGAL), flagged.remark
        first[topic] = await _bodies(client, addr, topic)
        assert first[topic] in ([b"claims IPv6 hosts"], [])
    later = [f"later {index}".encode() for index in range(20)]
    for body in later:
        assert (await _send(client, addr, "HostileRecordLater", body)).code == ResponseCode.SUCCESS
    _restart(standalone)
    after = RemotingClient()  # the old connection went with the old process
    try:
        assert await _bodies(after, addr, "HostileRecordLater") == later
        for topic, bodies in first.items():
            assert await _bodies(after, addr, topic) == bodies
    finally:
        await after.close()


# -- names that are paths -------------------------------------------------------------------------


async def test_broker_refuses_group_names_that_are_paths(
    standalone: ServerProcess, client: RemotingClient
) -> None:
    addr = _addr(standalone)
    sent = await _send(client, addr, "HostilePath", b"to be sent back")
    offset = decode_offset_msg_id(sent.ext_fields["msgId"]).commit_log_offset
    for group in ("../../escape", "x\x00y", "a/b"):
        header = ConsumerSendMsgBackRequestHeader(
            commit_log_offset=offset, group="G", delay_level=-1
        ).to_ext()
        header["group"] = group
        response = await client.invoke(
            addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header)
        )
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert "'group'" in (response.remark or "")
    data = _data(standalone)
    assert not (data.parent / "escape").exists() and not (data / "escape").exists()
    assert not any("escape" in path.name or "\x00" in path.name for path in data.rglob("*"))
    # Still shuts down cleanly (exit status 0) and starts again.
    _restart(standalone)
    assert "Traceback" not in standalone.log()


# -- transactions ---------------------------------------------------------------------------------


async def test_broker_commits_only_a_real_half_message(
    standalone: ServerProcess, client: RemotingClient
) -> None:
    """A "half message" embedded in an ordinary message's body, PHYSICALOFFSET forged to match."""
    addr = _addr(standalone)
    await _create(client, addr, "HostileTxCarrier")
    probe = await _send(client, addr, "HostileTxCarrier", b"probe")
    probe_offset = decode_offset_msg_id(probe.ext_fields["msgId"]).commit_log_offset
    view = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(probe_offset)})
    probe_size = len((await client.invoke(addr, view)).body)
    carrier_offset = probe_offset + probe_size  # nothing else is sent meanwhile
    forged_offset = carrier_offset + 88  # where the carrier's body starts (IPv4 hosts)
    half = MessageExt(
        topic="RMQ_SYS_TRANS_HALF_TOPIC",
        body=b"forged",
        properties={
            "REAL_TOPIC": "SCHEDULE_TOPIC_XXXX",
            "REAL_QID": "0",
            "PGROUP": "PG_FORGER",
            "TRAN_MSG": "true",
        },
        commit_log_offset=forged_offset,
        queue_offset=0,
    )
    carrier = await _send(client, addr, "HostileTxCarrier", encode_stored_message(half))
    assert decode_offset_msg_id(carrier.ext_fields["msgId"]).commit_log_offset == carrier_offset
    end = EndTransactionRequestHeader(
        producer_group="PG_FORGER",
        tran_state_table_offset=0,
        commit_log_offset=forged_offset,
        commit_or_rollback=8,
    )
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.END_TRANSACTION, end.to_ext()))
    assert response.code == ResponseCode.SYSTEM_ERROR
    max_offset = RemotingCommand.request(
        RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader("SCHEDULE_TOPIC_XXXX", 0).to_ext()
    )
    assert (await client.invoke(addr, max_offset)).ext_fields["offset"] == "0"


# -- persisted state ------------------------------------------------------------------------------


async def test_broker_persists_no_offset_that_would_stop_its_restart(
    standalone: ServerProcess, client: RemotingClient
) -> None:
    addr = _addr(standalone)
    await _create(client, addr, "HostileOffsets")
    for topic in ("", "no/such topic", "HostileOffsets"):
        header = UpdateConsumerOffsetRequestHeader("CG_OFF", "HostileOffsets", 0, 5).to_ext()
        header["topic"] = topic
        response = await client.invoke(
            addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header)
        )
        assert response.code == (
            ResponseCode.SUCCESS if topic == "HostileOffsets" else ResponseCode.SYSTEM_ERROR
        )
    _restart(standalone)
    config = _data(standalone) / "store" / "config" / "consumerOffset.json"
    assert list(orjson.loads(config.read_bytes())["offsetTable"]) == ["HostileOffsets@CG_OFF"]


async def test_broker_starts_with_damaged_table_entries_skipped(
    standalone: ServerProcess, client: RemotingClient
) -> None:
    config = _data(standalone) / "store" / "config"
    assert standalone.stop() == 0
    offsets = {"offsetTable": {"@CG": {"0": 1}, "T@CG": {"x": 1, "0": 3}, "../t@CG": {"0": 2}}}
    (config / "consumerOffset.json").write_bytes(orjson.dumps(offsets))
    topics = orjson.loads((config / "topics.json").read_bytes())
    topics["topicConfigTable"]["bad topic"] = {
        "topicName": "bad topic",
        "readQueueNums": 1,
        "writeQueueNums": 1,
    }
    topics["topicConfigTable"]["Huge"] = {"topicName": "Huge", "readQueueNums": 2**40, "writeQueueNums": 1}
    topics["topicConfigTable"]["T"] = {"topicName": "T", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
    (config / "topics.json").write_bytes(orjson.dumps(topics))
    groups = {
        "subscriptionGroupTable": {
            "CG": {"groupName": "CG"},
            "../CG": {"groupName": "../CG"},
            "CG_BAD": {"groupName": "CG_BAD", "retryQueueNums": "many"},
        },
        "dataVersion": {"timestamp": 1, "counter": 1},
    }
    (config / "subscriptionGroup.json").write_bytes(orjson.dumps(groups))
    delay = {"offsetTable": {"1": 4, "x": 1, "0": 2, "2": -5, "3": "7"}}
    (config / "delayOffset.json").write_bytes(orjson.dumps(delay))
    standalone.start()
    log = standalone.log()
    for entry in ("'bad topic'", "Huge", "../t@CG", "../CG", "CG_BAD"):
        assert entry in log and "skipped" in log, entry
    # The good entries of each table are served.
    query = QueryConsumerOffsetRequestHeader("CG", "T", 0).to_ext()
    response = await client.invoke(
        _addr(standalone), RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, query)
    )
    assert (response.code, response.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "3")
    get_group = RemotingCommand.request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "CG"})
    assert (await client.invoke(_addr(standalone), get_group)).code == ResponseCode.SUCCESS
    delay_offsets = RemotingCommand.request(RequestCode.GET_ALL_DELAY_OFFSET, {})
    response = await client.invoke(_addr(standalone), delay_offsets)
    assert orjson.loads(response.body)["offsetTable"] == {"1": 4}


# -- numbers a record cannot hold -----------------------------------------------------------------


async def test_broker_answers_message_illegal_for_fields_past_32_bits(
    shared: ServerProcess, client: RemotingClient
) -> None:
    addr = _addr(shared)
    for field in ("flag", "sysFlag", "reconsumeTimes"):
        response = await _send(client, addr, "HostileNumbers", b"x", **{field: str(2**31)})
        assert response.code == ResponseCode.MESSAGE_ILLEGAL, (field, response.remark)
        assert f"'{field}'" in (response.remark or "")
    assert (await _send(client, addr, "HostileNumbers", b"fine")).code == ResponseCode.SUCCESS
    assert "Traceback" not in shared.log()


# -- frames whose header cannot be answered -------------------------------------------------------


def test_broker_closes_a_connection_whose_header_cannot_be_answered(shared: ServerProcess) -> None:
    """An opaque no client can match (not a 32-bit integer): close the connection, at once."""
    for opaque in (2**40, -(2**40), 2**63, "7x", 1.5, [1]):
        header = {"code": 30, "opaque": opaque, "flag": 0, "extFields": {"topic": "T", "queueId": "0"}}
        got = _answer_or_close(shared.extra_ports[0], _raw_frame(header))
        assert got is not None, f"opaque {opaque!r}: neither answered nor closed (the client would wait)"
        if got:
            (header_len,) = struct.unpack_from(">i", got, 4)
            answered = orjson.loads(got[8 : 8 + header_len])
            assert -(2**31) <= answered["opaque"] < 2**31, answered
    assert "Task exception was never retrieved" not in shared.log()


# -- what bad input costs the log and the answer --------------------------------------------------


async def test_broker_logs_bad_requests_rate_limited_with_short_remarks(
    shared: ServerProcess, client: RemotingClient
) -> None:
    addr = _addr(shared)
    log_before = shared.log_path.stat().st_size
    huge = "x" * (1 << 20)
    for _ in range(100):
        request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": huge, "queueId": "0"})
        response = await client.invoke(addr, request, timeout_ms=10_000)
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert "'topic'" in (response.remark or "") and len(response.remark or "") < 600
        request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": huge})
        response = await client.invoke(addr, request, timeout_ms=10_000)
        assert "'queueId'" in (response.remark or "") and len(response.remark or "") < 600
    growth = shared.log_path.stat().st_size - log_before
    assert growth < 16 * 1024, growth
    assert "Traceback" not in shared.log()


# -- the consumer's side --------------------------------------------------------------------------


async def test_pull_consumer_delivers_the_good_messages_around_an_undecodable_body(
    shared: ServerProcess, client: RemotingClient
) -> None:
    addr = _addr(shared)
    await _create(client, addr, "HostileBodies")
    bodies = [b"good before", b"\x00not zlib at all", zlib.compress(b"good compressed"), b"good after"]
    flags = ["0", str(SysFlag.COMPRESSED), str(SysFlag.COMPRESSED), "0"]
    for body, flag in zip(bodies, flags, strict=True):
        assert (await _send(client, addr, "HostileBodies", body, sysFlag=flag)).code == ResponseCode.SUCCESS
    consumer = PullConsumer("CG_BODIES", shared.addr)
    await consumer.start()
    try:
        queue = MessageQueue("HostileBodies", "broker-a", 0)
        consumer.assign([queue])
        consumer.seek(queue, 0)
        got: list[MessageExt] = []
        for _ in range(50):
            got += await consumer.poll(timeout_ms=500)
            if len(got) >= 4:
                break
        assert [m.body for m in got] == [
            b"good before",
            b"\x00not zlib at all",
            b"good compressed",
            b"good after",
        ]
        assert [m.decode_error is not None for m in got] == [False, True, False, False]
    finally:
        await consumer.shutdown()


async def test_push_consumer_delivers_an_undecodable_body_and_keeps_consuming(
    shared: ServerProcess, client: RemotingClient
) -> None:
    addr = _addr(shared)
    await _create(client, addr, "HostilePushBodies")
    bodies = [b"push before", b"\x01not zlib either", b"push after"]
    flags = ["0", str(SysFlag.COMPRESSED), "0"]
    for body, flag in zip(bodies, flags, strict=True):
        sent = await _send(client, addr, "HostilePushBodies", body, sysFlag=flag)
        assert sent.code == ResponseCode.SUCCESS
    got: list[MessageExt] = []

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        got.extend(messages)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        "CG_PUSH_BODIES",
        shared.addr,
        listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe("HostilePushBodies", "*")
    await consumer.start()
    try:
        for _ in range(100):
            if len(got) >= 3:
                break
            await asyncio.sleep(0.1)
        # A later message still arrives: the queue's pull loop did not stop at the bad body.
        assert (await _send(client, addr, "HostilePushBodies", b"push later")).code == ResponseCode.SUCCESS
        for _ in range(100):
            if len(got) >= 4:
                break
            await asyncio.sleep(0.1)
        assert sorted(m.body for m in got) == sorted([*bodies, b"push later"])
        assert [m.body for m in got if m.decode_error is not None] == [b"\x01not zlib either"]
    finally:
        await consumer.shutdown()
