"""``bench consume --compare-defaults``'s Java line: Apache's DefaultMQPushConsumer (5.5.0) at its
defaults, built and run by the benchmark itself, reads a backlog from OrbitMQ to its end.

Method: the tier's shared standalone; a topic of 4 queues prefilled with 2,000 messages by
OrbitMQ's producer; ``orbitmq.bench._java_consume.java_push_consume`` compiles its driver into
``.cache/bench-java`` and runs it in a JVM (skipped without a JDK and Maven, as the tier is).
"""

from __future__ import annotations

import asyncio

import pytest

from orbitmq.bench._java_consume import java_push_consume
from orbitmq.client.producer import Producer
from orbitmq.model.message import Message
from tests.support.interop_java import tools_available
from tests.support.processes import ServerProcess, create_topic, wait_route

BACKLOG = 2_000


def _prefill(namesrv: str, topic: str) -> None:
    async def send() -> None:
        producer = Producer("bench-java-prefill", namesrv)
        await producer.start()
        try:
            for _batch in range(BACKLOG // 200):
                await producer.send_batch([Message(topic, b"x" * 100) for _ in range(200)])
        finally:
            await producer.shutdown()

    asyncio.run(send())


def test_bench_java_push_defaults_reads_the_whole_backlog(server: ServerProcess) -> None:
    missing = tools_available()
    if missing:
        pytest.skip(f"the Java line needs a JDK and Maven: {missing} not on PATH")
    topic = "BenchJavaDefaults"
    create_topic(f"127.0.0.1:{server.extra_ports[0]}", topic, queues=4)
    wait_route(server.addr, topic, {"broker-a"})
    _prefill(server.addr, topic)

    result = java_push_consume(server.addr, topic, "bench-java-defaults", BACKLOG, timeout_s=60)

    assert not result.skipped, result.skipped
    assert result.count == BACKLOG
    assert result.started < result.first <= result.last
    assert result.cpu_s > 0
