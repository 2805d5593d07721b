"""Consumers left at their defaults read a backlog in big pulls, and pull as configured at its head.

``pull_batch_size`` (32) is what a pull asks for while the queue is caught up; while the last
answer showed a backlog, the next pull asks for it (up to the flow-control room). Every pull a
consumer issues is recorded on its way to the real broker (the module's ``pull_queue``), with
what it asked for and what came back. The listener still sees one message per call.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orbitmq.client import _pull_api, _push_pull, pull_consumer
from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.client.push_consumer import ConsumeResult, PushConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import MessageExt, MessageQueue
from tests.integration.client.test_push_consumer import make_topic, produce_raw
from tests.support.processes import ServerProcess, start_standalone

pytestmark = pytest.mark.integration

BACKLOG = 4000
QUEUES = 2
DEFAULT_PULL_BATCH_SIZE = 32


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_standalone(tmp_path_factory.mktemp("pull-sizes"), "--no-proxy")
    try:
        yield proc
    finally:
        proc.kill()


@dataclass
class Pull:
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    status: str = ""  # empty while the pull is under way (a long poll at the queue's end)
    found: int = 0


class PullRecorder:
    """Records every pull of ``module`` (its ``pull_queue``) that reads ``topic``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any, topic: str) -> None:
        self.pulls: list[Pull] = []
        real = _pull_api.pull_queue

        async def recording(
            invoker: Any, mq: MessageQueue, queue_offset: int, spec: _pull_api.PullRequestSpec, **kw: Any
        ) -> _pull_api.PullResult:
            pull = Pull(mq.queue_id, queue_offset, spec.max_msg_nums)
            if mq.topic == topic:
                self.pulls.append(pull)
            result = await real(invoker, mq, queue_offset, spec, **kw)
            pull.status = result.status.name
            pull.found = result.next_begin_offset - queue_offset if result.status.name == "FOUND" else 0
            return result

        monkeypatch.setattr(module, "pull_queue", recording)

    def found(self) -> list[Pull]:
        return [pull for pull in self.pulls if pull.status == "FOUND"]


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def backlog(server: ServerProcess, topic: str) -> set[bytes]:
    addr = f"127.0.0.1:{server.extra_ports[0]}"
    await make_topic(addr, topic, queues=QUEUES)
    bodies = [f"{topic}-{i}".encode() for i in range(BACKLOG)]
    await produce_raw(addr, topic, bodies)
    return set(bodies)


def assert_big_pulls_then_configured_size(recorder: PullRecorder) -> None:
    found = recorder.found()
    assert sum(pull.found for pull in found) == BACKLOG
    # 32 per pull would take BACKLOG / 32 = 125 pulls; a quarter of that is plenty.
    assert len(found) <= BACKLOG // DEFAULT_PULL_BATCH_SIZE // 4, [p.max_msg_nums for p in found]
    assert max(pull.max_msg_nums for pull in found) > DEFAULT_PULL_BATCH_SIZE


async def assert_head_pulls_ask_pull_batch_size(recorder: PullRecorder) -> None:
    """Caught up, each queue's latest pull (a long poll at its end) asks for pull_batch_size."""
    await wait_until(lambda: len(head_pulls(recorder)) == QUEUES)
    assert {pull.max_msg_nums for pull in head_pulls(recorder)} == {DEFAULT_PULL_BATCH_SIZE}


def head_pulls(recorder: PullRecorder) -> list[Pull]:
    """Per queue, its latest pull if that one started at the end of what the queue holds."""
    ends: dict[int, int] = {}
    latest: dict[int, Pull] = {}
    for pull in recorder.pulls:
        ends[pull.queue_id] = ends.get(pull.queue_id, 0) + pull.found
        latest[pull.queue_id] = pull
    if sum(ends.values()) < BACKLOG:
        return []
    return [
        pull
        for queue_id, pull in latest.items()
        if pull.queue_offset == ends[queue_id] and pull.status in ("", "NO_NEW_MSG")
    ]


@pytest.mark.parametrize("listener_kind", ["async", "plain"])
async def test_push_consumer_defaults_read_a_backlog_in_big_pulls_one_message_per_call(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch, listener_kind: str
) -> None:
    topic = f"BacklogPush{listener_kind.title()}"
    expected = await backlog(server, topic)
    recorder = PullRecorder(monkeypatch, _push_pull, topic)
    calls: list[int] = []
    got: list[bytes] = []
    lock = threading.Lock()

    def record(messages: list[MessageExt]) -> ConsumeResult:
        with lock:
            calls.append(len(messages))
            got.extend(m.body for m in messages)
        return ConsumeResult.CONSUME_SUCCESS

    async def on_messages(messages: list[MessageExt]) -> ConsumeResult:
        return record(messages)

    listener: Callable[[list[MessageExt]], ConsumeResult | Awaitable[ConsumeResult]] = (
        on_messages if listener_kind == "async" else record
    )
    consumer = PushConsumer(
        f"g-backlog-push-{listener_kind}",
        server.addr,
        listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic)
    await consumer.start()
    try:
        await wait_until(lambda: len(got) >= BACKLOG)
        await assert_head_pulls_ask_pull_batch_size(recorder)
    finally:
        await consumer.shutdown()
    assert set(got) == expected and len(got) == BACKLOG
    assert set(calls) == {1}
    assert_big_pulls_then_configured_size(recorder)


async def test_pull_consumer_defaults_read_a_backlog_in_big_pulls(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    topic = "BacklogPull"
    expected = await backlog(server, topic)
    recorder = PullRecorder(monkeypatch, pull_consumer, topic)
    consumer = PullConsumer(
        "g-backlog-pull", server.addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    await consumer.subscribe(topic)
    await consumer.start()
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < BACKLOG and time.monotonic() < deadline:
            got += [m.body for m in await consumer.poll(500)]
        await assert_head_pulls_ask_pull_batch_size(recorder)
    finally:
        await consumer.shutdown()
    assert set(got) == expected and len(got) == BACKLOG
    assert_big_pulls_then_configured_size(recorder)
