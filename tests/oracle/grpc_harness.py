"""The gRPC differential harness: play one scenario of 5.x RPCs against two proxies, compare.

A scenario (tests/oracle/grpc_scenarios.py) is a short async function that calls RPCs of
``apache.rocketmq.v2.MessagingService`` through a :class:`GrpcTarget` (plaintext gRPC with the
project's stubs) and records each response it wants compared with :meth:`GrpcTarget.record`.
Both targets get the same calls with the same topic, group and message-id values.

Each recorded response becomes a flat *view* ``{path: value}`` (the remoting harness's
``compare`` / ``Allowed`` / ``unexplained`` work on it unchanged):

- ``grpc_error``: the gRPC status code of a call that ended without a response
  (:meth:`GrpcTarget.record_call`), ``frames``: the number of frames of a stream;
- every field the response carries (proto3 presence: set scalars, set messages, non-empty
  repeated fields and maps) as ``<path>`` -> its kind (``int``, ``str``, ``bool``, ``bytes``,
  ``enum``, ``message``, ``Timestamp``, ``Duration``, ``list``, ``map``); repeated items are merged
  under ``<path>[]`` and their count is ``<path>#``;
- ``<path>=`` -> the value itself: enum values by name, bytes as bytes, map keys sorted, unless
  the field is one whose value must differ between two servers (:data:`VARYING_FIELDS`: times,
  receipt handles, transaction ids, addresses, host names) or is prose (``status.message``,
  compared by kind only and shown in the failure message).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message as ProtoMessage

from orbitmq.model.subscription_group import SubscriptionGroupConfig
from orbitmq.protocol.admin_bodies import encode_subscription_group_config
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import CreateTopicRequestHeader
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy._pb import service_pb2_grpc as spb_grpc
from orbitmq.transport.connection import RemotingClient
from tests.oracle.harness import Recorded

# Field names whose values (not presence and kind) differ between any two servers by nature.
VARYING_FIELDS = frozenset(
    {
        "receipt_handle",
        "transaction_id",
        "recall_handle",
        "born_timestamp",
        "store_timestamp",
        "born_host",
        "store_host",
        "host",
        "port",
        "delivery_timestamp",
        "message",  # status.message: prose
        "nonce",
        "hostname",
        "trace_context",
    }
)
# Well-known types compared by kind: their values are times and durations the servers pick.
_TIMES = {"google.protobuf.Timestamp": "Timestamp", "google.protobuf.Duration": "Duration"}


def _scalar_kind(descriptor: FieldDescriptor) -> str:
    kind = descriptor.type
    if kind == FieldDescriptor.TYPE_ENUM:
        return "enum"
    if kind == FieldDescriptor.TYPE_BOOL:
        return "bool"
    if kind == FieldDescriptor.TYPE_STRING:
        return "str"
    if kind == FieldDescriptor.TYPE_BYTES:
        return "bytes"
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return "float"
    return "int"


def _scalar_value(descriptor: FieldDescriptor, value: Any) -> Any:
    if descriptor.type == FieldDescriptor.TYPE_ENUM:
        enum_value = descriptor.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else value
    return value


def _walk(message: ProtoMessage, path: str, out: dict[str, Any], values: bool) -> None:
    for descriptor, value in message.ListFields():
        name = descriptor.name
        here = f"{path}.{name}" if path else name
        keep = values and name not in VARYING_FIELDS
        if descriptor.message_type is not None and descriptor.message_type.GetOptions().map_entry:
            out[here] = "map"
            if keep:
                out[f"{here}="] = sorted((str(k), str(v)) for k, v in value.items())
            else:
                out[f"{here}.keys="] = sorted(str(k) for k in value)
            continue
        repeated = descriptor.is_repeated
        if repeated:
            out[here] = "list"
            out[f"{here}#"] = len(value)
            items = list(value)
            here = f"{here}[]"
        else:
            items = [value]
        if descriptor.type == FieldDescriptor.TYPE_MESSAGE:
            full_name = descriptor.message_type.full_name
            if full_name in _TIMES:
                out[here] = _TIMES[full_name]
                continue
            out[here] = "message"
            for item in items:
                _walk(item, here, out, values)
            continue
        out[here] = _scalar_kind(descriptor)
        if keep:
            shown = [_scalar_value(descriptor, item) for item in items]
            out[f"{here}="] = sorted(shown, key=repr) if repeated else shown[0]


def view_of(response: ProtoMessage, values: bool = True, ignore: Iterable[str] = ()) -> dict[str, Any]:
    """The flat view of one response (see the module docstring); ``ignore``: path prefixes cut."""
    out: dict[str, Any] = {}
    _walk(response, "", out, values)
    cut = tuple(ignore)
    return {path: value for path, value in out.items() if not path.startswith(cut)} if cut else out


@dataclass(frozen=True)
class Endpoint:
    """One proxy the scenarios talk to and the broker behind it (for set-up by remoting)."""

    grpc_addr: str
    broker_addr: str


class Client:
    """One client id, its metadata and (optionally) an open Telemetry stream."""

    def __init__(self, target: GrpcTarget, client_id: str) -> None:
        self.target = target
        self.client_id = client_id
        self.metadata = (
            ("x-mq-client-id", client_id),
            ("x-mq-language", "PYTHON"),
            ("x-mq-protocol", "v2"),
            ("x-mq-client-version", "5.1.2"),
            ("x-mq-namespace", ""),
        )
        self._stream: Any = None
        self._outbound: asyncio.Queue[spb.TelemetryCommand | None] = asyncio.Queue()

    async def telemetry(self, settings: pb.Settings) -> spb.TelemetryCommand:
        """Open the Telemetry stream with ``settings``; the proxy's first answer."""

        async def commands() -> AsyncIterator[spb.TelemetryCommand]:
            yield spb.TelemetryCommand(settings=settings)
            while True:
                command = await self._outbound.get()
                if command is None:
                    return
                yield command

        self._stream = self.target.stub.Telemetry(commands(), metadata=self.metadata)
        answer: spb.TelemetryCommand = await asyncio.wait_for(self._stream.read(), 10)
        return answer

    async def close(self) -> None:
        if self._stream is not None:
            self._outbound.put_nowait(None)
            self._stream.cancel()
            self._stream = None

    async def unary(self, rpc: str, request: ProtoMessage, timeout_s: float = 15.0) -> Any:
        method = getattr(self.target.stub, rpc)
        return await method(request, metadata=self.metadata, timeout=timeout_s)

    async def receive(self, request: spb.ReceiveMessageRequest, timeout_s: float = 30.0) -> list[Any]:
        """Every frame of one ReceiveMessage stream."""
        frames = []
        call = self.target.stub.ReceiveMessage(request, metadata=self.metadata, timeout=timeout_s)
        async for frame in call:
            frames.append(frame)
        return frames


