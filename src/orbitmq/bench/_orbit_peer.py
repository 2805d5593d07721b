"""The OrbitMQ peer of ``bench compare``: the same workload through OrbitMQ's own client, as
its documentation recommends.

Produce is :meth:`Producer.send_batch` of ``batch`` messages with several batches in flight
(each acknowledged once stored); consume is a :class:`PushConsumer` from the first offset, and
a :class:`PullConsumer` poll loop, each in a fresh consumer group and timed from its
construction (start-up and first rebalance included) to the last message; latency is
sequential :meth:`Producer.send` calls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from orbitmq.bench._peers import Phase
from orbitmq.client.producer import Producer
from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.client.push_consumer import ConsumeResult, PushConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import Message, MessageExt

__all__ = ["orbit_consume_pull", "orbit_consume_push", "orbit_produce", "orbit_sync_latency"]

CONSUME_TIMEOUT_S = 120.0
ServerCpu = Callable[[], float]


async def orbit_produce(
    producer: Producer, topic: str, count: int, body: bytes, batch: int, in_flight: int, cpu: ServerCpu
) -> Phase:
    """``count`` messages of ``body`` in ``send_batch`` calls of ``batch``, ``in_flight`` at a time."""
    phase = Phase.begin(cpu())
    chunks = iter(range(0, count, batch))

    async def sender() -> None:
        for start in chunks:
            size = min(batch, count - start)
            results = await producer.send_batch([Message(topic, body) for _ in range(size)])
            if len(results) != size:
                raise RuntimeError(f"send_batch answered {len(results)} of {size}")
            phase.add(size, size * len(body))

    await asyncio.gather(*(sender() for _ in range(in_flight)))
    return phase.end(cpu())


async def orbit_consume_push(namesrv: str, topic: str, group: str, count: int, cpu: ServerCpu) -> Phase:
    """A PushConsumer from the first offset with a listener that counts; until ``count``."""
    phase = Phase.begin(cpu())
    done = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        phase.add(len(messages), sum(len(message.body) for message in messages))
        if phase.count >= count:
            done.set()
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        group,
        namesrv,
        listener,
        pull_batch_size=1024,
        consume_message_batch_max_size=256,
        consume_thread_min=1,
        consume_thread_max=4,
        pull_threshold_for_queue=4096,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), CONSUME_TIMEOUT_S)
    except TimeoutError:
        pass
    phase.end(cpu())
    await consumer.shutdown()
    return phase


async def orbit_consume_pull(namesrv: str, topic: str, group: str, count: int, cpu: ServerCpu) -> Phase:
    """A PullConsumer from the first offset polled in a loop until ``count`` messages."""
    phase = Phase.begin(cpu())
    consumer = PullConsumer(
        group,
        namesrv,
        pull_batch_size=1000,
        pull_threshold_for_queue=4000,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    await consumer.subscribe(topic)
    await consumer.start()
    deadline = time.monotonic() + CONSUME_TIMEOUT_S
    try:
        while phase.count < count and time.monotonic() < deadline:
            messages = await consumer.poll(500)
            phase.add(len(messages), sum(len(message.body) for message in messages))
        phase.end(cpu())
    finally:
        await consumer.shutdown()
    return phase


async def orbit_sync_latency(producer: Producer, topic: str, count: int, body: bytes) -> list[float]:
    """Round trips (ms) of ``count`` sequential sends, each awaited before the next."""
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        await producer.send(Message(topic, body))
        samples.append((time.perf_counter() - started) * 1000)
    return samples
