"""The gRPC port's handler table: requests that do not decode are refused in-band, in one line.

grpc's generated ``add_MessagingServiceServicer_to_server`` decodes each request with the
message's ``FromString``; a body that is not the protobuf it claims to be then raises inside
grpc, which logs a whole traceback and answers gRPC UNKNOWN, which the SDKs take for a broken
connection. Here every RPC of ``apache.rocketmq.v2.MessagingService`` (read from the service
descriptor, so a new RPC cannot be missed) is registered with a decoder that turns a malformed
body into a :class:`MalformedRequest`; the RPC then answers gRPC OK with an in-band
BAD_REQUEST status naming the RPC and the decoder's complaint (grpc-v5-protocol P11), and the
proxy logs one warning line per RPC per ``badRequestLogIntervalMillis`` (``LogLimiter``).
On the Telemetry stream a malformed command gets a BAD_REQUEST ``TelemetryCommand`` and the
stream goes on (``MessagingService.Telemetry``).

Sizes are bounded before decoding: the server's ``grpc.max_receive_message_length`` is
:func:`max_receive_bytes` (``maxMessageSize`` plus :data:`ENVELOPE_HEADROOM_BYTES`), so a
larger request is refused by grpc (RESOURCE_EXHAUSTED) from its length prefix, never buffered
whole; a body between ``maxMessageSize`` and that bound answers MESSAGE_BODY_TOO_LARGE.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message  # type: ignore[import-untyped]

from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy._pb import service_pb2_grpc as spb_grpc
from orbitmq.proxy.codes import status
from orbitmq.transport.log_limit import LogLimiter

__all__ = [
    "ENVELOPE_HEADROOM_BYTES",
    "MalformedRequest",
    "add_messaging_service",
    "max_receive_bytes",
    "refuse_malformed",
]

logger = logging.getLogger(__name__)

ENVELOPE_HEADROOM_BYTES = 1024 * 1024
"""What a request may carry besides one body: topic, properties (``maxUserPropertySize``), ids."""

_SERVICE = spb.DESCRIPTOR.services_by_name["MessagingService"]


def max_receive_bytes(max_message_size_bytes: int) -> int:
    """The gRPC port's ``grpc.max_receive_message_length`` for a given ``maxMessageSize``."""
    return max_message_size_bytes + ENVELOPE_HEADROOM_BYTES


class MalformedRequest:
    """A request body that did not decode as its RPC's message."""

    __slots__ = ("rpc", "error", "size_bytes")

    def __init__(self, rpc: str, error: str, size_bytes: int) -> None:
        self.rpc = rpc
        self.error = error
        self.size_bytes = size_bytes

    def remark(self) -> str:
        return f"malformed {self.rpc} request ({self.size_bytes} bytes): {self.error[:120]}"


def _decoder(rpc: str, message_type: type[Message]) -> Callable[[bytes], Message | MalformedRequest]:
    def decode(data: bytes) -> Message | MalformedRequest:
        try:
            return message_type.FromString(data)
        except (DecodeError, RecursionError, ValueError, UnicodeDecodeError) as exc:
            return MalformedRequest(rpc, str(exc) or type(exc).__name__, len(data))

    return decode


def _peer(context: Any) -> str:
    try:
        return str(context.peer())
    except Exception:  # noqa: BLE001 - only for a log line
        return "?"


def add_messaging_service(
    servicer: spb_grpc.MessagingServiceServicer, server: grpc.aio.Server, log: LogLimiter
) -> None:
    """Register every RPC of ``servicer`` on ``server`` with the defensive decoders."""
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in _SERVICE.methods:
        rpc = method.name
        request_type: type[Message] = getattr(spb, method.input_type.name)
        response_type: type[Message] = getattr(spb, method.output_type.name)
        implementation = getattr(servicer, rpc)
        decode = _decoder(rpc, request_type)
        encode = response_type.SerializeToString
        if method.client_streaming:
            # Telemetry: each malformed command is answered on the stream by the servicer.
            handlers[rpc] = grpc.stream_stream_rpc_method_handler(
                implementation, request_deserializer=decode, response_serializer=encode
            )
        elif method.server_streaming:
            handlers[rpc] = grpc.unary_stream_rpc_method_handler(
                _unary_stream(rpc, implementation, response_type, log),
                request_deserializer=decode,
                response_serializer=encode,
            )
        else:
            handlers[rpc] = grpc.unary_unary_rpc_method_handler(
                _unary_unary(rpc, implementation, response_type, log),
                request_deserializer=decode,
                response_serializer=encode,
            )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_SERVICE.full_name, handlers),))


def refuse_malformed(request: MalformedRequest, context: Any, log: LogLimiter) -> str:
    """Log one line (rate-limited) about ``request``; the remark the client gets."""
    remark = request.remark()
    log.warning(f"grpc-malformed:{request.rpc}", "refused a gRPC call from %s: %s", _peer(context), remark)
    return remark


def _unary_unary(
    rpc: str, implementation: Callable[..., Any], response_type: type[Message], log: LogLimiter
) -> Callable[..., Any]:
    async def call(request: Any, context: Any) -> Any:
        if isinstance(request, MalformedRequest):
            return response_type(status=status(pb.BAD_REQUEST, refuse_malformed(request, context, log)))
        return await implementation(request, context)

    call.__name__ = rpc
    return call


def _unary_stream(
    rpc: str, implementation: Callable[..., AsyncIterator[Any]], response_type: type[Message], log: LogLimiter
) -> Callable[..., AsyncIterator[Any]]:
    async def call(request: Any, context: Any) -> AsyncIterator[Any]:
        if isinstance(request, MalformedRequest):
            yield response_type(status=status(pb.BAD_REQUEST, refuse_malformed(request, context, log)))
            return
        async for response in implementation(request, context):
            yield response

    call.__name__ = rpc
    return call
