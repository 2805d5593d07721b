"""Hostile gRPC requests for every RPC of MessagingService, and the run that sends them.

:func:`requests` draws a seeded list of :class:`GrpcRequest`: for each RPC of
``apache.rocketmq.v2.MessagingService`` (read from the service descriptor, so a new RPC is
covered without a change here) it builds messages of the RPC's request type with random field
values (names with odd characters, numbers at their type's edges, receipt handles with fields out
of range or naming brokers that do not exist, nested messages, unknown enum values), then
mutates some of the serialized bytes (truncated, bytes flipped or inserted, garbage, another
RPC's message) and makes a few oversized (past the port's receive limit, or a body just past
``maxMessageSize``). Metadata varies too: no client id, odd ids, odd versions.

:func:`fuzz` sends them over one channel with a bounded number in flight, through identity
serializers (the bytes on the wire are the drawn ones), opens Telemetry streams that write
drawn commands, and meanwhile a prober asks QueryRoute every second and records an answer that
is late or not OK. Answers are counted by gRPC status and, for gRPC OK, by the in-band ``Code``.
Used by ``python -m orbitmq.bench fuzz-grpc`` and the fuzz test tier.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import descriptor as _descriptor  # type: ignore[import-untyped]

from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb

__all__ = ["GrpcFuzzStats", "GrpcRequest", "RPCS", "fuzz", "requests"]

_SERVICE = spb.DESCRIPTOR.services_by_name["MessagingService"]
RPCS: tuple[str, ...] = tuple(method.name for method in _SERVICE.methods)
"""Every RPC of the service, Telemetry included."""
_METHODS = {method.name: method for method in _SERVICE.methods}
PROBE_INTERVAL_S = 1.0
PROBE_TIMEOUT_S = 3.0
CALL_TIMEOUT_S = 5.0
_MAX_DEPTH = 4
_CLIENT_CORE_ERROR = "Internal error from Core"

_ODD_STRINGS = (
    "",
    " ",
    "T",
    "%RETRY%G",
    "%DLQ%G",
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "rmq_sys_wheel_timer",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "../../x",
    "a" * 300,
    "\x00\x01",
    "ünïcødé",
    "*",
    "TAG || b",
    "a\nb",
)
_BROKERS = ("broker-a", "../../x", "", "no-such-broker", "b" * 200, "%", "broker-a\x00")
_INTS = (0, 1, -1, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63), 2**32, 255)


def _receipt_handle(rng: random.Random) -> str:
    fields = [str(rng.choice(_INTS + (2**70, rng.randint(0, 10**6)))) for _ in range(rng.randint(0, 10))]
    if len(fields) > 5:
        fields[5] = rng.choice(_BROKERS)
    return " ".join(fields) if rng.random() < 0.9 else rng.randbytes(rng.randint(0, 40)).decode("latin-1")


def _string(rng: random.Random, name: str) -> str:
    if name == "receipt_handle":
        return _receipt_handle(rng)
    roll = rng.random()
    if roll < 0.5:
        return rng.choice(_ODD_STRINGS)
    if roll < 0.8:
        return "".join(rng.choice("abcXYZ09_-%|.") for _ in range(rng.randint(1, 20)))
    return "".join(chr(rng.randint(1, 0x2FF)) for _ in range(rng.randint(0, 40)))


def _scalar(rng: random.Random, field_descriptor: Any) -> Any:
    kind = field_descriptor.type
    if kind == _descriptor.FieldDescriptor.TYPE_STRING:
        return _string(rng, field_descriptor.name)
    if kind == _descriptor.FieldDescriptor.TYPE_BYTES:
        return rng.randbytes(rng.choice((0, 1, 16, 1024, rng.randint(0, 8192))))
    if kind == _descriptor.FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if kind == _descriptor.FieldDescriptor.TYPE_ENUM:
        values = [value.number for value in field_descriptor.enum_type.values]
        return rng.choice(values) if rng.random() < 0.9 else rng.randint(-5, 200)
    if kind in (_descriptor.FieldDescriptor.TYPE_DOUBLE, _descriptor.FieldDescriptor.TYPE_FLOAT):
        return rng.choice((0.0, -1.0, 1e300, float("nan"), rng.random()))
    unsigned = kind in (
        _descriptor.FieldDescriptor.TYPE_UINT32,
        _descriptor.FieldDescriptor.TYPE_UINT64,
        _descriptor.FieldDescriptor.TYPE_FIXED32,
        _descriptor.FieldDescriptor.TYPE_FIXED64,
    )
    wide = kind in (
        _descriptor.FieldDescriptor.TYPE_INT64,
        _descriptor.FieldDescriptor.TYPE_UINT64,
        _descriptor.FieldDescriptor.TYPE_SINT64,
        _descriptor.FieldDescriptor.TYPE_FIXED64,
        _descriptor.FieldDescriptor.TYPE_SFIXED64,
    )
    low, high = (
        (0, 2**64 - 1 if wide else 2**32 - 1)
        if unsigned
        else (-(2**63), 2**63 - 1)
        if wide
        else (-(2**31), 2**31 - 1)
    )
    value = rng.choice((*_INTS, rng.randint(0, 100_000), rng.randint(low, high)))
    return min(max(value, low), high)


def _fill(message: Any, rng: random.Random, depth: int) -> None:
    for field_descriptor in message.DESCRIPTOR.fields:
        if rng.random() < 0.3:
            continue
        is_message = field_descriptor.type == _descriptor.FieldDescriptor.TYPE_MESSAGE
        if field_descriptor.message_type is not None and field_descriptor.message_type.GetOptions().map_entry:
            target = getattr(message, field_descriptor.name)
            for _ in range(rng.randint(0, 3)):
                key = _string(rng, "key")
                value_field = field_descriptor.message_type.fields_by_name["value"]
                if value_field.type == _descriptor.FieldDescriptor.TYPE_MESSAGE:
                    if depth < _MAX_DEPTH:
                        _fill(target[key], rng, depth + 1)
                else:
                    target[key] = _scalar(rng, value_field)
            continue
        if field_descriptor.is_repeated:
            target = getattr(message, field_descriptor.name)
            for _ in range(rng.randint(0, 3)):
                if is_message:
                    if depth < _MAX_DEPTH:
                        _fill(target.add(), rng, depth + 1)
                else:
                    target.append(_scalar(rng, field_descriptor))
            continue
        if is_message:
            if depth < _MAX_DEPTH:
                child = getattr(message, field_descriptor.name)
                if field_descriptor.message_type.full_name in (
                    "google.protobuf.Duration",
                    "google.protobuf.Timestamp",
                ):
                    child.seconds = rng.choice((0, 1, -1, 30, 315_576_000_000, -315_576_000_000))
                    child.nanos = rng.choice((0, 1, 999_999_999))
                else:
                    _fill(child, rng, depth + 1)
                    if not child.ByteSize():
                        child.SetInParent()
            continue
        setattr(message, field_descriptor.name, _scalar(rng, field_descriptor))


def _mutate(data: bytes, rng: random.Random) -> bytes:
    roll = rng.random()
    if not data or roll < 0.2:
        return rng.randbytes(rng.randint(0, 64))
    buffer = bytearray(data)
    if roll < 0.4:
        return bytes(buffer[: rng.randint(0, len(buffer) - 1)])
    if roll < 0.7:
        for _ in range(rng.randint(1, 4)):
            buffer[rng.randrange(len(buffer))] = rng.randrange(256)
        return bytes(buffer)
    if roll < 0.85:
        at = rng.randint(0, len(buffer))
        return bytes(buffer[:at] + rng.randbytes(rng.randint(1, 16)) + buffer[at:])
    # A length-delimited field announcing far more than follows.
    return bytes(buffer) + b"\x0a\xff\xff\xff\xff\x0f"


@dataclass(frozen=True, slots=True)
class GrpcRequest:
    """One drawn call: the RPC, its bytes (a list of commands for Telemetry) and its metadata."""

    rpc: str
    data: bytes
    metadata: tuple[tuple[str, str], ...]
    commands: tuple[bytes, ...] = ()
    kind: str = "drawn"
    """``drawn``, ``mutated``, ``foreign`` (another RPC's message), ``oversized`` or ``large-body``."""


def _metadata(rng: random.Random) -> tuple[tuple[str, str], ...]:
    roll = rng.random()
    version = ("x-mq-client-version", rng.choice(("5.0.5", "5.1.2", "", "99.0", "x")))
    language = ("x-mq-language", rng.choice(("JAVA", "PYTHON", "GOLANG", "??")))
    if roll < 0.05:
        return ()
    if roll < 0.1:
        # Header values travel as printable ASCII only (grpc refuses others on the client side).
        odd = "".join(char for char in _string(rng, "client_id") if " " <= char <= "~")
        return (("x-mq-client-id", odd), version)
    return (("x-mq-client-id", f"fuzz@{rng.randint(1, 50)}@0@grpc"), version, language)


def _draw(rpc: str, rng: random.Random) -> bytes:
    message = getattr(spb, _METHODS[rpc].input_type.name)()
    _fill(message, rng, 0)
    return bytes(message.SerializeToString())


def requests(
    count: int, seed: int, max_message_size_bytes: int, receive_limit_bytes: int
) -> list[GrpcRequest]:
    """``count`` calls, evenly over every RPC, drawn from ``seed`` (module docstring)."""
    rng = random.Random(seed)
    drawn: list[GrpcRequest] = []
    for index in range(count):
        rpc = RPCS[index % len(RPCS)]
        metadata = _metadata(rng)
        roll = rng.random()
        if rpc == "Telemetry":
            commands = []
            for _ in range(rng.randint(1, 6)):
                command = _draw(rpc, rng)
                commands.append(_mutate(command, rng) if rng.random() < 0.4 else command)
            drawn.append(GrpcRequest(rpc, b"", metadata, tuple(commands), "stream"))
            continue
        if roll < 0.005:
            data = b"\x0a" + _varint(receive_limit_bytes + 1024) + bytes(receive_limit_bytes + 1024)
            drawn.append(GrpcRequest(rpc, data, metadata, kind="oversized"))
        elif roll < 0.01 and rpc == "SendMessage":
            message = pb.Message(
                topic=pb.Resource(name=_string(rng, "topic")),
                body=bytes(max_message_size_bytes + rng.randint(1, 1024)),
                system_properties=pb.SystemProperties(message_id="01FUZZ", body_encoding=pb.IDENTITY),
            )
            drawn.append(
                GrpcRequest(
                    rpc,
                    spb.SendMessageRequest(messages=[message]).SerializeToString(),
                    metadata,
                    kind="large-body",
                )
            )
        elif roll < 0.35:
            drawn.append(GrpcRequest(rpc, _mutate(_draw(rpc, rng), rng), metadata, kind="mutated"))
        elif roll < 0.4:
            other = rng.choice([name for name in RPCS if name != "Telemetry"])
            drawn.append(GrpcRequest(rpc, _draw(other, rng), metadata, kind="foreign"))
        else:
            drawn.append(GrpcRequest(rpc, _draw(rpc, rng), metadata))
    rng.shuffle(drawn)
    return drawn


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


@dataclass
class GrpcFuzzStats:
    """What a gRPC fuzz run sent and got back."""

    calls: int = 0
    calls_by_rpc: Counter[str] = field(default_factory=Counter)
    calls_by_kind: Counter[str] = field(default_factory=Counter)
    grpc_codes: Counter[str] = field(default_factory=Counter)
    """gRPC status of every call (OK for in-band answers)."""
    in_band_codes: Counter[str] = field(default_factory=Counter)
    """The ``Status.code`` inside answers that ended with gRPC OK."""
    server_error_details: Counter[str] = field(default_factory=Counter)
    """``<RPC> <code>: <details>`` of every UNKNOWN or INTERNAL answer."""
    telemetry_commands: int = 0
    probes: int = 0
    probe_failures: list[str] = field(default_factory=list)
    probe_max_ms: float = 0.0
    seconds: float = 0.0

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.seconds if self.seconds else 0.0

    @property
    def server_errors(self) -> int:
        """gRPC UNKNOWN and INTERNAL: what grpc answers when a servicer raised."""
        return self.grpc_codes["UNKNOWN"] + self.grpc_codes["INTERNAL"]


def _identity(data: bytes) -> bytes:
    return data


def _code_name(code: int) -> str:
    try:
        return str(pb.Code.Name(code))
    except ValueError:
        return str(code)


def _count_answer(stats: GrpcFuzzStats, rpc: str, data: bytes) -> None:
    response_type = getattr(spb, _METHODS[rpc].output_type.name)
    answer = response_type.FromString(data)
    if answer.HasField("status"):
        stats.in_band_codes[_code_name(answer.status.code)] += 1


def _count_error(stats: GrpcFuzzStats, rpc: str, code: grpc.StatusCode, details: str | None) -> None:
    stats.grpc_codes[code.name] += 1
    if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL):
        stats.server_error_details[f"{rpc} {code.name}: {(details or '')[:160]}"] += 1


