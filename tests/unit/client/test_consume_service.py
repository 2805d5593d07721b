"""Consume services with a fake broker: offsets never pass a failed message that was not taken back.

Concurrent: a failed batch is sent back, then counts as done; if the broker refuses it, the
message stays in the process queue (holding the offset) and is retried locally. Orderly: a
failed batch is retried in place after the suspend time, and goes to the DLQ (delay level -1)
after max_reconsume_times attempts.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from orbitmq.client import _consume_service as service_module
from orbitmq.client._consume_service import (
    ConcurrentConsumeService,
    ConsumeResult,
    ConsumeSettings,
    OrderlyConsumeService,
)
from orbitmq.client._process_queue import ProcessQueue
from orbitmq.model.message import MessageExt, MessageQueue
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand

MQ = MessageQueue("T", "broker-a", 0)


class FakeBroker:
    def __init__(self, accept: bool = True) -> None:
        self.accept = accept
        self.send_backs: list[dict[str, str]] = []

    async def invoke_broker(
        self, broker_name: str, request: RemotingCommand, timeout_ms: int | None = None, broker_id: int = 0
    ) -> RemotingCommand:
        assert request.code == RequestCode.CONSUMER_SEND_MSG_BACK
        self.send_backs.append(request.ext_fields)
        code = ResponseCode.SUCCESS if self.accept else ResponseCode.SYSTEM_ERROR
        return request.response(code, None if self.accept else "busy")


class Sink:
    def __init__(self) -> None:
        self.offsets: list[int] = []

    def on_consumed(self, mq: MessageQueue, pq: ProcessQueue, commit_offset: int) -> None:
        self.offsets.append(commit_offset)

    async def queue_lockable(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        return True


def settings(**overrides: object) -> ConsumeSettings:
    values: dict[str, object] = {
        "group": "g",
        "clustering": True,
        "thread_max": 2,
        "batch_max_size": 1,
        "max_reconsume_times": 2,
        "suspend_current_queue_time_ms": 10,
    }
    values.update(overrides)
    return ConsumeSettings(**values)  # type: ignore[arg-type]


def fill(count: int) -> tuple[ProcessQueue, list[MessageExt]]:
    pq = ProcessQueue()
    messages = [
        MessageExt(topic="T", body=b"%d" % i, queue_offset=i, commit_log_offset=100 + i) for i in range(count)
    ]
    pq.put_messages(messages, count)
    return pq, messages


async def settle(predicate: object, timeout_s: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "not settled"
        await asyncio.sleep(0.005)


async def test_consume_concurrent_send_back_then_offset_advances() -> None:
    broker, sink = FakeBroker(), Sink()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        return ConsumeResult.RECONSUME_LATER if messages[0].body == b"1" else ConsumeResult.CONSUME_SUCCESS

    service = ConcurrentConsumeService(settings(), listener, broker, sink)
    service.start()
    pq, messages = fill(3)
    service.submit(MQ, pq, messages)
    await settle(lambda: pq.msg_count == 0)
    await service.stop()
    assert max(sink.offsets) == 3
    assert len(broker.send_backs) == 1
    assert broker.send_backs[0]["offset"] == "101" and broker.send_backs[0]["maxReconsumeTimes"] == "2"


async def test_consume_concurrent_refused_send_back_holds_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module, "LOCAL_RETRY_DELAY_S", 0.01)
    broker, sink = FakeBroker(accept=False), Sink()
    calls: list[int] = []

    def plain_listener(messages: list[MessageExt]) -> ConsumeResult:
        calls.append(messages[0].queue_offset)
        if messages[0].queue_offset == 0 and calls.count(0) < 3:
            raise RuntimeError("listener bug")
        return ConsumeResult.CONSUME_SUCCESS

    service = ConcurrentConsumeService(settings(), plain_listener, broker, sink)
    service.start()
    pq, messages = fill(2)
    service.submit(MQ, pq, messages)
    await settle(lambda: calls.count(0) >= 2 and 1 in calls)
    assert pq.commit_offset() == 0  # offset 0 failed and was not taken back: nothing passes it
    await settle(lambda: pq.msg_count == 0)
    await service.stop()
    assert calls.count(0) == 3 and messages[0].reconsume_times == 2
    assert sink.offsets[-1] == 2


async def test_consume_orderly_retries_in_place_then_dead_letters() -> None:
    broker, sink = FakeBroker(), Sink()
    seen: list[tuple[int, int]] = []

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        seen.extend((m.queue_offset, m.reconsume_times) for m in messages)
        return (
            ConsumeResult.RECONSUME_LATER if messages[0].queue_offset == 1 else ConsumeResult.CONSUME_SUCCESS
        )

    service = OrderlyConsumeService(settings(), listener, broker, sink)
    pq, messages = fill(3)
    service.submit(MQ, pq, messages)
    await settle(lambda: pq.msg_count == 0)
    await service.stop()
    assert seen == [(0, 0), (1, 0), (1, 1), (1, 2), (2, 0)]
    assert [fields["delayLevel"] for fields in broker.send_backs] == ["-1"]
    assert sink.offsets == [1, 2, 3]


@pytest.mark.parametrize("kind", ["async", "plain"])
async def test_consume_concurrent_listener_gets_batch_max_size_per_call(kind: str) -> None:
    broker, sink = FakeBroker(), Sink()
    calls: list[list[int]] = []

    def record(messages: list[MessageExt]) -> ConsumeResult:
        calls.append([m.queue_offset for m in messages])
        return ConsumeResult.CONSUME_SUCCESS

    async def on_messages(messages: list[MessageExt]) -> ConsumeResult:
        return record(messages)

    listener = on_messages if kind == "async" else record
    service = ConcurrentConsumeService(settings(batch_max_size=3), listener, broker, sink)
    service.start()
    pq, messages = fill(200)
    service.submit(MQ, pq, messages[:100])
    service.submit(MQ, pq, messages[100:])
    await settle(lambda: pq.msg_count == 0)
    await service.stop()
    # Each pull's messages are cut into batches of 3 (the last one of a pull may be shorter).
    assert sorted(len(call) for call in calls) == [1] * 2 + [3] * 66
    assert sorted(offset for call in calls for offset in call) == list(range(200))
    assert sink.offsets[-1] == 200 and sink.offsets == sorted(sink.offsets)


@pytest.mark.parametrize("kind", ["async", "plain"])
async def test_consume_concurrent_slow_listener_keeps_thread_max_calls_in_flight(kind: str) -> None:
    """Batches are still handed to thread_max listener calls at once when the listener waits."""
    broker, sink = FakeBroker(), Sink()
    in_flight, most = 0, 0
    lock = threading.Lock()
    release = threading.Event()

    def enter() -> None:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)

    def leave() -> ConsumeResult:
        nonlocal in_flight
        with lock:
            in_flight -= 1
        return ConsumeResult.CONSUME_SUCCESS

    async def waiting(messages: list[MessageExt]) -> ConsumeResult:
        enter()
        while not release.is_set():
            await asyncio.sleep(0.005)
        return leave()

    def blocking(messages: list[MessageExt]) -> ConsumeResult:
        enter()
        release.wait(5)
        return leave()

    service = ConcurrentConsumeService(
        settings(thread_max=4), waiting if kind == "async" else blocking, broker, sink
    )
    service.start()
    pq, messages = fill(12)
    service.submit(MQ, pq, messages)
    await settle(lambda: most == 4)
    assert pq.commit_offset() == 0  # nothing finished yet
    release.set()
    await settle(lambda: pq.msg_count == 0)
    await service.stop()
    assert most == 4 and sink.offsets[-1] == 12


async def test_consume_concurrent_plain_listener_that_turns_slow_gets_thread_max_calls_again() -> None:
    """A fast plain listener is run by one pool thread at a time; once it blocks, the batches
    waiting behind it are spread over thread_max threads again."""
    broker, sink = FakeBroker(), Sink()
    in_flight, most = 0, 0
    lock = threading.Lock()
    blocking = threading.Event()
    release = threading.Event()

    def listener(messages: list[MessageExt]) -> ConsumeResult:
        nonlocal in_flight, most
        if not blocking.is_set():
            return ConsumeResult.CONSUME_SUCCESS
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        release.wait(5)
        with lock:
            in_flight -= 1
        return ConsumeResult.CONSUME_SUCCESS

    service = ConcurrentConsumeService(settings(thread_max=4), listener, broker, sink)
    service.start()
    pq, messages = fill(2012)
    service.submit(MQ, pq, messages[:1000])
    service.submit(MQ, pq, messages[1000:2000])
    await settle(lambda: pq.msg_count == 12)
    blocking.set()
    service.submit(MQ, pq, messages[2000:])
    await settle(lambda: most == 4)
    release.set()
    await settle(lambda: pq.msg_count == 0)
    await service.stop()
    assert sink.offsets[-1] == 2012


async def test_consume_concurrent_async_listener_that_turns_slow_is_finished_call_by_call_again() -> None:
    """A fast async listener's worker reads the clock after several calls at once; once the
    calls take longer than DONE_FLUSH_MS, it sees so within CLOCK_EVERY_MAX calls and finishes
    the messages call by call again (the committed offset follows each slow call)."""
    broker, sink = FakeBroker(), Sink()
    fast, slow = 1000, 24

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        if messages[0].queue_offset >= fast:
            time.sleep(service_module.DONE_FLUSH_MS / 1000)  # blocks the loop, as a busy listener does
        return ConsumeResult.CONSUME_SUCCESS

    service = ConcurrentConsumeService(settings(), listener, broker, sink)
    service.start()
    pq, messages = fill(fast + slow)
    service.submit(MQ, pq, messages)
    await settle(lambda: pq.msg_count == 0)
    await service.stop()
    assert sink.offsets[-1] == fast + slow
    commits_while_slow = {offset for offset in sink.offsets if offset > fast}
    assert len(commits_while_slow) >= slow - service_module.CLOCK_EVERY_MAX


@pytest.mark.parametrize("batch_max_size", [1, 3])
async def test_consume_concurrent_plain_listener_failures_inside_a_claim_are_sent_back_the_rest_finished(
    batch_max_size: int,
) -> None:
    """A pool thread claims many batches at once while the listener is fast: a batch that
    fails among them is sent back alone, every other message of the claim is finished."""
    broker, sink = FakeBroker(), Sink()
    calls: list[list[int]] = []

    def listener(messages: list[MessageExt]) -> ConsumeResult:
        offsets = [m.queue_offset for m in messages]
        calls.append(offsets)
        return (
            ConsumeResult.RECONSUME_LATER
            if 150 in offsets or 151 in offsets
            else ConsumeResult.CONSUME_SUCCESS
        )

    service = ConcurrentConsumeService(settings(batch_max_size=batch_max_size), listener, broker, sink)
    service.start()
    pq, messages = fill(300)
    service.submit(MQ, pq, messages)
    await settle(lambda: pq.msg_count == 0)
    await service.stop()
    assert sorted(offset for call in calls for offset in call) == list(range(300))
    failed = sorted({offset for call in calls if 150 in call or 151 in call for offset in call})
    assert sorted(int(send_back["offset"]) - 100 for send_back in broker.send_backs) == failed
    assert sink.offsets[-1] == 300
