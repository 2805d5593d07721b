"""The work a concurrent consume service does per message, counted, not timed.

With ``consume_message_batch_max_size`` 1 (RocketMQ's default) the listener is called once per
message, so what the service itself calls around each listener call is paid per message. The
profile hook counts every call made from the service's own code (Python functions and
builtins alike: clocks, locks, the methods that take batches off the FIFO); the listener's own
calls are not counted, only the call to it.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType

import pytest

from orbitmq.client import _consume_service, _consume_threads, _listener_runner
from orbitmq.client._consume_service import ConcurrentConsumeService, ConsumeResult, ConsumeSettings
from orbitmq.client._process_queue import ProcessQueue
from orbitmq.model.message import MessageExt, MessageQueue

MQ = MessageQueue("T", "broker-a", 0)
MESSAGES = 4_000
PULL_SIZE = 500
CALLS_PER_MESSAGE_MAX = 2.5
"""The listener call, one clock read, and a share of the per-run and per-flush work."""
FAST_CALLS_PER_MESSAGE_MAX = 1.3
"""With a listener that returns at once: its call, and a share of a claim's or a stretch's work."""
CLOCK_READS_PER_MESSAGE_MAX = 0.25
SERVICE_FILES = {
    Path(module.__file__).resolve() for module in (_consume_service, _consume_threads, _listener_runner)
}


class Sink:
    def on_consumed(self, mq: MessageQueue, pq: ProcessQueue, commit_offset: int) -> None:
        return None

    async def queue_lockable(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        return True


def _from_service(frame: FrameType, files: dict[str, bool]) -> bool:
    name = frame.f_code.co_filename
    known = files.get(name)
    if known is None:
        known = files[name] = Path(name).resolve() in SERVICE_FILES
    return known


async def _calls_from_service(kind: str) -> Counter[str]:
    """The calls the service made while an ``async def`` or plain listener that returns at once
    was called on :data:`MESSAGES` messages, one per call, pulled :data:`PULL_SIZE` at a time."""
    loop = asyncio.get_running_loop()
    finished = asyncio.Event()
    seen: list[MessageExt] = []

    def record(messages: list[MessageExt]) -> ConsumeResult:
        seen.extend(messages)
        if len(seen) >= MESSAGES:
            loop.call_soon_threadsafe(finished.set)
        return ConsumeResult.CONSUME_SUCCESS

    async def on_messages(messages: list[MessageExt]) -> ConsumeResult:
        return record(messages)

    settings = ConsumeSettings("g", True, 20, 1, 16, 1000)
    service = ConcurrentConsumeService(settings, on_messages if kind == "async" else record, None, Sink())  # type: ignore[arg-type]
    service.start()
    pq = ProcessQueue()
    messages = [MessageExt(topic="T", body=b"x", queue_offset=offset) for offset in range(MESSAGES)]
    calls: Counter[str] = Counter()
    files: dict[str, bool] = {}

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            caller = frame.f_back
            if caller is not None and _from_service(caller, files):
                calls[frame.f_code.co_name] += 1
        elif event == "c_call" and _from_service(frame, files):
            calls[getattr(arg, "__name__", "?")] += 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        for start in range(0, MESSAGES, PULL_SIZE):
            pulled = messages[start : start + PULL_SIZE]
            pq.put_messages(pulled)
            service.submit(MQ, pq, pulled)
        await asyncio.wait_for(finished.wait(), 30)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    await service.stop()
    assert sorted(m.queue_offset for m in seen) == list(range(MESSAGES))
    return calls


@pytest.mark.parametrize("kind", ["async", "plain"])
async def test_consume_concurrent_calls_per_message_at_default_batch_size(kind: str) -> None:
    calls = await _calls_from_service(kind)
    per_message = sum(calls.values()) / MESSAGES
    assert per_message <= CALLS_PER_MESSAGE_MAX, (
        f"{per_message:.2f} calls per message: {calls.most_common(6)}"
    )


@pytest.mark.parametrize("kind", ["async", "plain"])
async def test_consume_concurrent_fast_listener_costs_its_call_and_a_small_share(kind: str) -> None:
    """A listener that returns at once: the clock is read once per several calls (an async
    listener's worker) or per claim of several batches (a pool thread), and what a stretch of
    calls or a claim costs besides is shared by its messages."""
    calls = await _calls_from_service(kind)
    per_message = sum(calls.values()) / MESSAGES
    assert per_message <= FAST_CALLS_PER_MESSAGE_MAX, (
        f"{per_message:.2f} calls per message: {calls.most_common(6)}"
    )
    clock_reads = calls["perf_counter"] / MESSAGES
    assert clock_reads <= CLOCK_READS_PER_MESSAGE_MAX, f"{clock_reads:.2f} clock reads per message"
