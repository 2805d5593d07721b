"""The splice in front of the gRPC port: TLS and plaintext on one port, bad clients closed alone.

Method: a real grpc.aio server with one echo method on a TLS and a plaintext port of
127.0.0.1, a SplicingServer in front on port 0, and real clients (grpc.aio channels, raw
sockets), on asyncio's loop and uvloop's (this directory's conftest). The echo answers with the
address :func:`spliced_client` finds behind its caller's connection.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest

from orbitmq.proxy.tls import self_signed_certificate
from orbitmq.transport.splice import SplicingServer, spliced_client

METHOD = "/orbitmq.test.Echo/Echo"


@dataclass
class Spliced:
    splice: SplicingServer
    cert: bytes

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.splice.port}"


async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    kind, _, rest = str(context.peer()).partition(":")
    host, _, port = rest.rpartition(":")
    client = spliced_client(host, int(port))
    return request + b"|" + (f"{client[0]}:{client[1]}" if client else "direct").encode()


@pytest.fixture(scope="module")
def certificate() -> tuple[bytes, bytes]:
    return self_signed_certificate()


@pytest.fixture
async def spliced(certificate: tuple[bytes, bytes]) -> AsyncIterator[Spliced]:
    cert, key = certificate
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "orbitmq.test.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
            )
        ]
    )
    tls_port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
    plain_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    splice = SplicingServer(tls_port, plain_port)
    await splice.start("127.0.0.1", 0)
    try:
        yield Spliced(splice, cert)
    finally:
        splice.stop_accepting()
        await server.stop(grace=None)
        await splice.close()


async def call(channel: grpc.aio.Channel, body: bytes) -> bytes:
    reply: bytes = await channel.unary_unary(METHOD)(body, timeout=5)
    return reply


async def wait_until(condition: object, timeout_s: float = 5.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        if callable(condition) and condition():
            return True
        await asyncio.sleep(0.02)
    return bool(callable(condition) and condition())


async def test_splice_serves_plaintext_and_tls_grpc_clients_on_one_port(spliced: Spliced) -> None:
    async with grpc.aio.insecure_channel(spliced.target) as plain:
        reply = await call(plain, b"plain")
    body, _, client = reply.partition(b"|")
    assert body == b"plain"
    assert client.startswith(b"127.0.0.1:"), "the server sees the client's own address"
    assert int(client.rpartition(b":")[2]) != spliced.splice.port
    tls = grpc.ssl_channel_credentials(root_certificates=spliced.cert)
    options = [("grpc.ssl_target_name_override", "localhost")]
    async with grpc.aio.secure_channel(spliced.target, tls, options=options) as secure:
        big = os.urandom(3 * 1024 * 1024)
        replies = await asyncio.gather(call(secure, big), call(secure, b"tls"))
    assert replies[0].rpartition(b"|")[0] == big
    assert replies[1].partition(b"|")[0] == b"tls"
    # The bytes went through TLS: a client that trusts nothing cannot talk to the same port.
    with pytest.raises(grpc.aio.AioRpcError):
        untrusting = grpc.ssl_channel_credentials(root_certificates=None)
        async with grpc.aio.secure_channel(spliced.target, untrusting, options=options) as refused:
            await refused.unary_unary(METHOD)(b"x", timeout=2)


async def test_splice_garbage_closes_that_connection_only(spliced: Spliced) -> None:
    loop = asyncio.get_running_loop()
    async with grpc.aio.insecure_channel(spliced.target) as plain:
        assert (await call(plain, b"before")).startswith(b"before|")
        for garbage in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x16\x00garbage-that-is-no-tls" * 50):
            sock = socket.create_connection(("127.0.0.1", spliced.splice.port))
            sock.setblocking(False)
            try:
                await loop.sock_sendall(sock, garbage)
                received = b""
                while chunk := await asyncio.wait_for(loop.sock_recv(sock, 65536), 5):
                    received += chunk
            except ConnectionResetError:
                pass
            finally:
                sock.close()
        # The gRPC client's own connection was left alone.
        assert (await call(plain, b"after")).startswith(b"after|")
    assert await wait_until(lambda: spliced.splice.open_connections == 0)


async def test_splice_client_closing_mid_handshake_leaves_no_socket_or_task(spliced: Spliced) -> None:
    loop = asyncio.get_running_loop()
    # Warm up (grpc's own threads and sockets), then count this process's descriptors and tasks.
    async with grpc.aio.insecure_channel(spliced.target) as plain:
        await call(plain, b"warm")
    assert await wait_until(lambda: spliced.splice.open_connections == 0)
    fds, tasks = len(os.listdir("/proc/self/fd")), len(asyncio.all_tasks())
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    hello = ssl.create_default_context().wrap_bio(incoming, outgoing)
    try:
        hello.do_handshake()
    except ssl.SSLWantReadError:
        pass
    client_hello = outgoing.read()
    assert client_hello[0] == 0x16
    for round_ in range(30):
        sock = socket.create_connection(("127.0.0.1", spliced.splice.port))
        sock.setblocking(False)
        if round_ % 3 == 0:
            await loop.sock_sendall(sock, client_hello[: len(client_hello) // 2])
        elif round_ % 3 == 1:
            await loop.sock_sendall(sock, client_hello)
            await asyncio.sleep(0.01)
        sock.close()
    spliced.splice.first_byte_timeout_s = 0.2
    silent = socket.create_connection(("127.0.0.1", spliced.splice.port))
    try:
        assert await wait_until(
            lambda: spliced.splice.open_connections == 0 and spliced.splice.connecting == 0
        ), "a silent client is closed after first_byte_timeout_s"
    finally:
        silent.close()
    assert await wait_until(lambda: len(os.listdir("/proc/self/fd")) <= fds)
    assert len(asyncio.all_tasks()) <= tasks
