"""The client side of the remoting protocol: one multiplexed connection per server address.

A :class:`RemotingClient` keeps at most one TCP connection per ``host:port``, opened on first
use and reopened on the next use after it closed. Requests carry an opaque from one counter;
an in-flight map opaque -> future matches responses, which may arrive in any order.

Failure model (what the caller sees):

- connect refused, unreachable or slower than ``connect_timeout_ms``: :class:`ConnectError`;
- no response within the request's timeout: :class:`RequestTimeoutError`. The connection stays
  open (unlike the C++ client, which closes it), so other requests on it are unaffected;
- the connection closes (peer gone, undecodable frame): every in-flight request on it fails
  with :class:`ConnectionClosedError`.

Every request this client sends passes through ``signer`` first, when one is given (RocketMQ's
RPC hook: the ACL signature is computed over the final ext fields and body). With an
``ssl_context`` every connection is TLS.

Servers also send requests to clients over the same connection (``NOTIFY_CONSUMER_IDS_CHANGED``,
``CHECK_TRANSACTION_STATE`` ...); these go to ``request_handlers`` by code, and each runs in its
own task so it cannot hold up responses.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import typing
from collections.abc import Awaitable, Callable, Mapping

from orbitmq.errors import (
    ConnectError,
    ConnectionClosedError,
    ProtocolError,
    RequestTimeoutError,
)
from orbitmq.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, ResponseCode
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.frame import MAX_FRAME_BYTES, FrameDecoder

__all__ = ["ClientRequestHandler", "FrameWriter", "RemotingClient", "RequestSigner", "split_address"]

logger = logging.getLogger(__name__)

ClientRequestHandler = Callable[[str, RemotingCommand], Awaitable[RemotingCommand | None]]
"""``async def handler(server_addr, request) -> response | None`` for server -> client requests."""

RequestSigner = Callable[[RemotingCommand], None]
"""Adds credentials to a request's ext fields, in place, just before it is sent."""

_OPAQUE_MASK = 0x7FFFFFFF  # opaque is a signed 32-bit int in the binary header
_CLOSE_WAIT_S = 1.0  # how long close() waits for TLS connections to finish closing


