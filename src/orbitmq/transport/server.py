"""The server side of the remoting protocol: accept connections, dispatch requests by code.

Theory of operation. Each accepted socket gets a :class:`_ServerProtocol` (an
``asyncio.Protocol``) and a :class:`ServerConnection`. ``data_received`` feeds the bytes to a
:class:`FrameDecoder` and decodes every complete frame; nothing else runs on the read path.

- A request is handled in its own task, so a handler parked for seconds (a long-polling pull)
  never delays other replies on the same connection. Responses go out in completion order and
  the client matches them by opaque.
- A response (flag bit 0) answers a request this server sent to the client
  (:meth:`ServerConnection.send_request`) and completes the waiting future.
- A frame that cannot be decoded, or is larger than ``max_frame_bytes``, closes that
  connection only: its stream has lost its framing.

Errors map to wire codes here and nowhere else: ``BrokerResponseError`` -> its code and remark;
any other exception -> ``SYSTEM_ERROR`` with the exception text, logged with its traceback; an
unregistered code -> ``REQUEST_CODE_NOT_SUPPORTED``. Oneway requests (flag bit 1) get no answer.

Frames written during one loop turn go to the socket together (:class:`FrameWriter`), so
a burst of responses costs one send system call, and bodies are never copied.

Back-pressure: when the transport's write buffer passes its high-water mark the connection
stops reading until it drains, so a slow reader cannot make the server buffer without bound.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from orbitmq.errors import (
    BrokerResponseError,
    ConnectionClosedError,
    LocalProtocolError,
    ProtocolError,
    RequestTimeoutError,
)
from orbitmq.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, RequestCode, ResponseCode, SerializeType
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.frame import MAX_FRAME_BYTES, FrameDecoder
from orbitmq.transport.connection import FrameWriter

__all__ = ["Handler", "RemotingServer", "RequestContext", "ServerConnection"]

logger = logging.getLogger(__name__)

WRITE_BUFFER_HIGH_BYTES = 4 * 1024 * 1024
"""Above this many unsent bytes a connection stops reading requests until it drains."""

_OPAQUE_MASK = 0x7FFFFFFF  # opaque is a signed 32-bit int in the binary header


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Where a request came from; one instance per connection, shared by its requests."""

    connection: ServerConnection
    peer_host: str
    peer_port: int
    local_host: str
    local_port: int

    @property
    def peer_address(self) -> str:
        """``host:port`` of the client."""
        return f"{self.peer_host}:{self.peer_port}"


Handler = Callable[[RequestContext, RemotingCommand], Awaitable[RemotingCommand | None]]
"""``async def handler(ctx, request) -> response | None``; ``None`` sends nothing."""


class ServerConnection:
    """One accepted client connection, as handlers and server-side services see it."""

    def __init__(self, connection_id: int, transport: asyncio.Transport, peer: tuple[str, int]) -> None:
        self.id = connection_id
        self.peer_host, self.peer_port = peer
        self.last_active_monotonic = time.monotonic()
        self._transport = transport
        self._writer = FrameWriter(transport)
        self._closed = False
        self._opaques = itertools.count(1)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._close_callbacks: list[Callable[[ServerConnection], None]] = []
        self._inflight_requests = 0

    def __repr__(self) -> str:
        return f"ServerConnection(id={self.id}, peer={self.peer_address})"

    @property
    def peer_address(self) -> str:
        """``host:port`` of the client."""
        return f"{self.peer_host}:{self.peer_port}"

    @property
    def closed(self) -> bool:
        return self._closed

    def add_close_callback(self, callback: Callable[[ServerConnection], None]) -> None:
        """Call ``callback(connection)`` once when the connection closes (at once if already closed)."""
        if self._closed:
            callback(self)
        else:
            self._close_callbacks.append(callback)

    def close(self) -> None:
        """Close the connection after sending what is queued; in-flight server requests fail."""
        self._writer.flush()
        self._transport.close()

    async def send_request(self, request: RemotingCommand, timeout_ms: int = 3000) -> RemotingCommand:
        """Send a request to the client and wait for its response.

        Raises:
            ConnectionClosedError: the connection is closed or closes before the response.
            RequestTimeoutError: no response within ``timeout_ms`` (the connection stays open).
        """
        opaque = self._next_opaque()
        request.opaque = opaque
        request.flag &= ~(FLAG_RESPONSE | FLAG_ONEWAY)
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[opaque] = future
        try:
            self._write_command(request)
            return await asyncio.wait_for(future, timeout_ms / 1000)
        except TimeoutError:
            raise RequestTimeoutError(
                f"client {self.peer_address} did not answer request code {request.code} "
                f"(opaque {opaque}) within {timeout_ms} ms"
            ) from None
        finally:
            self._pending.pop(opaque, None)

    def send_oneway(self, request: RemotingCommand) -> None:
        """Send a request the client must not answer.

        Raises:
            ConnectionClosedError: the connection is closed.
        """
        request.opaque = self._next_opaque()
        request.flag = (request.flag | FLAG_ONEWAY) & ~FLAG_RESPONSE
        self._write_command(request)

    # -- internals used by the protocol and the server ------------------------------------

    def _next_opaque(self) -> int:
        return next(self._opaques) & _OPAQUE_MASK

    def _write_command(self, command: RemotingCommand) -> None:
        if self._closed:
            raise ConnectionClosedError(f"connection to client {self.peer_address} is closed")
        # Requests this server originates always use JSON: the C++ client parses nothing else.
        command.serialize_type = SerializeType.JSON
        self._write(command)

    def _write(self, command: RemotingCommand) -> None:
        self._writer.write(command)
        self.last_active_monotonic = time.monotonic()

    def _complete(self, response: RemotingCommand) -> None:
        future = self._pending.pop(response.opaque, None)
        if future is None or future.done():
            logger.debug("unmatched response opaque %d from %s", response.opaque, self.peer_address)
            return
        future.set_result(response)

    def _on_closed(self) -> None:
        if self._closed:
            return
        self._closed = True
        pending, self._pending = self._pending, {}
        for opaque, future in pending.items():
            if not future.done():
                future.set_exception(
                    ConnectionClosedError(
                        f"connection to client {self.peer_address} closed before opaque {opaque} was answered"
                    )
                )
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                logger.exception("close callback failed for connection %s", self.peer_address)


