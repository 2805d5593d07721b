"""The gRPC port's TLS modes in a real ``orbitmq standalone``, seen by grpcio clients.

Method: one standalone at its defaults (the gRPC port serves TLS beside plaintext with a
self-signed certificate, as Apache's proxy does), one with ``tls.server.mode=enforcing`` and a
certificate made by the test, and one with ``tlsTestModeEnable=false``. Each client sends a
QueryRoute: served means the reply carries a status, refused means the
call fails with UNAVAILABLE. The TLS clients trust the certificate the port presents (read
with ``ssl.get_server_certificate``), as the 5.x SDKs trust any.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy._pb import service_pb2_grpc as spb_grpc
from tests.support.certs import Pki, make_pki
from tests.support.processes import ServerProcess, start_standalone, write_conf

pytestmark = pytest.mark.integration

TOPIC = "GrpcTlsModes"
# A topic nobody made: the proxy answers TOPIC_NOT_FOUND, which is all these tests need.
ANSWERED = {pb.Code.OK, pb.Code.TOPIC_NOT_FOUND}


def query_route(target: str, credentials: grpc.ChannelCredentials | None) -> int:
    """QueryRoute's status code; raises grpc.RpcError when the port refuses the connection."""
    options = [("grpc.ssl_target_name_override", "localhost")] if credentials else []
    with (
        grpc.secure_channel(target, credentials, options=options)
        if credentials
        else grpc.insecure_channel(target)
    ) as channel:
        stub = spb_grpc.MessagingServiceStub(channel)
        request = spb.QueryRouteRequest(
            topic=pb.Resource(name=TOPIC),
            endpoints=pb.Endpoints(addresses=[pb.Address(host="127.0.0.1", port=int(target.split(":")[1]))]),
        )
        reply = stub.QueryRoute(request, timeout=10, metadata=[("x-mq-client-id", "tls-modes-test")])
        return int(reply.status.code)


def tls_to(port: int, roots: bytes | None = None) -> grpc.ChannelCredentials:
    if roots is None:
        roots = ssl.get_server_certificate(("127.0.0.1", port)).encode()
    return grpc.ssl_channel_credentials(root_certificates=roots)


def start(tmp_path: Path, name: str, **conf: object) -> ServerProcess:
    extra = ("-c", str(write_conf(tmp_path / f"{name}.conf", conf))) if conf else ()
    return start_standalone(tmp_path, *extra, "--bind-address", "127.0.0.1", name=name)


@pytest.fixture(scope="module")
def default_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    server = start(tmp_path_factory.mktemp("grpc-default"), "default")
    try:
        yield server.extra_ports[1]
    finally:
        server.stop()


def test_grpc_port_serves_plaintext_and_tls_clients_on_one_port_by_default(default_port: int) -> None:
    target = f"127.0.0.1:{default_port}"
    assert query_route(target, None) in ANSWERED
    assert query_route(target, tls_to(default_port)) in ANSWERED
    # Self-signed, made at start: a client that verifies against the system's CAs is refused.
    with pytest.raises(grpc.RpcError):
        query_route(target, grpc.ssl_channel_credentials())
    # Both kinds at once, on the same port.
    assert query_route(target, None) in ANSWERED


def test_grpc_port_closes_a_garbage_connection_and_keeps_serving(default_port: int) -> None:
    for garbage in (b"\x00" * 64, b"\x16\x03\x01\x00\x05hello", b"GET / HTTP/1.1\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", default_port), timeout=10) as sock:
            sock.sendall(garbage)
            # Closed by the server (EOF, or a reset): a timeout here would mean it kept the connection.
            with pytest.raises((ConnectionResetError, AssertionError)):
                while True:
                    chunk = sock.recv(65536)
                    assert chunk, "closed by the server"
    assert query_route(f"127.0.0.1:{default_port}", None) in ANSWERED


def test_grpc_port_enforcing_refuses_plaintext(tmp_path: Path) -> None:
    pki: Pki = make_pki(tmp_path / "pki")
    server = start(
        tmp_path,
        "enforcing",
        **{
            "tls.server.mode": "enforcing",
            "tls.server.certPath": str(pki.server_cert),
            "tls.server.keyPath": str(pki.server_key),
        },
    )
    try:
        port = server.extra_ports[1]
        assert query_route(f"127.0.0.1:{port}", tls_to(port, pki.ca.read_bytes())) in ANSWERED
        with pytest.raises(grpc.RpcError) as refused:
            query_route(f"127.0.0.1:{port}", None)
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop()


def test_grpc_port_test_mode_off_serves_plaintext_only(tmp_path: Path) -> None:
    server = start(tmp_path, "plaintext", tlsTestModeEnable=False)
    try:
        port = server.extra_ports[1]
        assert query_route(f"127.0.0.1:{port}", None) in ANSWERED
        with pytest.raises((grpc.RpcError, ssl.SSLError, OSError)):
            query_route(f"127.0.0.1:{port}", tls_to(port))
    finally:
        server.stop()
