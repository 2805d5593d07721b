"""One public port in front of two local ones: a connection's first byte picks where it goes.

grpc's server takes one kind of credentials per port and cannot look at a connection before
its handshake, so a port that serves TLS and plaintext side by side (``tls.server.mode=
permissive``, as RocketMQ's proxy serves its gRPC port) is a :class:`SplicingServer` in front of
two local ports of the same grpc server, one TLS and one plaintext, bound to 127.0.0.1. The first
byte a client sends decides, as on the remoting ports (``transport.tls``): 0x16 opens a TLS
handshake record and goes to the TLS port, anything else (HTTP/2's ``PRI *`` preface, or
garbage, which that port then refuses) to the plaintext one.

Bytes are copied by two ``asyncio.Protocol`` objects per connection, chunk by chunk as the loop
reads them (no per-byte work, no task per connection once connected), with flow control both
ways: a side whose write buffer fills stops the other side's reads until it drains.

The local ports see every client as 127.0.0.1; :func:`spliced_client` tells the server who
is behind one of its local connections (the caller's address for ACL white lists and
``BORN_HOST``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from typing import cast

from orbitmq.transport.tls import FIRST_BYTE_TIMEOUT_S, TLS_HANDSHAKE_BYTE

__all__ = ["SplicingServer", "spliced_client"]

logger = logging.getLogger(__name__)

# (local host, local port) of a spliced connection to a local port -> the client's address.
_CLIENTS: dict[tuple[str, int], tuple[str, int]] = {}


def spliced_client(host: str, port: int) -> tuple[str, int] | None:
    """The client behind the connection a :class:`SplicingServer` opened from ``host:port``, or
    None when no splice of this process opened it."""
    return _CLIENTS.get((host, port))


class SplicingServer:
    """Listens on a public address and splices each connection to ``tls_port`` or ``plain_port``
    on ``local_host`` by its first byte (see the module docstring)."""

    def __init__(self, tls_port: int, plain_port: int, *, local_host: str = "127.0.0.1") -> None:
        self._targets = {True: (local_host, tls_port), False: (local_host, plain_port)}
        self._server: asyncio.Server | None = None
        self._open: set[_ClientSide] = set()
        self._connecting: set[asyncio.Task[None]] = set()
        self.first_byte_timeout_s = FIRST_BYTE_TIMEOUT_S

    @property
    def open_connections(self) -> int:
        """Client connections accepted and not yet closed."""
        return len(self._open)

    @property
    def connecting(self) -> int:
        """Connections to a local port under way."""
        return len(self._connecting)

    @property
    def port(self) -> int:
        """The bound public port (after :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("SplicingServer.port used before start()")
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self, host: str, port: int) -> None:
        """Listen on ``host:port`` (0: an ephemeral port).

        Raises:
            OSError: the address cannot be bound.
        """
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _ClientSide(self), host or None, port, backlog=1024, reuse_address=True
        )

    def stop_accepting(self) -> None:
        """Close the public port; connections already spliced go on."""
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        """Stop listening and close every spliced connection."""
        if self._server is None:
            return
        self._server.close()
        for client in list(self._open):
            client.abort()
        for task in list(self._connecting):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._server.wait_closed()
        self._server = None


class _ClientSide(asyncio.Protocol):
    """The public side of one connection: picks the local port, then forwards what it reads."""

    def __init__(self, splice: SplicingServer) -> None:
        self._splice = splice
        self._transport: asyncio.Transport | None = None
        self._local: _LocalSide | None = None
        self._pending: list[bytes] | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._silence: asyncio.TimerHandle | None = None
        self._closed = False
        self.peer: tuple[str, int] = ("", 0)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = (str(peer[0]), int(peer[1]))
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._splice._open.add(self)
        self._silence = asyncio.get_running_loop().call_later(self._splice.first_byte_timeout_s, self.abort)

    def data_received(self, data: bytes) -> None:
        if self._local is not None:
            self._local.write(data)
        elif self._pending is not None:
            self._pending.append(data)
        else:
            self._pending = [data]
            if self._silence is not None:
                self._silence.cancel()
            if self._transport is not None:
                self._transport.pause_reading()
            tls = data[0] == TLS_HANDSHAKE_BYTE
            task = asyncio.get_running_loop().create_task(self._connect(*self._splice._targets[tls]))
            self._connecting = task
            self._splice._connecting.add(task)
            task.add_done_callback(self._splice._connecting.discard)

    async def _connect(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, local = await loop.create_connection(lambda: _LocalSide(self), host, port)
        except OSError as exc:
            logger.warning("splice to %s:%d failed: %s", host, port, exc)
            self.abort()
            return
        if self._closed:
            transport.close()
            return
        self._local = local
        for chunk in self._pending or ():
            local.write(chunk)
        self._pending = None
        self.resume_reading()

    def eof_received(self) -> bool | None:
        # HTTP/2 does not half-close: the client is done, so is the connection.
        if self._local is not None:
            self._local.close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._splice._open.discard(self)
        if self._silence is not None:
            self._silence.cancel()
        if self._local is not None:
            self._local.close()
        self._pending = None

    def pause_writing(self) -> None:
        if self._local is not None:
            self._local.pause_reading()

    def resume_writing(self) -> None:
        if self._local is not None:
            self._local.resume_reading()

    # -- called by the local side --

    def write(self, data: bytes) -> None:
        if self._transport is not None and not self._closed:
            self._transport.write(data)

    def pause_reading(self) -> None:
        if self._transport is not None and not self._closed:
            self._transport.pause_reading()

    def resume_reading(self) -> None:
        if self._transport is not None and not self._closed:
            self._transport.resume_reading()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        if self._connecting is not None:
            self._connecting.cancel()
        if self._transport is not None:
            self._transport.abort()


class _LocalSide(asyncio.Protocol):
    """The connection to the local port: forwards what it reads to the client."""

    def __init__(self, client: _ClientSide) -> None:
        self._client = client
        self._transport: asyncio.Transport | None = None
        self._key: tuple[str, int] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        local = transport.get_extra_info("sockname")
        if isinstance(local, tuple) and len(local) >= 2:
            self._key = (str(local[0]), int(local[1]))
            _CLIENTS[self._key] = self._client.peer
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self._client.write(data)

    def eof_received(self) -> bool | None:
        self._client.close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._key is not None:
            _CLIENTS.pop(self._key, None)
        self._client.close()

    def pause_writing(self) -> None:
        self._client.pause_reading()

    def resume_writing(self) -> None:
        self._client.resume_reading()

    # -- called by the client side --

    def write(self, data: bytes) -> None:
        if self._transport is not None:
            self._transport.write(data)

    def pause_reading(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def resume_reading(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
