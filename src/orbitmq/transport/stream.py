"""Plain byte streams over TCP, for links that do not speak the remoting protocol.

The HA link between a master and its slaves (``broker.replication``) is raw bytes on its own
port: the slave reports offsets, the master streams CommitLog bytes. This module gives it the
socket part and nothing else, so the replication code stays a pair of sans-IO decoders driven
by small asyncio loops:

- :class:`StreamServer` accepts connections and runs ``on_connection(stream)`` in a task per
  connection; :meth:`StreamServer.stop` closes the listener and every open stream and waits
  for the handlers to end.
- :func:`open_stream` connects, with a timeout.
- :class:`ByteStream` reads what has arrived (up to a limit) and writes with back-pressure
  (:meth:`ByteStream.drain` waits while the kernel's and asyncio's buffers are full).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable

from orbitmq.errors import ConnectError, ConnectionClosedError, RequestTimeoutError
from orbitmq.transport.connection import split_address

__all__ = ["ByteStream", "StreamServer", "open_stream"]

logger = logging.getLogger(__name__)

WRITE_BUFFER_HIGH_BYTES = 4 * 1024 * 1024
"""drain() waits while more than this many written bytes are still queued in asyncio."""


class ByteStream:
    """One TCP connection as a byte stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        writer.transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH_BYTES)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # Small offset reports must not wait for Nagle's timer.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.peer_address = _format(writer.get_extra_info("peername"))
        self.local_address = _format(writer.get_extra_info("sockname"))

    @property
    def closed(self) -> bool:
        return self._writer.is_closing()

    async def read(self, size_max: int, timeout_s: float | None = None) -> bytes:
        """The bytes that have arrived (at least one, at most ``size_max``); b"" at end of stream.

        Raises:
            TimeoutError: nothing arrived within ``timeout_s``.
            ConnectionClosedError: the connection was reset.
        """
        try:
            async with asyncio.timeout(timeout_s):
                return await self._reader.read(size_max)
        except (ConnectionError, OSError) as exc:
            raise ConnectionClosedError(f"stream from {self.peer_address} broke: {exc}") from exc

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Queue ``data``; call :meth:`drain` to wait for room.

        Raises:
            ConnectionClosedError: the stream is closed.
        """
        if self._writer.is_closing():
            raise ConnectionClosedError(f"stream to {self.peer_address} is closed")
        self._writer.write(data)

    def writelines(self, chunks: list[bytes]) -> None:
        """Queue several buffers at once (one system call when the socket takes them all).

        Raises:
            ConnectionClosedError: the stream is closed.
        """
        if self._writer.is_closing():
            raise ConnectionClosedError(f"stream to {self.peer_address} is closed")
        self._writer.writelines(chunks)

    async def drain(self) -> None:
        """Wait until the queued bytes fall below the high-water mark.

        Raises:
            ConnectionClosedError: the peer went away.
        """
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            raise ConnectionClosedError(f"stream to {self.peer_address} broke: {exc}") from exc

    def close(self) -> None:
        self._writer.close()

    async def wait_closed(self) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()


def _format(name: object) -> str:
    if isinstance(name, tuple) and len(name) >= 2:
        return f"{name[0]}:{name[1]}"
    return str(name)


async def open_stream(address: str, timeout_ms: int) -> ByteStream:
    """Connect to ``host:port``.

    Raises:
        ConnectError: the address is malformed or refused the connection.
        RequestTimeoutError: the connection did not open within ``timeout_ms``.
    """
    host, port = split_address(address)
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            reader, writer = await asyncio.open_connection(host, port)
    except TimeoutError:
        raise RequestTimeoutError(f"connecting to {address} took more than {timeout_ms} ms") from None
    except OSError as exc:
        raise ConnectError(f"cannot connect to {address}: {exc}") from exc
    return ByteStream(reader, writer)


class StreamServer:
    """Accepts TCP connections and hands each to ``on_connection`` in its own task."""

    def __init__(self, host: str, port: int, on_connection: Callable[[ByteStream], Awaitable[None]]) -> None:
        self._host = host
        self._port = port
        self._on_connection = on_connection
        self._server: asyncio.Server | None = None
        self._streams: set[ByteStream] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The bound port (meaningful after :meth:`start`)."""
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def bound_addresses(self) -> list[str]:
        """``host:port`` of every listening socket, as really bound (empty before :meth:`start`)."""
        if self._server is None:
            return []
        return [f"{sock.getsockname()[0]}:{sock.getsockname()[1]}" for sock in self._server.sockets]

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self._host, self._port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stream = ByteStream(reader, writer)
        self._streams.add(stream)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._on_connection(stream)
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("stream from %s failed", stream.peer_address)
        finally:
            stream.close()
            self._streams.discard(stream)
            if task is not None:
                self._tasks.discard(task)

    async def stop(self) -> None:
        """Stop listening, close every stream and wait for the handlers to end."""
        if self._server is None:
            return
        self._server.close()
        for stream in list(self._streams):
            stream.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._server.wait_closed()
        self._server = None
