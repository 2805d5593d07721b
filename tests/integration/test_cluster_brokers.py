"""``orbitmq cluster --brokers N``: N independent broker processes, one topic spread over all.

Method: run ``orbitmq cluster --brokers 2 --topic T --queues 2`` as a child on free ports with
its data in a temporary directory and wait for its table; two distinct broker processes are
listed and the route of T has 2 writable queues on each broker. Two pull consumers of one group
are started first and rebalanced until they hold all 4 queues between them; then the producer
sends 40 messages with distinct bodies: they must land on both brokers (round-robin over every
broker's queues), and the group must read each body exactly once. SIGINT stops everything.
"""

from __future__ import annotations

import asyncio
import collections
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orbitmq.cli.cluster import main as cluster_main
from orbitmq.client import Message
from orbitmq.client.admin import AdminClient
from orbitmq.client.producer import Producer
from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from tests.support.processes import free_port, free_port_block

pytestmark = pytest.mark.integration

_TOPIC = "ClusterBrokersTopic"
_MESSAGES = 40


async def _spread_and_read(namesrv: str) -> None:
    async with AdminClient(namesrv) as admin:
        route = await admin.topic_route(_TOPIC)
    assert sorted((data.broker_name, data.write_queue_nums) for data in route.queue_datas) == [
        ("broker-a", 2),
        ("broker-b", 2),
    ]
    consumers = [
        PullConsumer(
            "CG_CLUSTER_BROKERS",
            namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            instance_name=f"brokers-{index}",
        )
        for index in range(2)
    ]
    for consumer in consumers:
        await consumer.subscribe(_TOPIC)
        await consumer.start()
    try:
        deadline = time.monotonic() + 15
        while True:
            for consumer in consumers:
                await consumer.rebalance()
            held = [set(consumer.assignment()) for consumer in consumers]
            if all(held) and not held[0] & held[1] and len(held[0] | held[1]) == 4:
                break
            assert time.monotonic() < deadline, f"the group never divided the 4 queues: {held}"
            await asyncio.sleep(0.1)
        assert {queue.broker_name for queue in held[0] | held[1]} == {"broker-a", "broker-b"}
        async with Producer("PG_CLUSTER_BROKERS", namesrv) as producer:
            results = [
                await producer.send(Message(_TOPIC, f"m-{index}".encode())) for index in range(_MESSAGES)
            ]
        landed = collections.Counter(result.message_queue.broker_name for result in results)
        assert landed == {"broker-a": _MESSAGES // 2, "broker-b": _MESSAGES // 2}
        read: collections.Counter[bytes] = collections.Counter()
        deadline = time.monotonic() + 15
        while sum(read.values()) < _MESSAGES and time.monotonic() < deadline:
            for consumer in consumers:
                read.update(message.body for message in await consumer.poll(100))
        await asyncio.sleep(0.5)  # anything read twice would come now
        for consumer in consumers:
            read.update(message.body for message in await consumer.poll(0))
        assert read == {f"m-{index}".encode(): 1 for index in range(_MESSAGES)}
    finally:
        for consumer in consumers:
            await consumer.shutdown()


def test_cluster_brokers_spreads_a_topic_and_its_group_over_every_broker(tmp_path: Path) -> None:
    namesrv_port, base_port = free_port(), free_port_block(4)
    out_path = tmp_path / "cluster.out"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "orbitmq.cli", "cluster", "--brokers", "2", "--topic", _TOPIC,
             "--queues", "2", "--data-dir", str(tmp_path / "data"), "--namesrv-port", str(namesrv_port),
             "--base-port", str(base_port), "--broker-conf", f"mapedFileSizeCommitLog={4 << 20}"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "Ctrl-C stops the cluster" not in out_path.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, out_path.read_text()
            time.sleep(0.1)
        table = out_path.read_text()
        masters = re.findall(
            r"^broker-(\w) master\s+ASYNC_MASTER\s+127\.0\.0\.1:(\d+)\s+\S+\s+(\d+)$", table, re.M
        )
        assert [(name, int(port)) for name, port, _ in masters] == [("a", base_port), ("b", base_port + 2)]
        assert len({pid for _, _, pid in masters}) == 2
        assert f"topic {_TOPIC}: 2 queues on each of 2 broker(s)" in table
        assert "brokerRole=ASYNC_MASTER" in (tmp_path / "data" / "broker-b" / "0" / "broker.conf").read_text()
        asyncio.run(_spread_and_read(f"127.0.0.1:{namesrv_port}"))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        assert "stopped 3 processes" in out_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cluster_brokers_refuses_slaves_and_sync_role(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for extra, problem in (
        (["--slaves", "1"], "--brokers is a layout of its own: give it without --slaves"),
        (["--role", "sync"], "--brokers runs brokers without slaves, which a SYNC_MASTER needs"),
        (["--queues", "0"], "--queues must be at least 1"),
    ):
        assert cluster_main(["--brokers", "2", *extra, "--data-dir", str(tmp_path / "data")]) == 2
        assert problem in capsys.readouterr().err
