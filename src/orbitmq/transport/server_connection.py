"""One accepted client connection of a :class:`~orbitmq.transport.server.RemotingServer`.

What handlers and server-side services hold to reach a client: its address, a close
callback, and requests from the server to the client (``send_request`` waits for the answer,
matched by opaque; ``send_oneway`` does not). The server's protocol object feeds it: writes
go through a :class:`~orbitmq.transport.connection.FrameWriter`, answers to its requests
complete their futures, and closing fails whatever is still waiting. It also carries the
per-connection state the server's limits read (when the partial frame now buffered began).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable

from orbitmq.errors import ConnectionClosedError, RequestTimeoutError
from orbitmq.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, SerializeType
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import FrameWriter

__all__ = ["ServerConnection"]

logger = logging.getLogger("orbitmq.transport.server")

_OPAQUE_MASK = 0x7FFFFFFF  # opaque is a signed 32-bit int in the binary header


class ServerConnection:
    """One accepted client connection, as handlers and server-side services see it."""

    def __init__(self, connection_id: int, transport: asyncio.Transport, peer: tuple[str, int]) -> None:
        self.id = connection_id
        self.peer_host, self.peer_port = peer
        self.last_active_monotonic = time.monotonic()
        self._transport = transport
        self._writer = FrameWriter(transport)
        self._closed = False
        # The first byte of the partial frame now buffered, and whether its header is still due
        # (monotonic seconds; None when no partial frame is buffered / its header has arrived).
        self.partial_frame_since: float | None = None
        self.partial_header_since: float | None = None
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
