"""The client-fixed workloads of ``bench peers``: OrbitMQ's Python client against any broker
that speaks RocketMQ's remoting protocol (OrbitMQ's and Apache's), and redis-py against Redis.

Each workload returns plain figures (messages/s, latency samples in ms); the server's CPU is
read around it by the caller. Senders "from N threads" are N concurrent sending tasks on the
client's event loop for OrbitMQ's asyncio client, and N threads with a connection each for
redis-py (blocking). End-to-end latency: the send time (``time.time()``) is written at the
start of each body and the consumer subtracts it from its clock when the message reaches its
listener; the producer keeps to a fixed schedule of ``rate`` messages/s, whatever the replies.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from orbitmq.bench._orbit_peer import orbit_consume_push, orbit_produce
from orbitmq.bench._peers import Phase
from orbitmq.bench._redis_peer import RedisServer, redis_consume_group, redis_produce
from orbitmq.client.producer import Producer
from orbitmq.client.push_consumer import ConsumeResult, PushConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import Message, MessageExt

__all__ = [
    "body_of",
    "orbit_batches",
    "orbit_catch_up",
    "orbit_end_to_end",
    "orbit_senders",
    "redis_batches",
    "redis_catch_up",
    "redis_end_to_end",
    "redis_senders",
]

ServerCpu = Callable[[], float]
_FIELD = b"d"
_WARM_UP_TIMEOUT_S = 60.0


def body_of(size: int) -> bytes:
    return (b"x" * size)[:size]


def _stamped(size: int) -> bytes:
    stamp = repr(time.time()).encode()
    return (stamp + b" " + b"x" * size)[: max(size, len(stamp))]


def _age_ms(body: bytes) -> float:
    return (time.time() - float(body.split(b" ", 1)[0])) * 1000


# --- OrbitMQ's client -------------------------------------------------------------------------


async def orbit_batches(
    producer: Producer, topic: str, count: int, size: int, batch: int, in_flight: int, cpu: ServerCpu
) -> Phase:
    return await orbit_produce(producer, topic, count, body_of(size), batch, in_flight, cpu)


async def orbit_senders(
    producer: Producer, topic: str, senders: int, seconds: float, size: int
) -> tuple[float, list[float]]:
    """``senders`` tasks each awaiting one ``send`` after another for ``seconds``: msgs/s and round trips (ms)."""
    body = body_of(size)
    samples: list[float] = []
    deadline = time.perf_counter() + seconds

    async def sender() -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await producer.send(Message(topic, body))
            samples.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(senders)))
    return len(samples) / (time.perf_counter() - started), sorted(samples)


async def orbit_catch_up(namesrv: str, topic: str, group: str, count: int, cpu: ServerCpu) -> Phase:
    """The tuned PushConsumer of ``bench compare`` from the first offset, ``count`` messages of backlog."""
    return await orbit_consume_push(namesrv, topic, group, count, cpu)


async def orbit_end_to_end(
    producer: Producer, namesrv: str, topic: str, group: str, rate: int, seconds: float, size: int
) -> list[float]:
    """Send to listener (ms) of ``rate`` msgs/s for ``seconds``, a PushConsumer at its defaults."""
    samples: list[float] = []
    measuring = False
    warmed = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        for message in messages:
            if message.body.startswith(b"warm"):
                warmed.set()
            elif measuring:
                samples.append(_age_ms(message.body))
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        group, namesrv, listener, consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    )
    consumer.subscribe(topic)
    await consumer.start()
    try:
        # Until the consumer holds every queue and pulls: warm-up messages until one arrives.
        deadline = time.monotonic() + _WARM_UP_TIMEOUT_S
        while not warmed.is_set() and time.monotonic() < deadline:
            await producer.send(Message(topic, b"warm"))
            try:
                await asyncio.wait_for(warmed.wait(), 0.5)
            except TimeoutError:
                pass
        await asyncio.sleep(1.0)  # every queue's first pull answered
        measuring = True
        total = int(rate * seconds)
        pending: set[asyncio.Task[Any]] = set()
        started = time.perf_counter()
        for index in range(total):
            delay = started + index / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(producer.send(Message(topic, _stamped(size))))
            pending.add(task)
            task.add_done_callback(pending.discard)
        if pending:
            await asyncio.gather(*pending)
        deadline = time.monotonic() + 10
        while len(samples) < total and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        await consumer.shutdown()
    return sorted(samples)


# --- redis-py ---------------------------------------------------------------------------------


def redis_batches(server: RedisServer, key: str, count: int, size: int, batch: int) -> Phase:
    return redis_produce(server, key, count, body_of(size), batch)


def redis_senders(
    server: RedisServer, key: str, senders: int, seconds: float, size: int
) -> tuple[float, list[float]]:
    """``senders`` threads, a connection each, one XADD after another for ``seconds``."""
    body = body_of(size)
    samples: list[list[float]] = [[] for _ in range(senders)]
    deadline = time.perf_counter() + seconds

    def sender(out: list[float]) -> None:
        with server.client() as client:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                client.xadd(key, {_FIELD: body})
                out.append((time.perf_counter() - started) * 1000)

    threads = [threading.Thread(target=sender, args=(out,)) for out in samples]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    merged = sorted(value for out in samples for value in out)
    with server.client() as client:
        client.delete(key)
    return len(merged) / elapsed, merged


def redis_catch_up(server: RedisServer, key: str, count: int, read_count: int) -> Phase:
    """XREADGROUP (one XACK per batch) over ``count`` entries of backlog, a new group."""
    return redis_consume_group(server, key, "catch-up", count, read_count)


def redis_end_to_end(server: RedisServer, key: str, rate: int, seconds: float, size: int) -> list[float]:
    """XADD at ``rate``/s for ``seconds``; a blocking XREAD in another thread measures each entry's age."""
    samples: list[float] = []
    total = int(rate * seconds)
    ready = threading.Event()

    def reader() -> None:
        with server.client() as client:
            last_id: Any = "$"
            ready.set()
            deadline = time.monotonic() + seconds + 15
            while len(samples) < total and time.monotonic() < deadline:
                for _, entries in client.xread({key: last_id}, count=1000, block=500):
                    for entry_id, fields in entries:
                        samples.append(_age_ms(fields[_FIELD]))
                        last_id = entry_id

    thread = threading.Thread(target=reader)
    thread.start()
    ready.wait()
    time.sleep(0.2)
    with server.client() as client:
        started = time.perf_counter()
        for index in range(total):
            delay = started + index / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            client.xadd(key, {_FIELD: _stamped(size)})
    thread.join()
    with server.client() as client:
        client.delete(key)
    return sorted(samples)
