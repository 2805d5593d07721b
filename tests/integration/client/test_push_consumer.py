"""PushConsumer against a real standalone broker: delivery, groups, filters, restart, send-back.

Messages are produced with raw SEND_BATCH_MESSAGE / SEND_MESSAGE requests (``produce_raw``),
so these tests depend only on the consumer under test. Each test uses a fresh topic and group.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from orbitmq.client import push_consumer as push_module
from orbitmq.client.push_consumer import ConsumeResult, PushConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere, MessageModel
from orbitmq.model.message import MessageExt
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import GetMaxOffsetRequestHeader, SendMessageRequestHeader
from orbitmq.protocol.properties import encode_properties
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, create_topic, start_standalone

pytestmark = pytest.mark.integration


async def make_topic(addr: str, topic: str, queues: int = 4) -> None:
    """create_topic runs its own event loop, so it runs in a thread here."""
    await asyncio.to_thread(create_topic, addr, topic, queues)


def broker_addr(standalone: ServerProcess) -> str:
    return f"127.0.0.1:{standalone.extra_ports[0]}"


async def produce_raw(
    addr: str,
    topic: str,
    bodies: Iterable[bytes],
    *,
    queue_id: int = -1,
    tags: str | None = None,
    keys: Callable[[int], str] | None = None,
    batch: bool = True,
) -> int:
    """Send bodies to ``topic`` (one batch per 256 messages, or one by one); returns the count."""
    client = RemotingClient()
    sent = 0
    try:
        items = []
        for index, body in enumerate(bodies):
            properties = {"UNIQ_KEY": f"U{time.time_ns()}-{index}"}
            if tags:
                properties["TAGS"] = tags
            if keys:
                properties["KEYS"] = keys(index)
            items.append((0, body, properties))
        chunks = (
            [items[i : i + 256] for i in range(0, len(items), 256)] if batch else [[item] for item in items]
        )
        for chunk in chunks:
            header = SendMessageRequestHeader(
                producer_group="raw-producer",
                topic=topic,
                queue_id=queue_id,
                born_timestamp=int(time.time() * 1000),
                batch=batch,
                properties=None if batch else encode_properties(chunk[0][2]),
            )
            body = encode_batch(chunk) if batch else chunk[0][1]
            code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE
            response = await client.invoke(addr, RemotingCommand.request(code, header.to_ext(), body), 10_000)
            if response.code != ResponseCode.SUCCESS:
                raise AssertionError(f"send to {topic}: {response.code} {response.remark}")
            sent += len(chunk)
    finally:
        await client.close()
    return sent


class Collector:
    """A listener that records what it got; ``fail`` decides per message whether to fail."""

    def __init__(self, fail: Callable[[MessageExt], bool] | None = None) -> None:
        self.messages: list[MessageExt] = []
        self.fail = fail

    async def __call__(self, messages: list[MessageExt]) -> ConsumeResult:
        self.messages.extend(messages)
        if self.fail is not None and any(self.fail(m) for m in messages):
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.CONSUME_SUCCESS

    def bodies(self) -> set[bytes]:
        return {m.body for m in self.messages}


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


def consumer(namesrv: str, group: str, listener: object, **config: object) -> PushConsumer:
    config.setdefault("consume_from_where", ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    config.setdefault("persist_consumer_offset_interval_ms", 500)
    return PushConsumer(group, namesrv, listener, **config)  # type: ignore[arg-type]


async def test_push_consumer_two_groups_each_get_every_message(standalone: ServerProcess) -> None:
    addr = broker_addr(standalone)
    await make_topic(addr, "TwoGroups", queues=4)
    bodies = [f"m{i}".encode() for i in range(200)]
    await produce_raw(addr, "TwoGroups", bodies)
    first, second = Collector(), Collector()
    consumers = [
        consumer(standalone.addr, "g-one", first, instance_name="one"),
        consumer(standalone.addr, "g-two", second, instance_name="two"),
    ]
    for c in consumers:
        c.subscribe("TwoGroups")
        await c.start()
    try:
        await wait_until(lambda: len(first.bodies()) == 200 and len(second.bodies()) == 200)
    finally:
        for c in consumers:
            await c.shutdown()
    assert first.bodies() == set(bodies)
    assert second.bodies() == set(bodies)
    sample = first.messages[0]
    assert sample.topic == "TwoGroups" and sample.store_timestamp > 0 and sample.msg_id


async def test_push_consumer_tag_filter_and_plain_listener(standalone: ServerProcess) -> None:
    addr = broker_addr(standalone)
    await make_topic(addr, "Tagged", queues=2)
    await produce_raw(addr, "Tagged", [b"a"] * 10, tags="tagA")
    await produce_raw(addr, "Tagged", [b"b"] * 10, tags="tagB")
    await produce_raw(addr, "Tagged", [b"c"] * 10, tags="tagC")
    got: list[str | None] = []

    def plain(messages: list[MessageExt]) -> ConsumeResult:
        got.extend(m.tags for m in messages)
        return ConsumeResult.CONSUME_SUCCESS

    c = consumer(standalone.addr, "g-tags", plain, consume_thread_max=4, consume_thread_min=1)
    c.subscribe("Tagged", "tagA || tagC")
    await c.start()
    try:
        await wait_until(lambda: len(got) == 20)
        await asyncio.sleep(0.3)
    finally:
        await c.shutdown()
    assert sorted(got, key=str) == ["tagA"] * 10 + ["tagC"] * 10


async def test_push_consumer_restart_resumes_from_committed_offset(standalone: ServerProcess) -> None:
    addr = broker_addr(standalone)
    await make_topic(addr, "Resume", queues=2)
    await produce_raw(addr, "Resume", [f"a{i}".encode() for i in range(50)])
    first = Collector()
    c = consumer(standalone.addr, "g-resume", first)
    c.subscribe("Resume")
    await c.start()
    await wait_until(lambda: len(first.bodies()) == 50)
    await c.shutdown()
    await produce_raw(addr, "Resume", [f"b{i}".encode() for i in range(30)])
    second = Collector()
    c = consumer(standalone.addr, "g-resume", second)
    c.subscribe("Resume")
    await c.start()
    try:
        await wait_until(lambda: len(second.bodies()) == 30)
        await asyncio.sleep(0.3)
    finally:
        await c.shutdown()
    assert second.bodies() == {f"b{i}".encode() for i in range(30)}


async def test_push_consumer_new_group_honours_consume_from_where(standalone: ServerProcess) -> None:
    # On a queue that was never truncated a 4.x broker hands a new group offset 0; the consumer
    # asks it not to (setZeroIfNotFound=false) when it starts from a timestamp.
    addr = broker_addr(standalone)
    await make_topic(addr, "StartPolicy", queues=2)
    await produce_raw(addr, "StartPolicy", [f"old{i}".encode() for i in range(20)])
    await asyncio.sleep(0.05)
    boundary_ms = int(time.time() * 1000)
    await asyncio.sleep(0.05)
    await produce_raw(addr, "StartPolicy", [f"new{i}".encode() for i in range(20)])
    from_time, from_first = Collector(), Collector()
    consumers = [
        consumer(
            standalone.addr,
            "g-from-time",
            from_time,
            instance_name="t",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
            consume_timestamp_ms=boundary_ms,
        ),
        consumer(standalone.addr, "g-from-first", from_first, instance_name="f"),
    ]
    for c in consumers:
        c.subscribe("StartPolicy")
        await c.start()
    try:
        await wait_until(lambda: len(from_time.bodies()) >= 20 and len(from_first.bodies()) >= 40)
        await asyncio.sleep(0.3)
    finally:
        for c in consumers:
            await c.shutdown()
    assert from_time.bodies() == {f"new{i}".encode() for i in range(20)}
    assert len(from_first.bodies()) == 40


async def max_offset(addr: str, topic: str, queue_id: int) -> int:
    client = RemotingClient()
    try:
        header = GetMaxOffsetRequestHeader(topic, queue_id)
        response = await client.invoke(
            addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, header.to_ext())
        )
        return int(response.ext_fields["offset"])
    finally:
        await client.close()


async def test_push_consumer_failing_listener_reaches_dlq(tmp_path: Path) -> None:
    # One-second delay levels keep the broker's real retry delays short.
    conf = tmp_path / "broker.conf"
    conf.write_text("messageDelayLevel=" + " ".join(["1s"] * 18) + "\n")
    server = start_standalone(tmp_path, "-c", str(conf))
    try:
        addr = broker_addr(server)
        await make_topic(addr, "Failing", queues=1)
        await produce_raw(addr, "Failing", [b"poison", b"fine"])
        arrivals: list[float] = []
        collector = Collector(fail=lambda m: m.body == b"poison" and not arrivals.append(time.monotonic()))
        c = consumer(server.addr, "g-fail", collector, max_reconsume_times=2)
        c.subscribe("Failing")
        await c.start()
        try:
            await wait_until(lambda: len(arrivals) >= 3, 20)
            deadline = time.monotonic() + 10
            while await max_offset(addr, "%DLQ%g-fail", 0) < 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        finally:
            await c.shutdown()
        assert await max_offset(addr, "%DLQ%g-fail", 0) == 1
    finally:
        server.kill()
    poison = [m for m in collector.messages if m.body == b"poison"]
    assert [m.reconsume_times for m in poison] == [0, 1, 2]
    assert all(m.topic == "Failing" for m in poison)
    assert sum(m.body == b"fine" for m in collector.messages) == 1
    # The broker's schedule service applies the retry delay level (1 s each here).
    assert arrivals[1] - arrivals[0] >= 0.8 and arrivals[2] - arrivals[1] >= 0.8


async def test_push_consumer_broadcasting_every_member_gets_all(
    standalone: ServerProcess, tmp_path: object
) -> None:
    addr = broker_addr(standalone)
    await make_topic(addr, "Broadcast", queues=2)
    await produce_raw(addr, "Broadcast", [f"x{i}".encode() for i in range(40)])
    collectors = [Collector(), Collector()]
    consumers = [
        consumer(
            standalone.addr,
            "g-broadcast",
            collectors[i],
            instance_name=f"b{i}",
            message_model=MessageModel.BROADCASTING,
            offset_store_dir=str(tmp_path),
        )
        for i in range(2)
    ]
    for c in consumers:
        c.subscribe("Broadcast")
        await c.start()
    try:
        await wait_until(lambda: all(len(col.bodies()) == 40 for col in collectors))
    finally:
        for c in consumers:
            await c.shutdown()
    assert list(tmp_path.glob("*/g-broadcast/offsets.json"))  # type: ignore[attr-defined]


def test_push_module_exports() -> None:
    assert push_module.PushConsumer is PushConsumer


def test_push_consumer_blocking_facade_with_plain_listener(standalone: ServerProcess) -> None:
    from orbitmq.client.blocking import BlockingPushConsumer

    addr = broker_addr(standalone)
    asyncio.run(make_topic(addr, "BlockingPush", queues=2))
    asyncio.run(produce_raw(addr, "BlockingPush", [f"q{i}".encode() for i in range(30)]))
    got: list[bytes] = []

    def listener(messages: list[MessageExt]) -> ConsumeResult:
        got.extend(m.body for m in messages)
        return ConsumeResult.CONSUME_SUCCESS

    push = BlockingPushConsumer(
        "g-blocking", standalone.addr, listener, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    push.subscribe("BlockingPush")
    with push:
        deadline = time.monotonic() + 15
        while len(set(got)) < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert set(got) == {f"q{i}".encode() for i in range(30)}


async def test_push_consumer_flow_control_pauses_pulling(standalone: ServerProcess) -> None:
    addr = broker_addr(standalone)
    await make_topic(addr, "Flow", queues=1)
    await produce_raw(addr, "Flow", [f"f{i}".encode() for i in range(200)])
    release = asyncio.Event()
    got: list[bytes] = []

    async def slow(messages: list[MessageExt]) -> ConsumeResult:
        await release.wait()
        got.extend(m.body for m in messages)
        return ConsumeResult.CONSUME_SUCCESS

    c = consumer(
        standalone.addr,
        "g-flow",
        slow,
        pull_threshold_for_queue=20,
        pull_batch_size=8,
        consume_thread_max=1,
        consume_thread_min=1,
    )
    c.subscribe("Flow")
    await c.start()
    try:
        await asyncio.sleep(1.0)
        held = [owned.pq.msg_count for mq, owned in c._owned.items() if mq.topic == "Flow"]
        assert held and 20 <= held[0] < 20 + 8  # paused at the threshold, not all 200 pulled
        release.set()
        await wait_until(lambda: len(set(got)) == 200)
    finally:
        release.set()
        await c.shutdown()


async def test_consumers_started_before_their_topic_exists_get_its_messages_in_seconds(
    standalone: ServerProcess,
) -> None:
    """A rebalance that finds no route looks again after 1 s (doubling), not after 20 s."""
    from orbitmq.client.pull_consumer import PullConsumer

    addr = broker_addr(standalone)
    collector = Collector()
    push = consumer(standalone.addr, "g-early-push", collector, instance_name="early-push")
    push.subscribe("EarlyTopic")
    pull = PullConsumer(
        "g-early-pull",
        standalone.addr,
        instance_name="early-pull",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    await pull.subscribe("EarlyTopic")
    await push.start()
    await pull.start()
    try:
        await asyncio.sleep(1.5)  # at least one look found no route
        await make_topic(addr, "EarlyTopic", queues=2)
        bodies = [f"early-{i}".encode() for i in range(10)]
        await produce_raw(addr, "EarlyTopic", bodies)
        started = time.monotonic()
        pulled: list[MessageExt] = []
        while time.monotonic() - started < 10 and (len(collector.bodies()) < 10 or len(pulled) < 10):
            pulled += await pull.poll(200)
        # Far under the 20 s rebalance interval: found by the second or third look.
        assert collector.bodies() == set(bodies), time.monotonic() - started
        assert {m.body for m in pulled} == set(bodies)
    finally:
        await push.shutdown()
        await pull.shutdown()
