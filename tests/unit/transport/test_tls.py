"""TLS on the remoting port: enforcing, permissive (one port, both kinds), client certificates.

Method: a real RemotingServer on 127.0.0.1 port 0 with certificates made for the test
(``tests/support/certs.py``), RemotingClients with and without TLS, on asyncio's loop and
uvloop's (this directory's conftest). Refusals are observed as the client sees them: a failed
connect or a closed connection, never a served request.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orbitmq.errors import ConfigError, ConnectError, ConnectionClosedError
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.server import RemotingServer, RequestContext
from orbitmq.transport.tls import TlsConfig, TlsMode, client_ssl_context, merge_tls_config_file
from tests.support.certs import Pki, make_pki

ECHO = 1001


async def echo(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    tls = ctx.connection._transport.get_extra_info("ssl_object") is not None
    return request.response(ResponseCode.SUCCESS, None, {"tls": str(tls).lower()}, request.body)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


async def start(config: TlsConfig) -> RemotingServer:
    server = RemotingServer(
        "127.0.0.1", 0, {ECHO: echo}, tls_mode=config.server_mode, ssl_context=config.server_context()
    )
    await server.start()
    return server


@pytest.fixture
async def servers() -> AsyncIterator[list[RemotingServer]]:
    started: list[RemotingServer] = []
    yield started
    for server in started:
        await server.stop(grace_s=0.1)


async def call(client: RemotingClient, server: RemotingServer) -> RemotingCommand:
    try:
        return await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(ECHO, {}, b"hi"), 3000)
    finally:
        await client.close()


def tls_client(pki: Pki, **kwargs: object) -> RemotingClient:
    context = client_ssl_context(trust_cert_path=str(pki.ca), **kwargs)  # type: ignore[arg-type]
    return RemotingClient(connect_timeout_ms=3000, ssl_context=context)


def server_tls(pki: Pki, mode: TlsMode, **kwargs: object) -> TlsConfig:
    return TlsConfig(
        server_mode=mode,
        server_cert_path=str(pki.server_cert),
        server_key_path=str(pki.server_key),
        **kwargs,  # type: ignore[arg-type]
    )


async def test_tls_enforcing_serves_tls_and_refuses_plaintext(
    pki: Pki, servers: list[RemotingServer]
) -> None:
    server = await start(server_tls(pki, TlsMode.ENFORCING))
    servers.append(server)
    response = await call(tls_client(pki), server)
    assert response.code == ResponseCode.SUCCESS and response.ext_fields["tls"] == "true"
    # The server reads the plaintext frame as a bad ClientHello and hangs up.
    with pytest.raises(ConnectionClosedError):
        await call(RemotingClient(connect_timeout_ms=3000), server)


async def test_tls_permissive_serves_both_on_one_port(pki: Pki, servers: list[RemotingServer]) -> None:
    server = await start(server_tls(pki, TlsMode.PERMISSIVE))
    servers.append(server)
    plain = await call(RemotingClient(connect_timeout_ms=3000), server)
    secure = await call(tls_client(pki), server)
    assert (plain.code, plain.ext_fields["tls"]) == (ResponseCode.SUCCESS, "false")
    assert (secure.code, secure.ext_fields["tls"], secure.body) == (ResponseCode.SUCCESS, "true", b"hi")


async def test_tls_permissive_drops_a_silent_or_vanishing_peer_and_keeps_serving(
    pki: Pki, servers: list[RemotingServer]
) -> None:
    server = await start(server_tls(pki, TlsMode.PERMISSIVE))
    servers.append(server)
    with socket.create_connection(("127.0.0.1", server.port)):
        pass  # connects and leaves without a byte
    with socket.create_connection(("127.0.0.1", server.port)) as raw:
        raw.sendall(b"\x16\x03\x01garbage that is no ClientHello")
    assert (await call(RemotingClient(connect_timeout_ms=3000), server)).code == ResponseCode.SUCCESS


async def test_tls_client_refuses_a_server_its_ca_did_not_sign(
    pki: Pki, servers: list[RemotingServer]
) -> None:
    server = await start(server_tls(pki, TlsMode.ENFORCING))
    servers.append(server)
    rogue = RemotingClient(
        connect_timeout_ms=3000, ssl_context=client_ssl_context(trust_cert_path=str(pki.rogue_ca))
    )
    with pytest.raises(ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        await call(rogue, server)
    # authServer=false: encryption without checking whom (RocketMQ's default; OrbitMQ's opt-in).
    unchecked = RemotingClient(connect_timeout_ms=3000, ssl_context=client_ssl_context(auth_server=False))
    assert (await call(unchecked, server)).code == ResponseCode.SUCCESS


async def test_tls_required_client_certificate(pki: Pki, servers: list[RemotingServer]) -> None:
    config = server_tls(
        pki, TlsMode.ENFORCING, server_need_client_auth="require", server_trust_cert_path=str(pki.ca)
    )
    server = await start(config)
    servers.append(server)
    with_cert = tls_client(pki, cert_path=str(pki.client_cert), key_path=str(pki.client_key))
    assert (await call(with_cert, server)).code == ResponseCode.SUCCESS
    # TLS 1.3 reports the missing certificate after the handshake: the connection closes.
    with pytest.raises((ConnectError, ConnectionClosedError)):
        await call(tls_client(pki), server)


def test_tls_config_rejects_incomplete_settings(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs tls.server.certPath"):
        TlsConfig(server_mode=TlsMode.ENFORCING)
    with pytest.raises(ConfigError, match="none, optional or require"):
        TlsConfig(server_need_client_auth="always")
    with pytest.raises(ConfigError, match="trustCertPath"):
        TlsConfig(server_need_client_auth="require")
    missing = TlsConfig(
        server_mode=TlsMode.ENFORCING,
        server_cert_path=str(tmp_path / "no.pem"),
        server_key_path=str(pki.server_key),
    )
    with pytest.raises(ConfigError, match="no.pem"):
        missing.server_context()
    assert "hunter22" not in repr(TlsConfig(server_key_password="hunter22"))


def test_tls_config_file_keys_merge_under_the_servers_own(tmp_path: Path) -> None:
    properties = tmp_path / "tls.properties"
    properties.write_text("tls.server.mode=enforcing\ntls.server.certPath=/from/file.pem\n")
    merged = merge_tls_config_file({"tls.config.file": str(properties), "tls.server.mode": "permissive"})
    assert merged == {"tls.server.mode": "permissive", "tls.server.certPath": "/from/file.pem"}
    properties.write_text("listenPort=1\n")
    with pytest.raises(ConfigError, match="does not belong"):
        merge_tls_config_file({"tls.config.file": str(properties)})
