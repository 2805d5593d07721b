"""RemotingServer resource limits (ServerLimits): what a client that breaks one sees.

Method: a real server on 127.0.0.1 port 0 with tiny limits, raw sockets playing the
misbehaving client (one that opens too many connections, trickles a frame, declares a 2 GiB
frame, or never reads its answers), on asyncio's loop and on uvloop's. Each test also checks
the well-behaved side: connections within the limits keep being served.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.frame import FrameDecoder
from orbitmq.transport.log_limit import LogLimiter
from orbitmq.transport.server import RemotingServer, RequestContext, ServerLimits

ECHO, BIG = 1001, 1002

ServerFactory = Callable[..., Awaitable[RemotingServer]]


async def echo(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    return request.response(ResponseCode.SUCCESS, None, {}, request.body)


async def big(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    return request.response(ResponseCode.SUCCESS, None, {}, b"b" * (1 << 20))


_writers: list[asyncio.StreamWriter] = []


@pytest.fixture
async def make_server() -> AsyncIterator[ServerFactory]:
    servers: list[RemotingServer] = []

    async def factory(**kwargs: Any) -> RemotingServer:
        server = RemotingServer("127.0.0.1", 0, {ECHO: echo, BIG: big}, **kwargs)
        await server.start()
        servers.append(server)
        return server

    yield factory
    for writer in _writers:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass
    _writers.clear()
    for server in servers:
        await server.stop(grace_s=0.1)


async def _connect(server: RemotingServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    _writers.append(writer)
    return reader, writer


async def _echo_ok(
    server: RemotingServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> bool:
    command = RemotingCommand.request(ECHO, {}, b"ping")
    command.opaque = 7
    writer.write(command.encode())
    decoder = FrameDecoder()
    async with asyncio.timeout(5):
        while True:
            data = await reader.read(65536)
            if not data:
                return False
            for frame in decoder.feed(data):
                return decode_command(frame).body == b"ping"


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        async with asyncio.timeout(seconds):
            while True:
                data = await reader.read(65536)
                if not data:
                    return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


async def test_server_closes_a_connection_past_server_max_connections(make_server: ServerFactory) -> None:
    server = await make_server(limits=ServerLimits(max_connections=2))
    first, second = await _connect(server), await _connect(server)
    assert await _echo_ok(server, *first) and await _echo_ok(server, *second)
    third_reader, _ = await _connect(server)
    assert await _closed_within(third_reader, 2.0)
    assert len(server.connections) == 2
    assert await _echo_ok(server, *first)


async def test_server_closes_a_2gib_frame_at_once_without_buffering_it(make_server: ServerFactory) -> None:
    server = await make_server()
    reader, writer = await _connect(server)
    started = time.monotonic()
    writer.write(struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 64)
    assert await _closed_within(reader, 2.0)
    assert time.monotonic() - started < 2.0
    reader, writer = await _connect(server)
    writer.write(struct.pack(">I", 0x80000000) + b"\x00" * 64)  # 2 GiB as the unsigned reading
    assert await _closed_within(reader, 2.0)


@pytest.mark.parametrize(
    ("limits", "payload"),
    [
        # The header never completes: length and header word sent, 3 of 50 header bytes.
        (
            ServerLimits(header_read_timeout_ms=300, frame_read_timeout_ms=60_000),
            struct.pack(">ii", 60, 50) + b"{xx",
        ),
        # The header arrives, the body never does.
        (
            ServerLimits(header_read_timeout_ms=60_000, frame_read_timeout_ms=300),
            struct.pack(">ii", 1006, 2) + b"{}",
        ),
    ],
    ids=["header", "body"],
)
async def test_server_closes_a_frame_trickling_past_its_read_timeout(
    make_server: ServerFactory, limits: ServerLimits, payload: bytes
) -> None:
    server = await make_server(limits=limits)
    slow_reader, slow_writer = await _connect(server)
    fine = await _connect(server)
    slow_writer.write(payload)
    started = time.monotonic()
    # A byte now and then keeps the connection active, but does not reset the frame's clock.
    for _ in range(3):
        await asyncio.sleep(0.1)
        slow_writer.write(b"x")
    assert await _closed_within(slow_reader, 3.0)
    assert time.monotonic() - started >= 0.25
    assert await _echo_ok(server, *fine)


async def test_server_aborts_a_client_that_never_reads_past_write_buffer_max(
    make_server: ServerFactory,
) -> None:
    limits = ServerLimits(write_buffer_high_bytes=64 * 1024, write_buffer_max_bytes=256 * 1024)
    server = await make_server(limits=limits)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port))
    requests = b""
    for opaque in range(1, 9):  # eight 1 MiB answers, read by nobody
        command = RemotingCommand.request(BIG, {})
        command.opaque = opaque
        requests += command.encode()
    await asyncio.get_running_loop().sock_sendall(sock, requests)
    deadline = time.monotonic() + 5
    while server.connections and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert server.connections == []
    sock.close()
    assert await _echo_ok(server, *(await _connect(server)))


def test_log_limiter_writes_one_line_per_kind_per_interval_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    limiter = LogLimiter(logging.getLogger("limited"), 10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "limited"):
        for second in range(25):
            now[0] = float(second)
            limiter.warning("bad-field", "refused %d", second)
            limiter.warning("other", "other %d", second)
    lines = [record.getMessage() for record in caplog.records if record.getMessage().startswith("refused")]
    assert lines == [
        "refused 0",
        "refused 10 (and 9 more like it since the last such line)",
        "refused 20 (and 9 more like it since the last such line)",
    ]
    assert len([r for r in caplog.records if r.getMessage().startswith("other")]) == 3
