"""Producer fail-over against real processes: a dead name server is skipped, and a send whose
broker is gone is retried on the other broker of the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbitmq.client import Producer, SendStatus
from orbitmq.errors import ConnectError
from orbitmq.model.message import Message
from tests.integration.client.test_producer import create_topic
from tests.integration.conftest import Cluster
from tests.support.processes import start_broker, start_namesrv

pytestmark = pytest.mark.integration


async def test_producer_fails_over_to_next_name_server(tmp_path: Path) -> None:
    started = []
    try:
        first = start_namesrv(tmp_path, "namesrv-1")
        started.append(first)
        second = start_namesrv(tmp_path, "namesrv-2")
        started.append(second)
        namesrv_addr = f"{first.addr};{second.addr}"
        started.append(start_broker(tmp_path, namesrv_addr))
        await create_topic(second.addr, "FailoverTopic", 2)
        first.kill()
        async with Producer("PG_NS_FAILOVER", namesrv_addr) as producer:
            instance = producer._instance
            assert instance is not None
            instance._namesrv_index = 0  # start at the dead name server
            result = await producer.send(Message("FailoverTopic", b"x"))
            assert result.status is SendStatus.OK
            assert instance._namesrv_index == 1
    finally:
        for proc in reversed(started):
            proc.kill()


async def test_producer_retries_on_other_broker_when_one_is_down(cluster: Cluster) -> None:
    await create_topic(cluster.namesrv_addr, "RetryTopic", 2, broker_count=2)
    async with Producer("PG_RETRY", cluster.namesrv_addr, retry_times_when_send_failed=2) as producer:
        first = [await producer.send(Message("RetryTopic", b"warm%d" % i)) for i in range(4)]
        assert {r.message_queue.broker_name for r in first} == {"broker-a", "broker-b"}
        cluster.brokers[0].kill()
        results = [await producer.send(Message("RetryTopic", b"m%d" % i)) for i in range(10)]
    assert {r.status for r in results} == {SendStatus.OK}
    assert {r.message_queue.broker_name for r in results} == {"broker-b"}


async def test_producer_without_retries_surfaces_broker_failure(cluster: Cluster) -> None:
    await create_topic(cluster.namesrv_addr, "NoRetryTopic", 1, broker_count=2)
    async with Producer("PG_NORETRY", cluster.namesrv_addr, retry_times_when_send_failed=0) as producer:
        await producer.send(Message("NoRetryTopic", b"warm"))
        cluster.brokers[0].kill()
        outcomes = []
        for i in range(4):
            try:
                outcomes.append(
                    (await producer.send(Message("NoRetryTopic", b"m%d" % i))).message_queue.broker_name
                )
            except ConnectError:
                outcomes.append("failed")
    assert "failed" in outcomes and "broker-b" in outcomes
