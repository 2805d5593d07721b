"""The server side of the remoting protocol: accept connections, dispatch requests by code.

Theory of operation. Each accepted socket gets a :class:`_ServerProtocol` (an
``asyncio.Protocol``) and a :class:`ServerConnection` (``server_connection``).
``data_received`` feeds the bytes to a :class:`FrameDecoder` and decodes every complete
frame; nothing else runs on the read path.

- A request is handled in its own task, so a handler parked for seconds (a long-polling pull)
  never delays other replies on the same connection. Responses go out in completion order and
  the client matches them by opaque. A handler that answers without waiting returns a
  ``ReadyAnswer`` (``handling``): no task, and its response is written in the loop turn that
  read the request. One whose answer waits for an event a callback sees returns a
  ``LaterAnswer``: no task either, its response is written in the turn the event came in.
- A response (flag bit 0) answers a request this server sent to the client
  (:meth:`ServerConnection.send_request`) and completes the waiting future.
- A frame that cannot be decoded, or is larger than ``max_frame_bytes``, closes that
  connection only: its stream has lost its framing.

Errors map to wire codes here and nowhere else: ``BrokerResponseError`` -> its code and remark;
``BadRequestError`` (a header field or body breaking a rule) -> its code and short remark,
logged as one rate-limited warning line; any other ``RemoteProtocolError`` raised by a handler
(an undecodable body) -> ``SYSTEM_ERROR``, likewise; any other exception -> ``SYSTEM_ERROR``
with the exception's type, logged with its traceback (also rate-limited: a bug that every
request hits must not flood the log); an unregistered code -> ``REQUEST_CODE_NOT_SUPPORTED``.
Oneway requests (flag bit 1) get no answer. An optional ``on_handled`` hook hears of every
handled request (code, response or None for oneway, whether the handler failed, nanoseconds
spent): one ``perf_counter_ns`` pair and one call, no extra coroutine per request (the
metrics package times remote calls with it). Remarks are cut to ``REMARK_MAX_CHARS``, so an
answer never echoes a huge value. A response that cannot be encoded becomes a SYSTEM_ERROR;
if even that fails the connection closes: a request is answered or its connection closes,
never left waiting.

Frames written during one loop turn go to the socket together (:class:`FrameWriter`), so
a burst of responses costs one send system call, and bodies are never copied; the answers
given while one read's requests are decoded go out when that read is done, in the same turn.

Limits (:class:`ServerLimits`, each a config key of both servers, see docs/limits.md):

- at most ``max_connections`` open connections; one more is closed as soon as it is accepted;
- back-pressure: past ``write_buffer_high_bytes`` of unsent responses a connection stops
  reading requests until it drains; past ``write_buffer_max_bytes`` (responses already in
  flight kept coming) it is aborted, so a client that never reads cannot make the server
  buffer without bound;
- a frame's length is checked as soon as its 4 bytes arrive (``max_frame_bytes``), before
  anything of the frame is buffered beyond what the socket delivered;
- a partial frame must have its header within ``header_read_timeout_ms`` and be complete
  within ``frame_read_timeout_ms`` of its first byte, else the connection closes (a client
  trickling bytes holds a connection only that long).

TLS (``transport.tls``): ``enforcing`` wraps every connection, ``permissive`` lets each
connection's first byte choose; handlers see the same connection either way.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import time
import typing
from collections.abc import Awaitable, Callable, Iterator, Mapping
from functools import partial
from typing import Any

from orbitmq.errors import ListenError, ProtocolError
from orbitmq.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.frame import MAX_FRAME_BYTES, FrameDecoder
from orbitmq.protocol.names import shorten
from orbitmq.transport.connection import FrameWriter
from orbitmq.transport.handling import (
    REMARK_MAX_CHARS,
    Handler,
    LaterAnswer,
    ReadyAnswer,
    RequestContext,
    failure_answer,
)
from orbitmq.transport.log_limit import LogLimiter
from orbitmq.transport.server_connection import ServerConnection
from orbitmq.transport.server_limits import WRITE_BUFFER_HIGH_BYTES, ServerLimits
from orbitmq.transport.tls import SniffingServer, TlsMode, start_sniffing_server

__all__ = [
    "REMARK_MAX_CHARS",
    "HandledHook",
    "Handler",
    "LaterAnswer",
    "ReadyAnswer",
    "RemotingServer",
    "RequestContext",
    "ServerConnection",
    "ServerLimits",
    "WRITE_BUFFER_HIGH_BYTES",
]

logger = logging.getLogger(__name__)

HandledHook = Callable[[int, RemotingCommand | None, bool, int], None]
"""``(request code, response or None when oneway, handler failed, elapsed ns)`` after each request."""


class _ServerProtocol(asyncio.Protocol):
    """Bytes in, requests dispatched, responses out: one instance per accepted socket."""

    def __init__(self, server: RemotingServer) -> None:
        self._server = server
        self._decoder = FrameDecoder(server.max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        self._connection: ServerConnection | None = None
        self._context: RequestContext | None = None
        # The loop that runs this protocol, taken once: asyncio.get_running_loop() costs a
        # getpid() system call on every call (CPython checks for a fork), once per request.
        self._loop: asyncio.AbstractEventLoop | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = typing.cast(asyncio.Transport, transport)
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        server = self._server
        peer = _host_port(transport.get_extra_info("peername"))
        if len(server._connections) >= server.limits.max_connections:
            server._log.warning(
                "connection-limit",
                "refusing connection from %s:%d: %d connections open (limit serverMaxConnections)",
                peer[0],
                peer[1],
                len(server._connections),
            )
            transport.abort()
            return
        local = _host_port(transport.get_extra_info("sockname"))
        connection = ServerConnection(server._new_connection_id(), transport, peer)
        limits = server.limits
        connection._writer = FrameWriter(
            transport, limits.write_buffer_max_bytes, lambda held: self._on_write_overflow(held), self._loop
        )
        self._connection = connection
        self._context = RequestContext(connection, peer[0], peer[1], local[0], local[1])
        transport.set_write_buffer_limits(high=limits.write_buffer_high_bytes)
        server._connections[connection.id] = connection

    def _on_write_overflow(self, held_bytes: int) -> None:
        connection = self._connection
        if connection is None or self._transport is None:
            return
        self._server._log.warning(
            "write-buffer-limit",
            "aborting connection from %s: %d unsent response bytes (limit writeBufferMaxBytes %d)",
            connection.peer_address,
            held_bytes,
            self._server.limits.write_buffer_max_bytes,
        )
        self._transport.abort()

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
        if connection is None or self._transport is None:
            return
        now = time.monotonic()
        connection.last_active_monotonic = now
        decoder = self._decoder
        had_partial = decoder.buffered_bytes > 0
        # The answers given while this data is read go out together at its end (FrameWriter).
        writer = connection._writer
        writer.hold()
        try:
            frames = decoder.feed(data)
            for frame in frames:
                self._on_command(connection, decode_command(frame))
        except ProtocolError as exc:
            # The answers to the frames before the bad one still go out, then the connection closes.
            writer.release()
            self._server._log.warning(
                f"bad-frame:{type(exc).__name__}",
                "closing connection from %s: %s",
                connection.peer_address,
                shorten(str(exc), REMARK_MAX_CHARS),
            )
            self._transport.close()
            return
        finally:
            writer.release()  # whatever went wrong, the writer is never left holding
        # Time a partial frame from its first byte (see ServerLimits' read timeouts).
        if not decoder.buffered_bytes:
            connection.partial_frame_since = connection.partial_header_since = None
            return
        if frames or not had_partial:
            connection.partial_frame_since = connection.partial_header_since = now
        if connection.partial_header_since is not None and decoder.header_buffered:
            connection.partial_header_since = None

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
        context = self._context
        assert context is not None and self._loop is not None
        on_handled = self._server._on_handled
        started_ns = time.perf_counter_ns() if on_handled is not None else 0
        # An async handler only makes its coroutine here; one that answers at once has answered.
        try:
            outcome = handler(context, command)
        except Exception as exc:
            response, failed = failure_answer(self._server._log, command, context.peer_address, exc)
            self._answered(connection, command, response, failed, started_ns)
            return
        if type(outcome) is ReadyAnswer:
            self._answered(connection, command, outcome.response, False, started_ns)
            return
        if type(outcome) is LaterAnswer:
            connection._inflight_requests += 1
            outcome.attach(partial(self._later_answered, connection, command, started_ns))
            return
        task = self._loop.create_task(self._handle(outcome, connection, command, started_ns))
        self._server._track(task)

    async def _handle(
        self,
        outcome: Awaitable[RemotingCommand | None],
        connection: ServerConnection,
        request: RemotingCommand,
        started_ns: int,
    ) -> None:
        context = self._context
        assert context is not None
        failed = False
        connection._inflight_requests += 1
        try:
            response = await outcome
        except Exception as exc:
            response, failed = failure_answer(self._server._log, request, context.peer_address, exc)
        finally:
            connection._inflight_requests -= 1
        self._answered(connection, request, response, failed, started_ns)

    def _later_answered(
        self,
        connection: ServerConnection,
        request: RemotingCommand,
        started_ns: int,
        response: RemotingCommand | None,
        exc: Exception | None,
    ) -> None:
        """A :class:`LaterAnswer`'s outcome, in the loop turn it came in."""
        connection._inflight_requests -= 1
        failed = False
        if exc is not None:
            context = self._context
            assert context is not None
            try:
                raise exc
            except Exception as raised:  # failure_answer logs the traceback of the one it handles
                response, failed = failure_answer(self._server._log, request, context.peer_address, raised)
        self._answered(connection, request, response, failed, started_ns)

    def _answered(
        self,
        connection: ServerConnection,
        request: RemotingCommand,
        response: RemotingCommand | None,
        failed: bool,
        started_ns: int,
    ) -> None:
        oneway = response is None or bool(request.flag & FLAG_ONEWAY)
        on_handled = self._server._on_handled
        if on_handled is not None:
            on_handled(
                request.code, None if oneway else response, failed, time.perf_counter_ns() - started_ns
            )
        if not oneway:
            assert response is not None
            self._respond(connection, request, response)

    def _respond(
        self, connection: ServerConnection, request: RemotingCommand, response: RemotingCommand
    ) -> None:
        if connection.closed:
            return
        # The opaque and flag are the transport's business, whatever the handler built.
        response.opaque = request.opaque
        response.flag = (response.flag | FLAG_RESPONSE) & ~FLAG_ONEWAY
        if response.remark is not None and len(response.remark) > REMARK_MAX_CHARS:
            response.remark = shorten(response.remark, REMARK_MAX_CHARS)
        try:
            connection._write(response)
        except Exception as exc:
            # The handler built something the header cannot carry: answer that instead.
            self._server._log.error(
                f"unencodable-response:{request.code}",
                "cannot encode the response to request code %d: %s",
                request.code,
                shorten(str(exc), REMARK_MAX_CHARS),
            )
            fallback = request.response(ResponseCode.SYSTEM_ERROR, "the response could not be encoded")
            fallback.opaque = request.opaque
            try:
                connection._write(fallback)
            except Exception:
                connection.close()


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
        limits: connection count, write buffer and partial-frame limits.
        bad_request_log_interval_s: the shortest time between two log lines of one kind of
            bad input (a refused field, an undecodable frame, a limit reached).
        tls_mode: plaintext, plaintext or TLS (permissive), or TLS only (enforcing).
        ssl_context: the server's TLS context; required unless ``tls_mode`` is disabled.
        connection_ids: where connection ids come from (default: 1, 2, ... of this server's
            own); servers whose handlers track connections by id share one.
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
        limits: ServerLimits | None = None,
        bad_request_log_interval_s: float = 10.0,
        tls_mode: TlsMode = TlsMode.DISABLED,
        ssl_context: ssl.SSLContext | None = None,
        on_handled: HandledHook | None = None,
        connection_ids: Iterator[int] | None = None,
    ) -> None:
        if tls_mode is not TlsMode.DISABLED and ssl_context is None:
            raise ValueError(f"TLS mode {tls_mode.value} needs an ssl_context")
        self.host = host
        self.tls_mode = tls_mode
        self._ssl_context = ssl_context
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout_s = idle_timeout_s
        self.limits = limits if limits is not None else ServerLimits()
        self._log = LogLimiter(logger, bad_request_log_interval_s)
        self._requested_port = port
        self._handlers: dict[int, Handler] = {int(code): h for code, h in (handlers or {}).items()}
        self._on_connection_closed = on_connection_closed
        self._on_handled = on_handled
        self._connections: dict[int, ServerConnection] = {}
        # Servers that share their handlers' connection state share this counter too.
        self._connection_ids = connection_ids if connection_ids is not None else itertools.count(1)
        self._inflight: set[asyncio.Task[None]] = set()
        self._server: asyncio.AbstractServer | SniffingServer | None = None
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
        try:
            if self.tls_mode is TlsMode.PERMISSIVE and self._ssl_context is not None:
                self._server = await start_sniffing_server(
                    lambda: _ServerProtocol(self), self.host, self._requested_port, self._ssl_context
                )
            else:
                tls = self._ssl_context if self.tls_mode is TlsMode.ENFORCING else None
                self._server = await loop.create_server(
                    lambda: _ServerProtocol(self),
                    self.host,
                    self._requested_port,
                    reuse_address=True,
                    ssl=tls,
                )
        except OSError as exc:
            raise ListenError.from_os_error("listenPort", self.host, self._requested_port, exc) from exc
        sockets = getattr(self._server, "sockets", None) or ()
        if sockets:
            self._bound_port = int(sockets[0].getsockname()[1])
        # What the sockets really bound (``0.0.0.0`` is every interface), not what was asked.
        bound = (_host_port(sock.getsockname()) for sock in sockets)
        self.bound_addresses = [f"{host}:{port}" for host, port in bound]
        self._idle_task = loop.create_task(self._close_idle_connections())
        logger.info(
            "remoting server listening on %s (TLS %s)", ", ".join(self.bound_addresses), self.tls_mode.value
        )

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
        limits = self.limits
        read_timeout_s = min(limits.header_read_timeout_ms, limits.frame_read_timeout_ms) / 1000
        interval_s = min(max(min(self.idle_timeout_s, read_timeout_s) / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval_s)
            now = time.monotonic()
            deadline = now - self.idle_timeout_s
            header_deadline = now - limits.header_read_timeout_ms / 1000
            frame_deadline = now - limits.frame_read_timeout_ms / 1000
            for connection in list(self._connections.values()):
                header_since = connection.partial_header_since
                frame_since = connection.partial_frame_since
                if (header_since is not None and header_since < header_deadline) or (
                    frame_since is not None and frame_since < frame_deadline
                ):
                    self._log.warning(
                        "slow-frame",
                        "closing connection from %s: a frame still incomplete after its read "
                        "timeout (headerReadTimeoutMillis %d, frameReadTimeoutMillis %d)",
                        connection.peer_address,
                        limits.header_read_timeout_ms,
                        limits.frame_read_timeout_ms,
                    )
                    connection.close()
                elif connection.last_active_monotonic < deadline and not connection._inflight_requests:
                    logger.info("closing idle connection from %s", connection.peer_address)
                    connection.close()
