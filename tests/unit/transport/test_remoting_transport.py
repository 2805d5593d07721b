"""RemotingServer and RemotingClient over real sockets on 127.0.0.1.

Goal: the transport's contract (architecture.md, "orbitmq.transport") holds on both event
loops OrbitMQ runs on. Method: a real server on port 0 and a RemotingClient (or a raw socket
where the client would hide the behaviour) in the same loop; every test runs on asyncio's loop
and on uvloop's. Waits use events rather than sleeps wherever the order can be observed.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from orbitmq.errors import (
    BrokerResponseError,
    ConnectError,
    ConnectionClosedError,
    RequestTimeoutError,
)
from orbitmq.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, ResponseCode, SerializeType
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.frame import FrameDecoder
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.server import RemotingServer, RequestContext, ServerConnection, ServerLimits

ECHO, SLOW, FAIL, REFUSE, CAPTURE, CLOSE = 1001, 1002, 1003, 1004, 1005, 1006

ServerFactory = Callable[..., Awaitable[RemotingServer]]


async def echo(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    return request.response(
        ResponseCode.SUCCESS, None, {"echo": request.ext_fields.get("v", "")}, request.body
    )


@pytest.fixture
async def make_server() -> AsyncIterator[ServerFactory]:
    servers: list[RemotingServer] = []

    async def factory(handlers: dict[int, Any] | None = None, **kwargs: Any) -> RemotingServer:
        server = RemotingServer("127.0.0.1", 0, {ECHO: echo, **(handlers or {})}, **kwargs)
        await server.start()
        servers.append(server)
        return server

    yield factory
    for server in servers:
        await server.stop(grace_s=0.1)


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    remoting_client = RemotingClient(connect_timeout_ms=1000)
    yield remoting_client
    await remoting_client.close()


def addr(server: RemotingServer) -> str:
    return f"127.0.0.1:{server.port}"


def request(code: int, value: str = "", body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.request(code, {"v": value}, body)


async def test_server_echoes_request_over_client(make_server: ServerFactory, client: RemotingClient) -> None:
    server = await make_server()
    response = await client.invoke(addr(server), request(ECHO, "x", b"body"))
    assert (response.code, response.ext_fields["echo"], response.body) == (0, "x", b"body")
    assert response.flag & FLAG_RESPONSE


async def test_server_slow_handler_does_not_delay_fast_one_on_same_connection(
    make_server: ServerFactory, client: RemotingClient
) -> None:
    release = asyncio.Event()

    async def slow(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        await release.wait()
        return req.response(ResponseCode.SUCCESS, None, {"echo": "slow"})

    server = await make_server({SLOW: slow})
    slow_call = asyncio.ensure_future(client.invoke(addr(server), request(SLOW), timeout_ms=5000))
    fast = await client.invoke(addr(server), request(ECHO, "fast"), timeout_ms=2000)
    # The fast answer arrived while the slow request is still parked: out of order, matched by opaque.
    assert fast.ext_fields["echo"] == "fast"
    assert not slow_call.done()
    assert len(server.connections) == 1
    release.set()
    assert (await slow_call).ext_fields["echo"] == "slow"


async def test_server_matches_many_concurrent_responses_by_opaque(
    make_server: ServerFactory, client: RemotingClient
) -> None:
    async def jitter(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep((int(req.ext_fields["v"]) % 5) / 1000)
        return req.response(ResponseCode.SUCCESS, None, {"echo": req.ext_fields["v"]})

    server = await make_server({SLOW: jitter})
    responses = await asyncio.gather(
        *(client.invoke(addr(server), request(SLOW, str(i))) for i in range(200))
    )
    assert [r.ext_fields["echo"] for r in responses] == [str(i) for i in range(200)]


async def test_server_unknown_code_answers_not_supported(
    make_server: ServerFactory, client: RemotingClient
) -> None:
    server = await make_server()
    response = await client.invoke(addr(server), request(4242))
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "4242" in (response.remark or "")


async def test_server_handler_exception_answers_system_error_and_keeps_connection(
    make_server: ServerFactory, client: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    async def fail(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        raise ValueError("disk on fire")

    server = await make_server({FAIL: fail})
    response = await client.invoke(addr(server), request(FAIL))
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "disk on fire")
    assert "Traceback" in caplog.text
    connection_ids = [c.id for c in server.connections]
    assert (await client.invoke(addr(server), request(ECHO, "again"))).ext_fields["echo"] == "again"
    assert [c.id for c in server.connections] == connection_ids


async def test_server_broker_response_error_answers_its_code_and_remark(
    make_server: ServerFactory, client: RemotingClient
) -> None:
    async def refuse(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        raise BrokerResponseError(ResponseCode.NO_PERMISSION, "topic T is not writable")

    server = await make_server({REFUSE: refuse})
    response = await client.invoke(addr(server), request(REFUSE))
    assert (response.code, response.remark) == (ResponseCode.NO_PERMISSION, "topic T is not writable")


async def test_server_on_handled_hears_each_request_with_its_outcome_and_time(
    make_server: ServerFactory, client: RemotingClient
) -> None:
    heard: list[tuple[int, int | None, bool, int]] = []
    arrived = asyncio.Event()

    def on_handled(code: int, response: RemotingCommand | None, failed: bool, elapsed_ns: int) -> None:
        heard.append((code, None if response is None else response.code, failed, elapsed_ns))
        if code == CAPTURE:
            arrived.set()

    slept_ns: list[int] = []

    async def slow(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        # Timed by the server's clock: the loop's timer (milliseconds under uvloop) may end
        # the sleep a fraction of a millisecond before 50 ms have passed by perf_counter_ns.
        started = time.perf_counter_ns()
        await asyncio.sleep(0.05)
        slept_ns.append(time.perf_counter_ns() - started)
        return req.response(ResponseCode.SUCCESS)

    async def fail(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        raise ValueError("disk on fire")

    async def refuse(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        raise BrokerResponseError(ResponseCode.NO_PERMISSION, "topic T is not writable")

    async def record(ctx: RequestContext, req: RemotingCommand) -> None:
        return None

    server = await make_server(
        {SLOW: slow, FAIL: fail, REFUSE: refuse, CAPTURE: record}, on_handled=on_handled
    )
    for code in (SLOW, FAIL, REFUSE):
        await client.invoke(addr(server), request(code))
    await client.invoke_oneway(addr(server), request(CAPTURE))
    await asyncio.wait_for(arrived.wait(), 2)
    assert [entry[:3] for entry in heard] == [
        (SLOW, ResponseCode.SUCCESS, False),
        (FAIL, ResponseCode.SYSTEM_ERROR, True),
        (REFUSE, ResponseCode.NO_PERMISSION, False),
        (CAPTURE, None, False),
    ]
    assert heard[0][3] >= slept_ns[0] >= 40_000_000  # the handler's time, in nanoseconds


async def raw_exchange(
    server: RemotingServer, payload: bytes, timeout_s: float = 2.0
) -> list[RemotingCommand]:
    """Send raw bytes, then read frames until the server closes or goes quiet."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(payload)
    decoder = FrameDecoder()
    commands: list[RemotingCommand] = []
    try:
        while True:
            data = await asyncio.wait_for(reader.read(65536), timeout_s)
            if not data:
                commands.append(RemotingCommand(code=-1))  # marks "closed by the server"
                break
            commands.extend(decode_command(frame) for frame in decoder.feed(data))
    except TimeoutError:
        pass
    finally:
        writer.close()
    return commands