async def _unary(channel: grpc.aio.Channel, request: GrpcRequest, stats: GrpcFuzzStats) -> None:
    method = _METHODS[request.rpc]
    path = f"/{_SERVICE.full_name}/{request.rpc}"
    try:
        if method.server_streaming:
            call = channel.unary_stream(path, request_serializer=_identity, response_deserializer=_identity)
            async for data in call(request.data, metadata=request.metadata, timeout=CALL_TIMEOUT_S):
                _count_answer(stats, request.rpc, data)
        else:
            unary = channel.unary_unary(path, request_serializer=_identity, response_deserializer=_identity)
            _count_answer(
                stats,
                request.rpc,
                await unary(request.data, metadata=request.metadata, timeout=CALL_TIMEOUT_S),
            )
        stats.grpc_codes["OK"] += 1
    except grpc.aio.AioRpcError as exc:
        _count_error(stats, request.rpc, exc.code(), exc.details())


async def _telemetry(channel: grpc.aio.Channel, request: GrpcRequest, stats: GrpcFuzzStats) -> None:
    path = f"/{_SERVICE.full_name}/Telemetry"
    stream = channel.stream_stream(path, request_serializer=_identity, response_deserializer=_identity)

    async def commands() -> AsyncIterator[bytes]:
        for command in request.commands:
            yield command
            await asyncio.sleep(0.01)

    call = stream(commands(), metadata=request.metadata, timeout=2.0)
    refused = False
    try:
        async for data in call:
            stats.telemetry_commands += 1
            _count_answer(stats, "Telemetry", data)
            refused = refused or spb.TelemetryCommand.FromString(data).status.code == pb.CLIENT_ID_REQUIRED
        stats.grpc_codes["OK"] += 1
    except grpc.aio.AioRpcError as exc:
        # The deadline ends every stream that is still open: not a finding.
        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            stats.grpc_codes["OK"] += 1
        elif exc.code() == grpc.StatusCode.INTERNAL and (refused or exc.details() == _CLIENT_CORE_ERROR):
            # The server ended the stream (CLIENT_ID_REQUIRED ends it at once) while the client
            # was still writing: grpc's client reports its own failed write with this fixed
            # text, where a server's failure would carry the server's details (or UNKNOWN).
            stats.grpc_codes["CLIENT_WRITE_AFTER_END"] += 1
        else:
            _count_error(stats, "Telemetry", exc.code(), exc.details())


