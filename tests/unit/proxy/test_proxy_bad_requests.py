"""The gRPC port refuses bad requests as the remoting port does: the right code, one log line.

A real grpc.aio server with the servicer and no broker (the name server address points
nowhere); requests go through a raw channel, malformed bodies through ``unary_unary`` with
identity serializers, so the bytes on the wire are exactly the test's.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc
import pytest

from orbitmq.proxy import ProxyApp, ProxyConfig
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy._pb import service_pb2_grpc as spb_grpc

CLIENT = (("x-mq-client-id", "host@1@0@test"), ("x-mq-client-version", "5.1.2"))
MAX_MESSAGE_SIZE = 64 * 1024
SERVICE = "/apache.rocketmq.v2.MessagingService/"


@pytest.fixture
async def proxy() -> AsyncIterator[ProxyApp]:
    config = ProxyConfig(
        namesrv_addr=("127.0.0.1:1",),
        grpc_server_port=0,
        grpc_bind_address="127.0.0.1",
        max_message_size_bytes=MAX_MESSAGE_SIZE,
    )
    app = ProxyApp(config)
    await app.startup()
    try:
        yield app
    finally:
        await app.shutdown()


def _identity(data: bytes) -> bytes:
    return data


async def test_proxy_malformed_body_answers_bad_request_in_one_log_line(
    proxy: ProxyApp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{proxy.port}") as channel:
        for rpc, response_type in (
            ("SendMessage", spb.SendMessageResponse),
            ("QueryRoute", spb.QueryRouteResponse),
            ("AckMessage", spb.AckMessageResponse),
        ):
            call = channel.unary_unary(
                SERVICE + rpc, request_serializer=_identity, response_deserializer=_identity
            )
            for _ in range(20):
                # A field header announcing 2^64-1 bytes: no protobuf decoder accepts it.
                answer = response_type.FromString(await call(b"\x0a\xff\xff\xff\xff\xff", metadata=CLIENT))
                assert answer.status.code == pb.BAD_REQUEST, answer.status
                assert rpc in answer.status.message
        receive = channel.unary_stream(
            SERVICE + "ReceiveMessage", request_serializer=_identity, response_deserializer=_identity
        )
        answers = [
            spb.ReceiveMessageResponse.FromString(data)
            async for data in receive(b"\x0a\xff", metadata=CLIENT)
        ]
        assert [answer.status.code for answer in answers] == [pb.BAD_REQUEST]
    lines = [record for record in caplog.records if record.levelno >= logging.WARNING]
    # One line per RPC per interval, never a traceback.
    assert len(lines) <= 4, [record.getMessage() for record in lines]
    assert not any(record.exc_info for record in caplog.records)
    assert "Traceback" not in caplog.text


async def test_proxy_telemetry_answers_a_malformed_command_and_keeps_the_stream(proxy: ProxyApp) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{proxy.port}") as channel:
        telemetry = channel.stream_stream(
            SERVICE + "Telemetry", request_serializer=_identity, response_deserializer=_identity
        )
        settings = spb.TelemetryCommand(
            settings=pb.Settings(
                client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="T")])
            )
        ).SerializeToString()
        stream = telemetry(metadata=CLIENT)
        await stream.write(b"\x0a\xff\xff")
        refused = spb.TelemetryCommand.FromString(await stream.read())
        assert refused.status.code == pb.BAD_REQUEST
        await stream.write(settings)
        answered = spb.TelemetryCommand.FromString(await stream.read())
        assert answered.status.code == pb.OK and answered.HasField("settings")
        await stream.done_writing()


async def test_proxy_request_past_the_receive_limit_is_refused_before_it_is_read(proxy: ProxyApp) -> None:
    async with grpc.aio.insecure_channel(
        f"127.0.0.1:{proxy.port}", options=[("grpc.max_send_message_length", -1)]
    ) as channel:
        stub = spb_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]

        def send(body_bytes: int) -> spb.SendMessageRequest:
            message = pb.Message(
                topic=pb.Resource(name="T"),
                body=b"b" * body_bytes,
                system_properties=pb.SystemProperties(message_id="01", body_encoding=pb.IDENTITY),
            )
            return spb.SendMessageRequest(messages=[message])

        # Just past maxMessageSize: decoded and refused in-band.
        answer = await stub.SendMessage(send(MAX_MESSAGE_SIZE + 1), metadata=CLIENT)
        assert answer.status.code == pb.MESSAGE_BODY_TOO_LARGE
        # Far past it: grpc refuses from the length prefix (the Java proxy's limit was 130 MiB).
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(send(8 * 1024 * 1024), metadata=CLIENT)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize(
    "handle",
    [
        f"0 1 60000 0 0 broker-a 0 {2**70} 100",  # a queue offset past int64
        f"0 1 60000 0 0 broker-a {2**40} 0 100",  # a queue id past int32
        "0 1 60000 0 0 ../../x 0 0 100",  # not a broker name
        "0 1 60000 0 0 no-such-broker 0 0 100",  # a broker no route has
    ],
)
async def test_proxy_bad_receipt_handle_answers_invalid_receipt_handle(proxy: ProxyApp, handle: str) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{proxy.port}") as channel:
        stub = spb_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        resources = {"group": pb.Resource(name="CG"), "topic": pb.Resource(name="T")}
        ack = await stub.AckMessage(
            spb.AckMessageRequest(
                entries=[spb.AckMessageEntry(message_id="m", receipt_handle=handle)], **resources
            ),
            metadata=CLIENT,
        )
        assert ack.status.code == pb.INVALID_RECEIPT_HANDLE, ack.status
        change = await stub.ChangeInvisibleDuration(
            spb.ChangeInvisibleDurationRequest(receipt_handle=handle, message_id="m", **resources),
            metadata=CLIENT,
        )
        assert change.status.code == pb.INVALID_RECEIPT_HANDLE, change.status
        forward = await stub.ForwardMessageToDeadLetterQueue(
            spb.ForwardMessageToDeadLetterQueueRequest(receipt_handle=handle, message_id="m", **resources),
            metadata=CLIENT,
        )
        assert forward.status.code == pb.INVALID_RECEIPT_HANDLE, forward.status


async def test_proxy_resource_namespace_outside_the_name_rule_answers_illegal_topic(proxy: ProxyApp) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{proxy.port}") as channel:
        stub = spb_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        topic = pb.Resource(name="T", resource_namespace="ünïcødé/x")
        route = await stub.QueryRoute(spb.QueryRouteRequest(topic=topic), metadata=CLIENT)
        assert route.status.code == pb.ILLEGAL_TOPIC, route.status
        assignment = await stub.QueryAssignment(
            spb.QueryAssignmentRequest(
                topic=pb.Resource(name="T"), group=pb.Resource(name="G", resource_namespace="a b")
            ),
            metadata=CLIENT,
        )
        assert assignment.status.code == pb.ILLEGAL_CONSUMER_GROUP, assignment.status


async def test_proxy_forward_and_recall_check_their_resources_first(proxy: ProxyApp) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{proxy.port}") as channel:
        stub = spb_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        forward = await stub.ForwardMessageToDeadLetterQueue(
            spb.ForwardMessageToDeadLetterQueueRequest(
                group=pb.Resource(name=""),
                topic=pb.Resource(name="T"),
                receipt_handle="0 1 60000 0 0 broker-a 0 0 100",
                message_id="m",
            ),
            metadata=CLIENT,
        )
        assert forward.status.code == pb.ILLEGAL_CONSUMER_GROUP, forward.status
        recall = await stub.RecallMessage(
            spb.RecallMessageRequest(topic=pb.Resource(name="\x00\x01"), recall_handle="h"), metadata=CLIENT
        )
        assert recall.status.code == pb.ILLEGAL_TOPIC, recall.status