@dataclass
class GrpcTarget:
    """One proxy and broker a scenario is played against."""

    name: str
    endpoint: Endpoint
    stub: spb_grpc.MessagingServiceStub
    remoting: RemotingClient
    scenario: str = ""
    recorded: list[Recorded] = field(default_factory=list)
    clients: list[Client] = field(default_factory=list)

    @property
    def endpoints(self) -> pb.Endpoints:
        host, port = self.endpoint.grpc_addr.rsplit(":", 1)
        return pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))])

    def name_of(self, suffix: str) -> str:
        """A topic or group name of this scenario's own."""
        return f"{self.scenario}_{suffix}"[:120]

    def client(self) -> Client:
        # The same id sequence on both sides: ids are compared only by kind anyway.
        made = Client(self, f"127.0.0.1@{self.scenario}@{len(self.clients)}@oracle")
        self.clients.append(made)
        return made

    async def close(self) -> None:
        for made in self.clients:
            await made.close()

    async def create_topic(self, topic: str, queues: int = 1, message_type: str | None = None) -> None:
        """UPDATE_AND_CREATE_TOPIC on the broker (``+message.type=`` for typed topics)."""
        header = CreateTopicRequestHeader(
            topic=topic,
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=6,
            attributes=f"+message.type={message_type}" if message_type else None,
        )
        request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
        response = await self.remoting.invoke(self.endpoint.broker_addr, request, timeout_ms=10_000)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"{self.name}: creating {topic}: {response.code} {response.remark}")

    async def create_group(self, group: str, fifo: bool = False) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on the broker (Apache's proxy serves no unknown group)."""
        config = SubscriptionGroupConfig(group, consume_message_orderly=fifo)
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, encode_subscription_group_config(config)
        )
        response = await self.remoting.invoke(self.endpoint.broker_addr, request, timeout_ms=10_000)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"{self.name}: creating group {group}: {response.code} {response.remark}")

    def record(
        self, label: str, response: ProtoMessage, *, values: bool = True, ignore: Iterable[str] = ()
    ) -> Any:
        """Keep ``response`` for comparison under ``label``; ``values=False`` compares kinds only."""
        view = view_of(response, values, ignore)
        self.recorded.append(Recorded(label, response, view))  # type: ignore[arg-type]
        return response

    async def record_call(self, label: str, call: Awaitable[Any], **options: Any) -> Any:
        """Record what ``call`` answers, or the gRPC error it ends with (``grpc_error``: its code)."""
        try:
            response = await call
        except grpc.aio.AioRpcError as exc:
            self.recorded.append(
                Recorded(label, exc, {"grpc_error": exc.code().name})  # type: ignore[arg-type]
            )
            return None
        return self.record(label, response, **options)

    def record_frames(self, label: str, frames: list[Any], **options: Any) -> None:
        """Each frame of a stream under ``label[i]``, and the number of frames."""
        self.recorded.append(
            Recorded(f"{label} frames", frames, {"frames": len(frames)})  # type: ignore[arg-type]
        )
        for index, frame in enumerate(frames):
            self.record(f"{label}[{index}]", frame, **options)


def remark_of(recorded: Recorded) -> str:
    """status.message of a recorded response, for the failure message."""
    response: Any = recorded.response
    if isinstance(response, grpc.aio.AioRpcError):
        return f"gRPC {response.code().name}: {response.details()}"
    if isinstance(response, ProtoMessage) and response.DESCRIPTOR.fields_by_name.get("status"):
        text: str = response.status.message  # type: ignore[attr-defined]
        return text
    return ""


@contextlib.asynccontextmanager
async def grpc_target(name: str, endpoint: Endpoint, scenario: str) -> AsyncIterator[GrpcTarget]:
    channel = grpc.aio.insecure_channel(
        endpoint.grpc_addr,
        options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)],
    )
    remoting = RemotingClient()
    target = GrpcTarget(name, endpoint, spb_grpc.MessagingServiceStub(channel), remoting, scenario=scenario)
    try:
        yield target
    finally:
        await target.close()
        await remoting.close()
        await channel.close()


GrpcScenario = Callable[[GrpcTarget], Awaitable[None]]