class _ServerProtocol(asyncio.Protocol):
    """Bytes in, requests dispatched, responses out: one instance per accepted socket."""

    def __init__(self, server: RemotingServer) -> None:
        self._server = server
        self._decoder = FrameDecoder(server.max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        self._connection: ServerConnection | None = None
        self._context: RequestContext | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = typing.cast(asyncio.Transport, transport)
        self._transport = transport
        peer = _host_port(transport.get_extra_info("peername"))
        local = _host_port(transport.get_extra_info("sockname"))
        connection = ServerConnection(self._server._new_connection_id(), transport, peer)
        self._connection = connection
        self._context = RequestContext(connection, peer[0], peer[1], local[0], local[1])
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH_BYTES)
        self._server._connections[connection.id] = connection

    def connection_lost(self, exc: Exception | None) -> None:
        connection = self._connection
        if connection is None:
            return
        self._server._connections.pop(connection.id, None)
        connection._on_closed()
        callback = self._server._on_connection_closed
        if callback is not None:
            try:
                callback(connection)
            except Exception:
                logger.exception("on_connection_closed failed for %s", connection.peer_address)

    def pause_writing(self) -> None:
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        connection = self._connection
        assert connection is not None and self._transport is not None
        connection.last_active_monotonic = time.monotonic()
        try:
            frames = self._decoder.feed(data)
            for frame in frames:
                self._on_command(connection, decode_command(frame))
        except ProtocolError as exc:
            logger.warning("closing connection from %s: %s", connection.peer_address, exc)
            self._transport.close()

    def _on_command(self, connection: ServerConnection, command: RemotingCommand) -> None:
        if connection.closed:
            return
        if command.flag & FLAG_RESPONSE:
            connection._complete(command)
            return
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("request %s from %s", _code_name(command), connection.peer_address)
        handler = self._server._handlers.get(command.code)
        if handler is None:
            if not command.flag & FLAG_ONEWAY:
                self._respond(
                    connection,
                    command,
                    command.response(
                        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                        f"request code {command.code} not supported",
                    ),
                )
            return
        if self._server._stopping and not command.flag & FLAG_ONEWAY:
            self._respond(
                connection,
                command,
                command.response(ResponseCode.SERVICE_NOT_AVAILABLE, "server is shutting down"),
            )
            return
        assert self._context is not None
        task = asyncio.get_running_loop().create_task(self._handle(handler, connection, command))
        self._server._track(task)

    async def _handle(self, handler: Handler, connection: ServerConnection, request: RemotingCommand) -> None:
        context = self._context
        assert context is not None
        connection._inflight_requests += 1
        try:
            response = await handler(context, request)
        except BrokerResponseError as exc:
            response = request.response(exc.code, exc.remark)
        except Exception as exc:
            logger.exception("handler for request code %d from %s failed", request.code, context.peer_address)
            response = request.response(ResponseCode.SYSTEM_ERROR, str(exc) or type(exc).__name__)
        finally:
            connection._inflight_requests -= 1
        if response is not None and not request.flag & FLAG_ONEWAY:
            self._respond(connection, request, response)

    def _respond(
        self, connection: ServerConnection, request: RemotingCommand, response: RemotingCommand
    ) -> None:
        if connection.closed:
            return
        # The opaque and flag are the transport's business, whatever the handler built.
        response.opaque = request.opaque
        response.flag = (response.flag | FLAG_RESPONSE) & ~FLAG_ONEWAY
        try:
            connection._write(response)
        except LocalProtocolError as exc:
            logger.error("cannot encode response to request code %d: %s", request.code, exc)
            connection._write(request.response(ResponseCode.SYSTEM_ERROR, f"cannot encode response: {exc}"))