async def _probe(channel: grpc.aio.Channel, topic: str, stats: GrpcFuzzStats, stop: asyncio.Event) -> None:
    query = channel.unary_unary(
        f"/{_SERVICE.full_name}/QueryRoute",
        request_serializer=spb.QueryRouteRequest.SerializeToString,
        response_deserializer=spb.QueryRouteResponse.FromString,
    )
    request = spb.QueryRouteRequest(topic=pb.Resource(name=topic))
    metadata = (("x-mq-client-id", "prober@1@0@grpc"), ("x-mq-client-version", "5.1.2"))
    while not stop.is_set():
        started = time.monotonic()
        try:
            answer = await query(request, metadata=metadata, timeout=PROBE_TIMEOUT_S)
            if answer.status.code != pb.OK:
                stats.probe_failures.append(
                    f"QueryRoute answered {_code_name(answer.status.code)}: {answer.status.message}"
                )
        except grpc.aio.AioRpcError as exc:
            stats.probe_failures.append(f"QueryRoute failed: {exc.code().name} {exc.details()}")
        stats.probes += 1
        stats.probe_max_ms = max(stats.probe_max_ms, (time.monotonic() - started) * 1000)
        try:
            await asyncio.wait_for(stop.wait(), PROBE_INTERVAL_S)
        except TimeoutError:
            pass


async def fuzz(
    drawn: list[GrpcRequest], grpc_addr: str, probe_topic: str, concurrency: int = 32
) -> GrpcFuzzStats:
    """Send ``drawn`` to the gRPC port at ``grpc_addr`` while probing it (module docstring)."""
    stats = GrpcFuzzStats()
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    async with (
        grpc.aio.insecure_channel(grpc_addr, options=options) as channel,
        grpc.aio.insecure_channel(grpc_addr) as probe_channel,
    ):
        stop = asyncio.Event()
        prober = asyncio.create_task(_probe(probe_channel, probe_topic, stats, stop))
        queue: asyncio.Queue[GrpcRequest] = asyncio.Queue()
        for request in drawn:
            queue.put_nowait(request)

        async def worker() -> None:
            while not queue.empty():
                request = queue.get_nowait()
                stats.calls += 1
                stats.calls_by_rpc[request.rpc] += 1
                stats.calls_by_kind[request.kind] += 1
                if request.rpc == "Telemetry":
                    await _telemetry(channel, request, stats)
                else:
                    await _unary(channel, request, stats)

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        stats.seconds = time.monotonic() - started
        stop.set()
        await prober
    return stats
