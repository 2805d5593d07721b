"""The client processes of ``bench scaling``: producers and consumers, one event loop each.

One Python client process tops out at about one core, as one broker does, so the benchmark
drives N brokers from several client processes (``multiprocessing``, spawned: no inherited
event loop or sockets). Each process reports what it measured over its own window
(``time.monotonic`` is system-wide, so the parent compares windows across processes) and the
CPU seconds it spent there.

The parent coordinates through multiprocessing primitives: a process puts its pid on
``ready`` once connected (the route fetched, a connection to every broker open), waits for
``start``, and stops at the end of its time, at its message quota, or when ``stop`` is set.
Ctrl-C at the terminal reaches these processes too: they ignore it, the parent decides.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from typing import Any

from orbitmq.client._record_decode import decode_records
from orbitmq.client.producer import Producer
from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.errors import OrbitError
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import Message
from orbitmq.transport.runner import new_event_loop

__all__ = ["ClientResult", "ConsumeSpec", "ProduceSpec", "consume_process", "produce_process"]

_STOP_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class ProduceSpec:
    namesrv: str
    topic: str
    size: int
    batch_size: int
    concurrency: int
    duration_s: float
    count: int  # this process's quota (0: none, the duration decides)
    queue_count: int  # queues of the topic over all brokers: one warm-up send reaches each


@dataclass(frozen=True, slots=True)
class ConsumeSpec:
    namesrv: str
    topic: str
    group: str
    pull_batch_size: int
    # (broker name, queue id) -> slot in the progress array; its last slot: how many queues
    # this member holds (the parent starts the clock once the members hold every queue once).
    queue_index: dict[tuple[str, int], int]
    max_s: float


@dataclass(slots=True)
class ClientResult:
    pid: int
    messages: int
    bytes: int
    errors: int
    started: float  # time.monotonic() when its measured window began
    ended: float
    cpu_s: float
    first_error: str = ""


async def _wait_start(start: Event, stop: Event) -> bool:
    """Until the parent says start (True) or stop (False)."""
    while not start.is_set():
        if stop.is_set():
            return False
        await asyncio.sleep(_STOP_POLL_S)
    return True


async def _watch_stop(stop: Event, done: asyncio.Event) -> None:
    while not done.is_set():
        if stop.is_set():
            done.set()
            return
        await asyncio.sleep(_STOP_POLL_S)


async def _produce(spec: ProduceSpec, ready: Queue[int], start: Event, stop: Event) -> ClientResult:
    body = os.urandom(spec.size // 2 + 1).hex().encode()[: spec.size]
    result = ClientResult(os.getpid(), 0, 0, 0, 0.0, 0.0, 0.0)
    async with Producer(
        f"PG_SCALING_{os.getpid()}", spec.namesrv, instance_name=f"scaling-{os.getpid()}"
    ) as producer:
        # A first send to every queue (the choice is round-robin): the route and a connection
        # to each broker are ready before the measured window.
        for _ in range(spec.queue_count):
            await producer.send_batch([Message(spec.topic, body)])
        ready.put(os.getpid())
        if not await _wait_start(start, stop):
            return result
        done = asyncio.Event()
        result.started = time.monotonic()
        cpu_started = time.process_time()
        deadline = result.started + spec.duration_s

        async def sender() -> None:
            while not done.is_set():
                if time.monotonic() >= deadline:
                    done.set()
                    return
                if spec.count:
                    take = min(spec.batch_size, spec.count - result.messages - in_flight[0])
                    if take <= 0:
                        return
                else:
                    take = spec.batch_size
                in_flight[0] += take
                try:
                    await producer.send_batch([Message(spec.topic, body) for _ in range(take)])
                except OrbitError as exc:
                    result.errors += 1
                    result.first_error = result.first_error or str(exc)
                    await asyncio.sleep(0.01)
                    continue
                finally:
                    in_flight[0] -= take
                result.messages += take
                result.bytes += take * spec.size

        in_flight = [0]
        watcher = asyncio.create_task(_watch_stop(stop, done))
        await asyncio.gather(*(sender() for _ in range(spec.concurrency)))
        result.ended = time.monotonic()
        result.cpu_s = time.process_time() - cpu_started
        done.set()
        await watcher
    return result


async def _consume(
    spec: ConsumeSpec, progress: Any, ready: Queue[int], start: Event, stop: Event
) -> ClientResult:
    result = ClientResult(os.getpid(), 0, 0, 0, 0.0, 0.0, 0.0)
    consumer = PullConsumer(
        spec.group,
        spec.namesrv,
        pull_batch_size=spec.pull_batch_size,
        pull_threshold_for_queue=4 * spec.pull_batch_size,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        instance_name=f"scaling-{os.getpid()}",
    )
    await consumer.subscribe(spec.topic)
    await consumer.start()
    try:
        ready.put(os.getpid())
        while not start.is_set():
            if stop.is_set():
                return result
            progress[len(spec.queue_index)] = len(consumer.assignment())
            await asyncio.sleep(_STOP_POLL_S)
        result.started = time.monotonic()
        cpu_started = time.process_time()
        deadline = result.started + spec.max_s
        while not stop.is_set() and time.monotonic() < deadline:
            for batch in await consumer.poll_raw(100):
                # What poll() does to each batch, keeping the batch's queue for the progress.
                messages = decode_records(batch.body)
                result.messages += len(messages)
                result.bytes += sum(len(message.body) for message in messages)
                slot = spec.queue_index[(batch.mq.broker_name, batch.mq.queue_id)]
                progress[slot] = max(progress[slot], batch.next_offset)
        result.ended = time.monotonic()
        result.cpu_s = time.process_time() - cpu_started
    finally:
        await consumer.shutdown()
    return result


def _run_in_loop(coro: Any) -> ClientResult:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and sets ``stop``
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        result: ClientResult = runner.run(coro)
    return result


def produce_process(
    spec: ProduceSpec, ready: Queue[int], start: Event, stop: Event, results: Queue[ClientResult]
) -> None:
    """A producer process's body: sends batches of ``spec.size`` bytes, puts a ClientResult."""
    try:
        results.put(_run_in_loop(_produce(spec, ready, start, stop)))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which prints it
        results.put(ClientResult(os.getpid(), 0, 0, 1, 0.0, 0.0, 0.0, f"{type(exc).__name__}: {exc}"))


def consume_process(
    spec: ConsumeSpec,
    progress: Any,
    ready: Queue[int],
    start: Event,
    stop: Event,
    results: Queue[ClientResult],
) -> None:
    """A consumer process's body: reads the group's share of the backlog, puts a ClientResult.

    ``progress`` is a shared array of next offsets, one slot per queue (see ``spec.queue_index``).
    """
    try:
        results.put(_run_in_loop(_consume(spec, progress, ready, start, stop)))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which prints it
        results.put(ClientResult(os.getpid(), 0, 0, 1, 0.0, 0.0, 0.0, f"{type(exc).__name__}: {exc}"))