def _code_name(command: RemotingCommand) -> str:
    name = RequestCode(command.code).name if command.code in RequestCode._value2member_map_ else "unknown"
    return f"{name} (code {command.code}, opaque {command.opaque})"


def _host_port(address: Any) -> tuple[str, int]:
    if isinstance(address, tuple) and len(address) >= 2:
        return str(address[0]), int(address[1])
    return str(address), 0


class RemotingServer:
    """Listens on ``host:port`` and serves RocketMQ remoting requests with registered handlers.

    Args:
        host: bind address (``0.0.0.0`` for every interface).
        port: TCP port; 0 picks a free one (read it from :attr:`port` after :meth:`start`).
        handlers: request code -> handler (more can be added with :meth:`register`).
        max_frame_bytes: larger frames close their connection.
        idle_timeout_s: a connection with no traffic and no request in flight for this long is closed.
        on_connection_closed: called with each connection that closes.
    """

    def __init__(
        self,
        host: str,
        port: int,
        handlers: Mapping[int, Handler] | None = None,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        idle_timeout_s: float = 120.0,
        on_connection_closed: Callable[[ServerConnection], None] | None = None,
    ) -> None:
        self.host = host
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout_s = idle_timeout_s
        self._requested_port = port
        self._handlers: dict[int, Handler] = {int(code): h for code, h in (handlers or {}).items()}
        self._on_connection_closed = on_connection_closed
        self._connections: dict[int, ServerConnection] = {}
        self._connection_ids = itertools.count(1)
        self._inflight: set[asyncio.Task[None]] = set()
        self._server: asyncio.AbstractServer | None = None
        self._bound_port = port
        self.bound_addresses: list[str] = []
        self._idle_task: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def port(self) -> int:
        """The bound port (the requested one until :meth:`start` has run)."""
        return self._bound_port

    @property
    def connections(self) -> list[ServerConnection]:
        """The open connections."""
        return list(self._connections.values())

    def register(self, code: int, handler: Handler) -> None:
        """Serve request ``code`` with ``handler`` (replacing any earlier one)."""
        self._handlers[int(code)] = handler

    async def start(self) -> None:
        """Bind and start accepting connections."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _ServerProtocol(self), self.host, self._requested_port, reuse_address=True
        )
        sockets = getattr(self._server, "sockets", None) or ()
        if sockets:
            self._bound_port = int(sockets[0].getsockname()[1])
        # What the sockets really bound (``0.0.0.0`` is every interface), not what was asked.
        bound = (_host_port(sock.getsockname()) for sock in sockets)
        self.bound_addresses = [f"{host}:{port}" for host, port in bound]
        self._idle_task = loop.create_task(self._close_idle_connections())
        logger.info("remoting server listening on %s", ", ".join(self.bound_addresses))

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let in-flight handlers finish within ``grace_s``, then close everything."""
        if self._server is None:
            return
        # Stop accepting first, so no new connection arrives while the others drain.
        self._stopping = True
        self._server.close()
        if self._idle_task is not None:
            self._idle_task.cancel()
        # Requests already being handled get the grace period to answer; new ones are refused.
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=grace_s)
        for task in list(self._inflight):
            task.cancel()
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=1.0)
        # Close the connections last, so responses written during the grace period go out.
        for connection in list(self._connections.values()):
            connection.close()
        await self._server.wait_closed()
        # One loop turn lets connection_lost run for the connections just closed.
        await asyncio.sleep(0)
        self._server = None
        logger.info("remoting server on %s:%d stopped", self.host, self._bound_port)

    # -- internals -------------------------------------------------------------------------

    def _new_connection_id(self) -> int:
        return next(self._connection_ids)

    def _track(self, task: asyncio.Task[None]) -> None:
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _close_idle_connections(self) -> None:
        interval_s = min(max(self.idle_timeout_s / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval_s)
            deadline = time.monotonic() - self.idle_timeout_s
            for connection in list(self._connections.values()):
                if connection.last_active_monotonic < deadline and not connection._inflight_requests:
                    logger.info("closing idle connection from %s", connection.peer_address)
                    connection.close()
