"""Message trace end to end: OrbitMQ's producer and push consumer emit RocketMQ-format records.

Method: a server with ``traceTopicEnable=true``; a producer and a push consumer made with
``enable_msg_trace=True`` send and consume messages (one consumption fails once, so it is
retried); the admin client then queries the trace topic by each msgId and must find the Pub
record (success, cost, the broker's address) and, for the consumer group, SubBefore/SubAfter
records paired by requestId with their outcomes. A trace body written by a Java client (golden
text) stored in the trace topic is found and decoded the same way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from orbitmq.client import AdminClient, ConsumeResult, Message, Producer, PushConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import MessageExt
from tests.support.processes import ServerProcess, start_standalone, write_conf

pytestmark = pytest.mark.integration

TOPIC = "TracedTopic"
JAVA_MSG_ID = "0A0A0A0A00002A9F0000000000000ABC"
# A Pub and a SubAfter as RocketMQ 4.9.8's TraceDataEncoder writes them (SEP1=\x01, SEP2=\x02).
JAVA_TRACE_BODY = (
    "Pub\x011700000000000\x01DefaultRegion\x01PG_JAVA\x01OrderTopic\x01" + JAVA_MSG_ID
    + "\x01TagA\x01order-1\x0110.0.0.1:10911\x01128\x013\x010\x010A0000010000291100000000000000F0\x01true\x02"
    "SubAfter\x01REQ1\x01" + JAVA_MSG_ID + "\x017\x01false\x01order-1\x014\x011700000000100\x01CG_JAVA\x02"
)  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp_path = tmp_path_factory.mktemp("trace")
    # Every delay level 1 s: the consumer's retry (level 3, normally 10 s) comes back at once.
    conf = write_conf(
        tmp_path / "broker.conf", {"traceTopicEnable": True, "messageDelayLevel": " ".join(["1s"] * 18)}
    )
    proc = start_standalone(tmp_path, "-c", str(conf))
    try:
        yield proc
    finally:
        proc.kill()


async def _records(admin: AdminClient, msg_id: str, wanted: int) -> list:  # type: ignore[type-arg]
    deadline = time.monotonic() + 15
    found: list = []  # type: ignore[type-arg]
    while time.monotonic() < deadline:
        found = await admin.query_trace(msg_id)
        if len(found) >= wanted:
            return found
        await asyncio.sleep(0.2)
    return found


async def test_trace_shows_publish_and_consumption_with_times_and_status(server: ServerProcess) -> None:
    attempts: dict[str, int] = {}
    done = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        for message in messages:
            attempts[message.msg_id] = attempts.get(message.msg_id, 0) + 1
        if any(m.body == b"fail-once" and attempts[m.msg_id] == 1 for m in messages):
            return ConsumeResult.RECONSUME_LATER
        if len(attempts) >= 2 and all(count >= 1 for count in attempts.values()):
            done.set()
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        "CG_TRACED",
        server.addr,
        listener,
        enable_msg_trace=True,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(TOPIC, "*")
    async with Producer("PG_TRACED", server.addr, enable_msg_trace=True) as producer:
        ok = Message(TOPIC, b"ok")
        ok.tags, ok.keys = "TagT", ["biz-1"]
        sent_ok = await producer.send(ok)
        sent_fail = await producer.send(Message(TOPIC, b"fail-once"))
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), 30)
    finally:
        await consumer.shutdown()
    async with AdminClient(server.addr) as admin:
        records = await _records(admin, sent_ok.msg_id, 3)
        kinds = [record.trace_type for record, _ in records]
        assert kinds.count("Pub") == 1 and "SubBefore" in kinds and "SubAfter" in kinds, kinds
        pub = next(record for record, _ in records if record.trace_type == "Pub")
        assert pub.group == "PG_TRACED" and pub.topic == TOPIC and pub.success
        assert pub.tags == "TagT" and pub.keys == "biz-1" and pub.offset_msg_id == sent_ok.offset_msg_id
        assert pub.store_host.endswith(f":{server.extra_ports[0]}") and pub.timestamp > 0 and pub.cost_ms >= 0
        after = next(record for record, _ in records if record.trace_type == "SubAfter")
        before = next(record for record, _ in records if record.trace_type == "SubBefore")
        assert after.request_id == before.request_id and after.group == "CG_TRACED"
        assert after.success and after.context_code == 0 and after.timestamp >= before.timestamp
        # The failed first attempt is traced as a failure, the retry as a success.
        retried = await _records(admin, sent_fail.msg_id, 5)
        outcomes = sorted(record.success for record, _ in retried if record.trace_type == "SubAfter")
        assert outcomes == [False, True], [(r.trace_type, r.success) for r, _ in retried]


async def test_trace_written_by_a_java_client_decodes(server: ServerProcess) -> None:
    async with Producer("PG_JAVA_TRACE", server.addr) as producer:
        message = Message("RMQ_SYS_TRACE_TOPIC", JAVA_TRACE_BODY.encode())
        message.keys = [JAVA_MSG_ID, "order-1"]
        await producer.send(message)
    async with AdminClient(server.addr) as admin:
        records = [record for record, _ in await _records(admin, JAVA_MSG_ID, 2)]
    assert [record.trace_type for record in records] == ["Pub", "SubAfter"]
    assert records[0].group == "PG_JAVA" and records[0].cost_ms == 3 and records[0].success
    assert records[1].group == "CG_JAVA" and not records[1].success and records[1].context_code == 4
