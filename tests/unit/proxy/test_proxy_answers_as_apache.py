"""Answers of the servicer that the gRPC oracle (tests/oracle/test_oracle_grpc.py) found to differ
from Apache's 5.x proxy, pinned here without a JVM: each test is named after the behaviour.

No broker is needed: the name server address points nowhere.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from orbitmq.model.message import MessageExt, SysFlag
from orbitmq.proxy import ProxyApp, ProxyConfig
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy._pb import service_pb2_grpc as spb_grpc
from orbitmq.proxy.convert import stored_to_grpc

CLIENT = (("x-mq-client-id", "host@1@0@apache-parity"), ("x-mq-client-version", "5.1.2"))


@pytest.fixture
async def stub() -> AsyncIterator[spb_grpc.MessagingServiceStub]:
    config = ProxyConfig(namesrv_addr=("127.0.0.1:1",), grpc_server_port=0, grpc_bind_address="127.0.0.1")
    app = ProxyApp(config)
    await app.startup()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            yield spb_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    finally:
        await app.shutdown()


async def test_proxy_heartbeat_without_settings_is_unrecognized_whatever_its_client_type(
    stub: spb_grpc.MessagingServiceStub,
) -> None:
    for client_type in (pb.PRODUCER, pb.SIMPLE_CONSUMER, pb.PUSH_CONSUMER):
        request = spb.HeartbeatRequest(group=pb.Resource(name="CG"), client_type=client_type)
        answer = await stub.Heartbeat(request, metadata=CLIENT)
        assert answer.status.code == pb.UNRECOGNIZED_CLIENT_TYPE, client_type


async def test_proxy_receive_stream_ends_with_a_delivery_timestamp_whatever_its_status(
    stub: spb_grpc.MessagingServiceStub,
) -> None:
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=""),
        message_queue=pb.MessageQueue(topic=pb.Resource(name="T"), id=-1, broker=pb.Broker(name="broker-a")),
        batch_size=1,
        invisible_duration=Duration(seconds=30),
    )
    frames = [frame async for frame in stub.ReceiveMessage(request, metadata=CLIENT, timeout=10)]
    assert [frame.WhichOneof("content") for frame in frames] == ["status", "delivery_timestamp"]
    assert frames[0].status.code == pb.ILLEGAL_CONSUMER_GROUP


async def test_proxy_send_of_no_message_is_message_corrupted(stub: spb_grpc.MessagingServiceStub) -> None:
    answer = await stub.SendMessage(spb.SendMessageRequest(), metadata=CLIENT)
    assert answer.status.code == pb.MESSAGE_CORRUPTED


async def test_proxy_send_none_of_whose_messages_is_valid_fails_as_a_whole_without_entries(
    stub: spb_grpc.MessagingServiceStub,
) -> None:
    message = pb.Message(
        topic=pb.Resource(name="bad topic"),
        system_properties=pb.SystemProperties(message_id="01AB", message_type=pb.NORMAL),
        body=b"x",
    )
    answer = await stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=CLIENT)
    assert answer.status.code == pb.ILLEGAL_TOPIC
    assert len(answer.entries) == 0


@pytest.mark.parametrize("rpc", ["QueryOffset", "GetOffset", "UpdateOffset", "PullMessage"])
async def test_proxy_offset_rpcs_end_with_grpc_unimplemented(
    stub: spb_grpc.MessagingServiceStub, rpc: str
) -> None:
    request = getattr(spb, f"{rpc}Request")()
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        call = getattr(stub, rpc)(request, metadata=CLIENT, timeout=10)
        if rpc == "PullMessage":
            async for _ in call:
                pass
        else:
            await call
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_proxy_delivers_a_committed_transactional_message_as_transaction() -> None:
    committed = MessageExt(
        topic="Orders",
        body=b"x",
        properties={"UNIQ_KEY": "01AB", "TAGS": "T"},
        sys_flag=SysFlag.TRANSACTION_COMMIT_TYPE,
        born_host=("10.0.0.9", 4000),
    )
    assert stored_to_grpc(committed).system_properties.message_type == pb.TRANSACTION
    plain = MessageExt(
        topic="Orders", body=b"x", properties={"UNIQ_KEY": "01AC"}, born_host=("10.0.0.9", 4000)
    )
    assert stored_to_grpc(plain).system_properties.message_type == pb.NORMAL