def split_address(addr: str) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``.

    Raises:
        ConnectError: the address has no valid port.
    """
    host, _, port_text = addr.strip().rpartition(":")
    try:
        port = int(port_text)
    except ValueError:
        raise ConnectError(f"address {addr!r} is not host:port") from None
    if not host or not 0 < port < 65536:
        raise ConnectError(f"address {addr!r} is not host:port")
    return host, port


class FrameWriter:
    """Coalesces the frames written during one event-loop turn into one ``writelines`` call.

    Under load many responses complete in the same loop turn; handing them to the transport
    together costs one send system call instead of one per frame. Bodies are passed as they
    are, so a large body is not copied (uvloop hands the buffers to ``writev``).

    A server reading a batch of requests brackets it with :meth:`hold` and :meth:`release`:
    the responses answered while it reads go out in one call when it is done, in the same
    turn (a lone request's answer is not delayed), or sooner once ``HELD_FLUSH_BYTES`` wait.
    """

    __slots__ = (
        "_transport",
        "_buffers",
        "_scheduled",
        "_buffered_max",
        "_on_overflow",
        "_loop",
        "_holding",
        "_held_bytes",
        "writes",
    )

    HELD_FLUSH_BYTES = 256 * 1024
    """While held, frames are handed to the transport once this many bytes wait."""

    def __init__(
        self,
        transport: asyncio.Transport,
        buffered_max_bytes: int = 0,
        on_overflow: Callable[[int], None] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._transport = transport
        # The transport's loop (asyncio.get_running_loop() costs a getpid() call per frame).
        self._loop = loop or asyncio.get_running_loop()
        self._buffers: list[bytes] = []
        self._scheduled = False
        # When the transport holds more than this many unsent bytes after a flush,
        # ``on_overflow(bytes held)`` runs (the server aborts a client that does not read).
        self._buffered_max = buffered_max_bytes
        self._on_overflow = on_overflow
        self._holding = False
        self._held_bytes = 0
        self.writes = 0
        """``writelines`` calls made so far (what coalescing saves is counted in these)."""

    def write(self, command: RemotingCommand) -> None:
        """Queue one command's frame; it is sent at the end of this loop turn (or of the hold)."""
        body = command.body
        header = command.encode_header(len(body))
        self._buffers.append(header)
        if body:
            self._buffers.append(body)
        if self._holding:
            self._held_bytes += len(header) + len(body)
            if self._held_bytes >= self.HELD_FLUSH_BYTES:
                self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def hold(self) -> None:
        """Keep what is written until :meth:`release` (see the class docstring)."""
        self._holding = True

    def release(self) -> None:
        """End a :meth:`hold`: hand what it kept to the transport now."""
        self._holding = False
        if self._buffers:
            self.flush()

    def flush(self) -> None:
        """Hand every queued frame to the transport now."""
        self._scheduled = False
        self._held_bytes = 0
        buffers, self._buffers = self._buffers, []
        if buffers and not self._transport.is_closing():
            self._transport.writelines(buffers)
            self.writes += 1
            if self._buffered_max and self._on_overflow is not None:
                held = self._transport.get_write_buffer_size()
                if held > self._buffered_max:
                    self._on_overflow(held)


class _ClientProtocol(asyncio.Protocol):
    """One connection to one server address."""

    def __init__(self, client: RemotingClient, addr: str) -> None:
        self.addr = addr
        self._client = client
        self._decoder = FrameDecoder(MAX_FRAME_BYTES)
        self._transport: asyncio.Transport | None = None
        self._writer: FrameWriter | None = None
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.closed = False
        self.lost = asyncio.Event()
        self._writable: asyncio.Event | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = typing.cast(asyncio.Transport, transport)
        self._transport = transport
        self._writer = FrameWriter(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost.set()
        self._client._forget(self)
        pending, self.pending = self.pending, {}
        reason = f": {exc}" if exc else ""
        for opaque, future in pending.items():
            if not future.done():
                future.set_exception(
                    ConnectionClosedError(
                        f"connection to {self.addr} closed before opaque {opaque} was answered{reason}"
                    )
                )
        if self._writable is not None:
            self._writable.set()

    def pause_writing(self) -> None:
        self._writable = asyncio.Event()

    def resume_writing(self) -> None:
        if self._writable is not None:
            self._writable.set()
            self._writable = None

    async def wait_writable(self) -> None:
        """Wait while the write buffer is above its high-water mark."""
        writable = self._writable
        if writable is not None:
            await writable.wait()

    def data_received(self, data: bytes) -> None:
        try:
            for frame in self._decoder.feed(data):
                self._on_command(decode_command(frame))
        except ProtocolError as exc:
            logger.warning("closing connection to %s: %s", self.addr, exc)
            self.close()

    def _on_command(self, command: RemotingCommand) -> None:
        if command.flag & FLAG_RESPONSE:
            future = self.pending.pop(command.opaque, None)
            if future is not None and not future.done():
                future.set_result(command)
            else:
                logger.debug("dropping unmatched response opaque %d from %s", command.opaque, self.addr)
            return
        self._client._dispatch_server_request(self, command)

    def write(self, command: RemotingCommand) -> None:
        if self.closed or self._writer is None or self._transport is None or self._transport.is_closing():
            raise ConnectionClosedError(f"connection to {self.addr} is closed")
        self._writer.write(command)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.flush()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()


class RemotingClient:
    """Sends RocketMQ remoting requests to any number of servers.

    Args:
        connect_timeout_ms: how long a connection attempt may take.
        request_handlers: request code -> handler for requests the servers send to us.
        signer: called with every outgoing request just before it is written (ACL signing).
        ssl_context: when given, every connection is TLS (the server's address is checked
            when the context checks host names).
    """

    def __init__(
        self,
        *,
        connect_timeout_ms: int = 3000,
        request_handlers: Mapping[int, ClientRequestHandler] | None = None,
        signer: RequestSigner | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.connect_timeout_ms = connect_timeout_ms
        self._signer = signer
        self._ssl_context = ssl_context
        self._handlers = {int(code): h for code, h in (request_handlers or {}).items()}
        self._connections: dict[str, _ClientProtocol] = {}
        self._connecting: dict[str, asyncio.Task[_ClientProtocol]] = {}
        self._opaques = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def register(self, code: int, handler: ClientRequestHandler) -> None:
        """Serve server -> client request ``code`` with ``handler``."""
        self._handlers[int(code)] = handler

    async def invoke(self, addr: str, request: RemotingCommand, timeout_ms: int = 3000) -> RemotingCommand:
        """Send ``request`` to ``addr`` and return the response (whatever its code).

        Raises:
            ConnectError: ``addr`` cannot be connected.
            RequestTimeoutError: no response within ``timeout_ms``.
            ConnectionClosedError: the connection closed before the response arrived.
        """
        connection = await self._connection(addr)
        opaque = next(self._opaques) & _OPAQUE_MASK
        request.opaque = opaque
        request.flag &= ~(FLAG_RESPONSE | FLAG_ONEWAY)
        if self._signer is not None:
            self._signer(request)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        await connection.wait_writable()
        connection.pending[opaque] = future
        timer = loop.call_later(timeout_ms / 1000, _expire, future)
        try:
            connection.write(request)
            return await future
        except TimeoutError:
            raise RequestTimeoutError(
                f"no response from {addr} to request code {request.code} (opaque {opaque}) "
                f"within {timeout_ms} ms"
            ) from None
        finally:
            timer.cancel()
            connection.pending.pop(opaque, None)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send ``request`` to ``addr`` with the oneway flag; no response is expected.

        Raises:
            ConnectError: ``addr`` cannot be connected.
            ConnectionClosedError: the connection is closed.
        """
        connection = await self._connection(addr)
        request.opaque = next(self._opaques) & _OPAQUE_MASK
        request.flag = (request.flag | FLAG_ONEWAY) & ~FLAG_RESPONSE
        if self._signer is not None:
            self._signer(request)
        await connection.wait_writable()
        connection.write(request)

    def close_connection(self, addr: str) -> None:
        """Close the connection to ``addr``, if open; the next request reconnects."""
        connection = self._connections.get(addr)
        if connection is not None:
            connection.close()

    @property
    def addresses(self) -> list[str]:
        """Addresses with an open connection."""
        return list(self._connections)

    async def close(self) -> None:
        """Close every connection; in-flight requests fail with ConnectionClosedError."""
        self._closed = True
        for task in list(self._connecting.values()):
            task.cancel()
        connections = list(self._connections.values())
        for connection in connections:
            connection.close()
        for handler_task in list(self._tasks):
            handler_task.cancel()
        # One loop turn lets connection_lost run and fail what was still waiting. A TLS
        # connection closes after a close_notify exchange: give it a moment, then abort it, so
        # no socket outlives the client (or the event loop it belongs to).
        await asyncio.sleep(0)
        closing = [connection for connection in connections if not connection.lost.is_set()]
        if closing:
            await asyncio.wait([asyncio.ensure_future(c.lost.wait()) for c in closing], timeout=_CLOSE_WAIT_S)
            for connection in closing:
                if not connection.lost.is_set():
                    connection.abort()

    # -- connections -----------------------------------------------------------------------

    async def _connection(self, addr: str) -> _ClientProtocol:
        connection = self._connections.get(addr)
        if connection is not None and not connection.closed:
            return connection
        if self._closed:
            raise ConnectError(f"client is closed; cannot connect to {addr}")
        task = self._connecting.get(addr)
        if task is None:
            # Concurrent first requests to one address share one connection attempt.
            task = asyncio.get_running_loop().create_task(self._connect(addr))
            self._connecting[addr] = task
            task.add_done_callback(lambda _: self._connecting.pop(addr, None))
        return await asyncio.shield(task)

    async def _connect(self, addr: str) -> _ClientProtocol:
        host, port = split_address(addr)
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _ClientProtocol(self, addr),
                    host,
                    port,
                    ssl=self._ssl_context,
                    server_hostname=host if self._ssl_context is not None else None,
                ),
                self.connect_timeout_ms / 1000,
            )
        except TimeoutError:
            raise ConnectError(f"connect to {addr} timed out after {self.connect_timeout_ms} ms") from None
        except OSError as exc:
            # ssl.SSLError is an OSError: a failed handshake is a failed connect.
            raise ConnectError(f"cannot connect to {addr}: {exc}") from exc
        if self._closed:
            protocol.close()
            raise ConnectError(f"client closed while connecting to {addr}")
        self._connections[addr] = protocol
        return protocol

    def _forget(self, connection: _ClientProtocol) -> None:
        if self._connections.get(connection.addr) is connection:
            del self._connections[connection.addr]

    # -- server -> client requests -------------------------------------------------------

    def _dispatch_server_request(self, connection: _ClientProtocol, request: RemotingCommand) -> None:
        handler = self._handlers.get(request.code)
        if handler is None:
            if not request.flag & FLAG_ONEWAY:
                self._reply(
                    connection,
                    request,
                    request.response(
                        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                        f"request code {request.code} not supported by this client",
                    ),
                )
            return
        task = asyncio.get_running_loop().create_task(self._serve(connection, handler, request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(
        self, connection: _ClientProtocol, handler: ClientRequestHandler, request: RemotingCommand
    ) -> None:
        try:
            response = await handler(connection.addr, request)
        except Exception as exc:
            logger.exception(
                "handler for server request code %d from %s failed", request.code, connection.addr
            )
            response = request.response(ResponseCode.SYSTEM_ERROR, str(exc) or type(exc).__name__)
        if response is not None and not request.flag & FLAG_ONEWAY:
            self._reply(connection, request, response)

    @staticmethod
    def _reply(connection: _ClientProtocol, request: RemotingCommand, response: RemotingCommand) -> None:
        response.opaque = request.opaque
        response.flag = (response.flag | FLAG_RESPONSE) & ~FLAG_ONEWAY
        try:
            connection.write(response)
        except ConnectionClosedError:
            logger.debug(
                "connection to %s closed before replying to opaque %d", connection.addr, request.opaque
            )


def _expire(future: asyncio.Future[RemotingCommand]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())