async def test_server_oneway_request_runs_handler_without_answer(make_server: ServerFactory) -> None:
    seen: list[str] = []

    async def record(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        seen.append(req.ext_fields["v"])
        return req.response(ResponseCode.SUCCESS)

    server = await make_server({CAPTURE: record})
    oneway = RemotingCommand.request(CAPTURE, {"v": "oneway"}, oneway=True)
    oneway.opaque = 1
    normal = RemotingCommand.request(ECHO, {"v": "normal"})
    normal.opaque = 2
    commands = await raw_exchange(server, oneway.encode() + normal.encode(), timeout_s=0.3)
    assert seen == ["oneway"]
    assert [c.opaque for c in commands] == [2]


async def test_client_oneway_reaches_handler(make_server: ServerFactory, client: RemotingClient) -> None:
    arrived = asyncio.Event()

    async def record(ctx: RequestContext, req: RemotingCommand) -> None:
        assert req.flag & FLAG_ONEWAY
        arrived.set()

    server = await make_server({CAPTURE: record})
    await client.invoke_oneway(addr(server), request(CAPTURE))
    await asyncio.wait_for(arrived.wait(), 2)


async def test_server_answers_in_the_request_serialization(make_server: ServerFactory) -> None:
    server = await make_server()
    binary = RemotingCommand.request(ECHO, {"v": "bin"})
    binary.serialize_type = SerializeType.ROCKETMQ
    binary.opaque = 9
    commands = await raw_exchange(server, binary.encode(), timeout_s=0.3)
    assert [(c.opaque, c.serialize_type, c.ext_fields["echo"]) for c in commands] == [
        (9, SerializeType.ROCKETMQ, "bin")
    ]


async def test_server_garbage_bytes_close_the_connection(make_server: ServerFactory) -> None:
    server = await make_server()
    garbage = struct.pack(">ii", 8, 0x7F000002) + b"\xff\xff\xff\xff"  # serialization type 0x7f
    commands = await raw_exchange(server, garbage)
    assert [c.code for c in commands] == [-1]


async def test_server_oversize_frame_closes_only_that_connection(
    make_server: ServerFactory, client: RemotingClient
) -> None:
    server = await make_server(max_frame_bytes=4096)
    other = RemotingClient()
    try:
        assert (await other.invoke(addr(server), request(ECHO, "before"))).code == 0
        with pytest.raises(ConnectionClosedError):
            await client.invoke(addr(server), request(ECHO, body=b"x" * 8192))
        assert (await other.invoke(addr(server), request(ECHO, "after"))).ext_fields["echo"] == "after"
    finally:
        await other.close()


async def test_server_sends_large_body_intact(make_server: ServerFactory, client: RemotingClient) -> None:
    server = await make_server()
    body = bytes(range(256)) * 4096  # 1 MiB
    response = await client.invoke(addr(server), request(ECHO, body=body), timeout_ms=10_000)
    assert response.body == body


async def test_server_request_to_client_is_answered_by_client_handler(make_server: ServerFactory) -> None:
    connections: list[ServerConnection] = []

    async def capture(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        connections.append(ctx.connection)
        return req.response(ResponseCode.SUCCESS)

    oneway_seen = asyncio.Event()

    async def on_notify(server_addr: str, req: RemotingCommand) -> RemotingCommand | None:
        if req.flag & FLAG_ONEWAY:
            oneway_seen.set()
            return None
        return req.response(ResponseCode.SUCCESS, None, {"group": req.ext_fields["consumerGroup"]})

    server = await make_server({CAPTURE: capture})
    remoting_client = RemotingClient(request_handlers={40: on_notify})
    try:
        await remoting_client.invoke(addr(server), request(CAPTURE))
        (connection,) = connections
        response = await connection.send_request(RemotingCommand.request(40, {"consumerGroup": "g1"}), 2000)
        assert (response.code, response.ext_fields["group"]) == (0, "g1")
        connection.send_oneway(RemotingCommand.request(40, {"consumerGroup": "g1"}))
        await asyncio.wait_for(oneway_seen.wait(), 2)
        unknown = await connection.send_request(RemotingCommand.request(39), 2000)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    finally:
        await remoting_client.close()


async def test_server_connection_close_fails_pending_server_request(make_server: ServerFactory) -> None:
    connections: list[ServerConnection] = []
    closed: list[int] = []

    async def capture(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        connections.append(ctx.connection)
        ctx.connection.add_close_callback(lambda c: closed.append(c.id))
        return req.response(ResponseCode.SUCCESS)

    received = asyncio.Event()

    async def never_answer(server_addr: str, req: RemotingCommand) -> None:
        received.set()
        await asyncio.Event().wait()

    server = await make_server({CAPTURE: capture})
    silent = RemotingClient(request_handlers={40: never_answer})
    await silent.invoke(addr(server), request(CAPTURE))
    (connection,) = connections
    pending = asyncio.ensure_future(connection.send_request(RemotingCommand.request(40), 5000))
    await asyncio.wait_for(received.wait(), 2)
    await silent.close()
    with pytest.raises(ConnectionClosedError):
        await pending
    assert closed == [connection.id] and connection.closed


async def test_client_timeout_raises_and_keeps_connection(
    make_server: ServerFactory, client: RemotingClient
) -> None:
    release = asyncio.Event()

    async def slow(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        await release.wait()
        return req.response(ResponseCode.SUCCESS)

    server = await make_server({SLOW: slow})
    with pytest.raises(RequestTimeoutError, match=addr(server)):
        await client.invoke(addr(server), request(SLOW), timeout_ms=50)
    ids = [c.id for c in server.connections]
    assert (await client.invoke(addr(server), request(ECHO, "ok"))).ext_fields["echo"] == "ok"
    assert [c.id for c in server.connections] == ids
    release.set()


async def test_client_connect_failure_raises_connect_error(client: RemotingClient) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ConnectError, match=str(port)):
        await client.invoke(f"127.0.0.1:{port}", request(ECHO))


async def test_client_bad_address_raises_connect_error(client: RemotingClient) -> None:
    with pytest.raises(ConnectError, match="nohost"):
        await client.invoke("nohost", request(ECHO))


async def test_client_connection_loss_fails_in_flight_and_reconnects(
    make_server: ServerFactory, client: RemotingClient
) -> None:
    async def close_it(ctx: RequestContext, req: RemotingCommand) -> None:
        ctx.connection.close()

    server = await make_server({CLOSE: close_it})
    with pytest.raises(ConnectionClosedError, match=addr(server)):
        await client.invoke(addr(server), request(CLOSE))
    assert (await client.invoke(addr(server), request(ECHO, "back"))).ext_fields["echo"] == "back"


async def test_server_closes_idle_connection(make_server: ServerFactory, client: RemotingClient) -> None:
    closed = asyncio.Event()
    server = await make_server(idle_timeout_s=0.2, on_connection_closed=lambda c: closed.set())
    await client.invoke(addr(server), request(ECHO))
    await asyncio.wait_for(closed.wait(), 3)
    assert server.connections == []
    assert (await client.invoke(addr(server), request(ECHO, "again"))).ext_fields["echo"] == "again"


async def test_server_stop_waits_for_in_flight_handler(
    make_server: ServerFactory, client: RemotingClient
) -> None:
    started = asyncio.Event()

    async def slow(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        started.set()
        await asyncio.sleep(0.2)
        return req.response(ResponseCode.SUCCESS, None, {"echo": "done"})

    server = await make_server({SLOW: slow})
    call = asyncio.ensure_future(client.invoke(addr(server), request(SLOW), timeout_ms=5000))
    await started.wait()
    await server.stop(grace_s=5)
    assert (await call).ext_fields["echo"] == "done"
    # The old connection may not have seen its close yet; either way nothing answers now.
    with pytest.raises((ConnectError, ConnectionClosedError)):
        await client.invoke(addr(server), request(ECHO))


async def test_server_stop_cancels_handlers_after_grace(
    make_server: ServerFactory, client: RemotingClient
) -> None:
    started = asyncio.Event()

    async def forever(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    server = await make_server({SLOW: forever})
    call = asyncio.ensure_future(client.invoke(addr(server), request(SLOW), timeout_ms=5000))
    await started.wait()
    await server.stop(grace_s=0.05)
    with pytest.raises(ConnectionClosedError):
        await call


async def test_server_pauses_reading_while_client_does_not_read(make_server: ServerFactory) -> None:
    server = await make_server(limits=ServerLimits(write_buffer_high_bytes=64 * 1024))
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", server.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        body = b"y" * 64 * 1024
        count = 64
        for opaque in range(1, count + 1):
            command = request(ECHO, body=body)
            command.opaque = opaque
            writer.write(command.encode())
        (connection,) = server.connections
        transport = connection._transport
        for _ in range(200):
            if not transport.is_reading():
                break
            await asyncio.sleep(0.01)
        # 4 MiB of answers cannot fit the socket buffers: the server stopped reading requests.
        assert not transport.is_reading()
        decoder = FrameDecoder()
        opaques: list[int] = []
        while len(opaques) < count:
            data = await asyncio.wait_for(reader.read(1 << 20), 5)
            assert data, "server closed the connection"
            opaques.extend(decode_command(frame).opaque for frame in decoder.feed(data))
        assert sorted(opaques) == list(range(1, count + 1))
    finally:
        writer.close()
