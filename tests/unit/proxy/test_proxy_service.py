"""The servicer on a real grpc.aio server, with a raw gRPC client: in-band errors and Telemetry.

No broker is needed for these: the name server address points nowhere. The Python SDK ignores
thread-stack and verify commands, so a raw client plays the SDK's part of the protocol here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from orbitmq.proxy import ProxyApp, ProxyConfig
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy._pb import service_pb2_grpc as spb_grpc

CLIENT = (("x-mq-client-id", "host@1@0@test"), ("x-mq-client-version", "5.1.2"))


@pytest.fixture
async def proxy() -> AsyncIterator[ProxyApp]:
    config = ProxyConfig(namesrv_addr=("127.0.0.1:1",), grpc_server_port=0, grpc_bind_address="127.0.0.1")
    app = ProxyApp(config)
    await app.startup()
    try:
        yield app
    finally:
        await app.shutdown()


async def test_proxy_service_errors_are_in_band(proxy: ProxyApp) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{proxy.port}") as channel:
        stub = spb_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        anonymous = await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="T")))
        assert anonymous.status.code == pb.CLIENT_ID_REQUIRED
        illegal = await stub.QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name="bad topic")), metadata=CLIENT
        )
        assert illegal.status.code == pb.ILLEGAL_TOPIC
        unknown = await stub.Heartbeat(spb.HeartbeatRequest(), metadata=CLIENT)
        assert unknown.status.code == pb.UNRECOGNIZED_CLIENT_TYPE
        bad_handle = await stub.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name="CG"), topic=pb.Resource(name="T"),
                entries=[spb.AckMessageEntry(message_id="m", receipt_handle="not a handle")],
            ),
            metadata=CLIENT,
        )  # fmt: skip
        assert bad_handle.status.code == pb.INVALID_RECEIPT_HANDLE
        change = await stub.ChangeInvisibleDuration(
            spb.ChangeInvisibleDurationRequest(
                group=pb.Resource(name="CG"),
                topic=pb.Resource(name="T"),
                receipt_handle="old",
                message_id="m",
            ),
            metadata=CLIENT,
        )
        assert change.status.code == pb.INVALID_RECEIPT_HANDLE and change.receipt_handle == "old"


async def test_proxy_telemetry_answers_settings_and_carries_commands_both_ways(proxy: ProxyApp) -> None:
    outgoing: asyncio.Queue[spb.TelemetryCommand] = asyncio.Queue()

    async def requests() -> AsyncIterator[spb.TelemetryCommand]:
        while True:
            yield await outgoing.get()

    async with grpc.aio.insecure_channel(f"127.0.0.1:{proxy.port}") as channel:
        stub = spb_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        stream = stub.Telemetry(requests(), metadata=CLIENT)
        settings = pb.Settings(
            client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="T")])
        )
        await outgoing.put(spb.TelemetryCommand(settings=settings))
        answer = await stream.read()
        assert answer.status.code == pb.OK
        assert answer.settings.publishing.max_body_size == proxy.config.max_message_size_bytes
        heartbeat = await stub.Heartbeat(spb.HeartbeatRequest(client_type=pb.PRODUCER), metadata=CLIENT)
        assert heartbeat.status.code == pb.OK

        async def client_side() -> None:
            for _ in range(2):
                command = await stream.read()
                if command.HasField("print_thread_stack_trace_command"):
                    nonce = command.print_thread_stack_trace_command.nonce
                    reply = spb.ThreadStackTrace(nonce=nonce, thread_stack_trace="main: waiting")
                    await outgoing.put(spb.TelemetryCommand(thread_stack_trace=reply))
                else:
                    nonce = command.verify_message_command.nonce
                    assert command.verify_message_command.message.body == b"probe"
                    await outgoing.put(
                        spb.TelemetryCommand(
                            status=pb.Status(code=pb.OK),
                            verify_message_result=spb.VerifyMessageResult(nonce=nonce),
                        )
                    )

        client = asyncio.ensure_future(client_side())
        assert await proxy.service.thread_stack_trace("host@1@0@test") == "main: waiting"
        probe = pb.Message(topic=pb.Resource(name="T"), body=b"probe")
        assert await proxy.service.verify_message("host@1@0@test", probe) is True
        await client
        # A client without a stream cannot be asked.
        assert await proxy.service.thread_stack_trace("nobody", timeout_s=0.1) is None
        stream.cancel()
