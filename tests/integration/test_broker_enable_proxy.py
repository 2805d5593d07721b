"""``orbitmq broker --enable-proxy``: the gRPC proxy in the broker's process (local mode).

Goal: the flag and ``grpcServerPort`` from broker.conf bring the MessagingService up beside a
broker registered with a name server; a gRPC send lands in the broker's store and a 4.x-style
pull reads it. A raw gRPC client (the proxy's stubs) is enough here; the SDK tests cover the
SDK itself.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import grpc

from orbitmq.client.blocking import BlockingPullConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy._pb import service_pb2_grpc as spb_grpc
from tests.support.processes import (
    ServerProcess,
    broker_conf,
    create_topic,
    free_ports,
    start_namesrv,
    wait_route,
    write_conf,
)

CLIENT = (("x-mq-client-id", "host@1@0@local"),)


def test_broker_enable_proxy_serves_grpc_from_the_broker_process(tmp_path: Path) -> None:
    namesrv = start_namesrv(tmp_path)
    broker_port, grpc_port = free_ports(2)
    conf = broker_conf(
        tmp_path, "broker-a", namesrv.addr, broker_port, grpcServerPort=grpc_port, grpcBindAddress="127.0.0.1"
    )
    conf_path = write_conf(tmp_path / "broker.conf", conf)
    args = [sys.executable, "-m", "orbitmq.cli", "broker", "-c", str(conf_path), "--enable-proxy"]
    broker = ServerProcess("broker", args, broker_port, tmp_path / "broker", tmp_path / "broker.log",
                           extra_ports=[grpc_port])  # fmt: skip
    try:
        broker.start()
        create_topic(broker.addr, "LocalMode", 2)
        wait_route(namesrv.addr, "LocalMode", {"broker-a"})
        route, sent = asyncio.run(_route_and_send(f"127.0.0.1:{grpc_port}"))
        assert route.status.code == pb.OK
        assert {(q.broker.name, q.id, q.permission) for q in route.message_queues} == {
            ("broker-a", 0, pb.READ_WRITE),
            ("broker-a", 1, pb.READ_WRITE),
        }
        assert sent.status.code == pb.OK and sent.entries[0].message_id == "LOCAL0001"
        with BlockingPullConsumer(
            "CG_LOCAL", namesrv.addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        ) as puller:
            puller.subscribe("LocalMode", "*")
            pulled = []
            for _ in range(40):
                pulled.extend(puller.poll(timeout_ms=250))
                if pulled:
                    break
        assert [(m.body, m.uniq_key, m.tags) for m in pulled] == [
            (b"through the broker's proxy", "LOCAL0001", "L")
        ]
    finally:
        broker.kill()
        namesrv.kill()


async def _route_and_send(target: str) -> tuple[spb.QueryRouteResponse, spb.SendMessageResponse]:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = spb_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        route = await stub.QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name="LocalMode")), metadata=CLIENT, timeout=10
        )
        message = pb.Message(topic=pb.Resource(name="LocalMode"), body=b"through the broker's proxy")
        message.system_properties.message_id = "LOCAL0001"
        message.system_properties.message_type = pb.NORMAL
        message.system_properties.tag = "L"
        sent = await stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=CLIENT, timeout=10)
        return route, sent
