"""Cluster mode: ``orbitmq proxy`` in its own process in front of a name server and two brokers.

Goal: the proxy needs nothing but the name servers' address: it finds both brokers through
routes, spreads sends over their queues, pops from each broker a receive names, and relays a
broker's transaction check to the 5.x producer that sent the half message.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster
from tests.support.processes import (
    ServerProcess,
    create_topic,
    free_port,
    start_broker,
    start_namesrv,
    wait_route,
    write_conf,
)
from tests.support.sdk5 import Event, Sdk5


def of_kind(events: list[Event], kind: str) -> list[Event]:
    return [event for event in events if event["event"] == kind]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A name server and two brokers that check undecided transactions every second."""
    started: list[ServerProcess] = []
    try:
        namesrv = start_namesrv(tmp_path)
        started.append(namesrv)
        for name in ("broker-a", "broker-b"):
            fast = {
                "transactionCheckInterval": 1000,
                "transactionTimeOut": 1000,
                "enableMixedMessageType": True,
            }
            started.append(start_broker(tmp_path, namesrv.addr, name=name, **fast))
        yield Cluster(namesrv, started[1:])
    finally:
        for process in reversed(started):
            process.kill()


@pytest.fixture
def proxy(cluster: Cluster, tmp_path: Path) -> Iterator[ServerProcess]:
    port = free_port()
    conf = write_conf(tmp_path / "proxy.conf", {"grpcClientConsumerMinLongPollingTimeoutMillis": 1000})
    args = [sys.executable, "-m", "orbitmq.cli", "proxy", "-c", str(conf), "-n", cluster.namesrv_addr,
            "--grpc-port", str(port), "--bind-address", "127.0.0.1"]  # fmt: skip
    process = ServerProcess("proxy", args, port, tmp_path / "proxy", tmp_path / "proxy.log").start()
    try:
        yield process
    finally:
        process.kill()


def test_sdk5_through_a_separate_proxy_reaches_both_brokers(
    cluster: Cluster, proxy: ServerProcess, sdk5_python: Path, tmp_path: Path
) -> None:
    topic = "Sdk5Cluster"
    for broker in cluster.brokers:
        # Plain and transactional messages in one topic: a MIXED one, as RocketMQ 5's proxy requires.
        create_topic(broker.addr, topic, 2, attributes="+message.type=MIXED")
    wait_route(cluster.namesrv_addr, topic, {"broker-a", "broker-b"})
    sdk5 = Sdk5(sdk5_python, proxy.addr, tmp_path / "sdk5-home")
    try:
        sent = sdk5.run("produce", "--topic", topic, "--count", "8")
        assert len(of_kind(sent, "sent")) == 8
        tx = sdk5.run("transaction", "--topic", topic, "--decisions", "orphan", "--wait-s", "30")
        assert len(of_kind(tx, "checked")) == 1
        # One receive names one broker: the SimpleConsumer's round robin over the route's
        # queues reaches both.
        events = sdk5.run("simple", "--topic", topic, "--group", "CG_CLUSTER", "--count", "9",
                          "--await-s", "1", "--max-wait-s", "30")  # fmt: skip
    finally:
        sdk5.kill_all()
    received = of_kind(events, "received")
    # Eight plain messages (seq 0..7) and the checked orphan (seq 0 of the transaction run).
    assert sorted(int(e["seq"]) for e in received) == sorted([*range(8), 0])  # type: ignore[call-overload]
    assert len(of_kind(events, "acked")) == 9
    stored_on = {_broker_of(cluster, e) for e in received}
    assert stored_on == {"broker-a", "broker-b"}


def _broker_of(cluster: Cluster, event: Event) -> str:
    """Which broker stored a message: its message id says nothing, its queue offset neither; ask both."""
    import asyncio

    from orbitmq.protocol.codes import RequestCode, ResponseCode
    from orbitmq.protocol.command import RemotingCommand
    from orbitmq.protocol.headers import QueryMessageRequestHeader
    from orbitmq.transport.connection import RemotingClient

    async def find() -> str:
        client = RemotingClient()
        try:
            for broker in cluster.brokers:
                header = QueryMessageRequestHeader(
                    topic="Sdk5Cluster",
                    key=str(event["message_id"]),
                    max_num=1,
                    begin_timestamp=0,
                    end_timestamp=2**62,
                )
                request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, header.to_ext())
                response = await client.invoke(broker.addr, request, 5_000)
                if response.code == ResponseCode.SUCCESS and response.body:
                    return broker.name
        finally:
            await client.close()
        return "?"

    return asyncio.run(find())
