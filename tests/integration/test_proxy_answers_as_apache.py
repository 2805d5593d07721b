"""Answers of the gRPC proxy, with a broker behind it, that the gRPC oracle
(tests/oracle/test_oracle_grpc.py) found to differ from Apache's 5.x proxy: each test is named
after the behaviour. One name server and one ``broker --enable-proxy`` for the module.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest

from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy._pb import service_pb2_grpc as spb_grpc
from tests.support.processes import (
    ServerProcess,
    broker_conf,
    create_topic,
    free_ports,
    start_namesrv,
    start_on_free_ports,
    wait_route,
    write_conf,
)

CLIENT = (("x-mq-client-id", "host@1@0@apache-parity"), ("x-mq-client-version", "5.1.2"))
TOPIC = "ApacheParity"


@pytest.fixture(scope="module")
def grpc_addr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp_path: Path = tmp_path_factory.mktemp("parity")
    namesrv = start_namesrv(tmp_path)

    def build() -> ServerProcess:
        broker_port, grpc_port = free_ports(2)
        conf = broker_conf(
            tmp_path,
            "broker-a",
            namesrv.addr,
            broker_port,
            grpcServerPort=grpc_port,
            grpcBindAddress="127.0.0.1",
        )
        conf_path = write_conf(tmp_path / "broker.conf", conf)
        args = [sys.executable, "-m", "orbitmq.cli", "broker", "-c", str(conf_path), "--enable-proxy"]
        return ServerProcess(
            "broker", args, broker_port, tmp_path / "broker", tmp_path / "broker.log", extra_ports=[grpc_port]
        )

    broker = None
    try:
        broker = start_on_free_ports(build)
        create_topic(broker.addr, TOPIC, 1)
        wait_route(namesrv.addr, TOPIC, {"broker-a"})
        yield f"127.0.0.1:{broker.extra_ports[0]}"
    finally:
        if broker is not None:
            broker.stop()
        namesrv.stop()


@pytest.fixture
async def stub(grpc_addr: str) -> AsyncIterator[spb_grpc.MessagingServiceStub]:
    async with grpc.aio.insecure_channel(grpc_addr) as channel:
        yield spb_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]


async def test_proxy_send_entry_of_a_normal_message_carries_a_transaction_id(
    stub: spb_grpc.MessagingServiceStub,
) -> None:
    message = pb.Message(
        topic=pb.Resource(name=TOPIC),
        system_properties=pb.SystemProperties(message_id="01PARITY0001", message_type=pb.NORMAL),
        body=b"x",
    )
    sent = await stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=CLIENT, timeout=10)
    assert sent.status.code == pb.OK
    assert sent.entries[0].transaction_id


async def test_proxy_query_assignment_queues_name_no_message_types(
    stub: spb_grpc.MessagingServiceStub,
) -> None:
    request = spb.QueryAssignmentRequest(topic=pb.Resource(name=TOPIC), group=pb.Resource(name="CG_PARITY"))
    answer = await stub.QueryAssignment(request, metadata=CLIENT, timeout=10)
    assert answer.status.code == pb.OK and answer.assignments
    assert [list(a.message_queue.accept_message_types) for a in answer.assignments] == [[]]


async def test_proxy_consumer_settings_state_apache_lite_quotas(stub: spb_grpc.MessagingServiceStub) -> None:
    settings = pb.Settings(
        client_type=pb.SIMPLE_CONSUMER,
        subscription=pb.Subscription(
            group=pb.Resource(name="CG_PARITY"),
            subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name=TOPIC))],
        ),
    )

    async def commands() -> AsyncIterator[spb.TelemetryCommand]:
        yield spb.TelemetryCommand(settings=settings)

    stream = stub.Telemetry(commands(), metadata=CLIENT, timeout=20)
    answer = await stream.read()
    stream.cancel()
    assert answer.status.code == pb.OK
    assert answer.settings.subscription.lite_subscription_quota == 2000
    assert answer.settings.subscription.max_lite_topic_size == 64
