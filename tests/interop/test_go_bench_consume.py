"""``bench consume --compare-defaults``'s Go line: Apache's Go client (rocketmq-client-go/v2) as a
push consumer at its defaults, built and run by the benchmark itself, reads a backlog from
OrbitMQ to its end.

Method: the tier's shared standalone; a topic of 4 queues prefilled with 2,000 messages by
OrbitMQ's producer; ``orbitmq.bench._go_consume.go_push_consume`` builds its driver into
``.cache/bench-go`` and runs it (skipped without go on PATH, as the tier's Go tests are). The
one-time build takes about 2 s once the tier's own Go driver is built (36 s of CPU from cold).
"""

from __future__ import annotations

import time

import pytest

from orbitmq.bench._go_consume import go_push_consume
from tests.interop.test_java_bench_consume import BACKLOG, _prefill
from tests.support.interop_go import go_available, go_driver
from tests.support.processes import ServerProcess, create_topic, wait_route


def test_bench_go_push_defaults_reads_the_whole_backlog(server: ServerProcess) -> None:
    if go_available():
        pytest.skip("the Go line needs go on PATH")
    # The tier's Go driver first (the session's warm-up may be building it now): the two share
    # the build cache, so the benchmark's driver then compiles only its own package.
    go_driver()
    topic = "BenchGoDefaults"
    create_topic(f"127.0.0.1:{server.extra_ports[0]}", topic, queues=4)
    wait_route(server.addr, topic, {"broker-a"})
    _prefill(server.addr, topic)

    before = time.monotonic()
    result = go_push_consume(server.addr, topic, "bench-go-defaults", BACKLOG, timeout_s=60)

    assert not result.skipped, result.skipped
    assert result.count == BACKLOG
    # The driver's clock is the one time.monotonic reads.
    assert before < result.started < result.first <= result.last < time.monotonic()
    assert result.cpu_s > 0
