"""TLS on the gRPC port, from the same ``tls.server.*`` keys as the remoting ports.

``tls.server.mode=enforcing`` makes the gRPC port TLS only, with ``tls.server.certPath`` /
``tls.server.keyPath``; ``tls.server.need.client.auth`` asks clients for a certificate
(``optional``) or refuses those without one (``require``), checked against
``tls.server.trustCertPath``. The 5.x SDKs turn TLS on with their ``tls_enable`` /
``enableSsl`` setting (Java and Go have it on by default) and present no client certificate.

``permissive`` keeps the gRPC port plaintext: unlike the remoting ports, where OrbitMQ reads a
connection's first byte to tell TLS from plaintext (as RocketMQ's Netty pipeline does), grpc's
server takes one kind of credentials per port. ``disabled`` is plaintext too.

grpc reads the key as PEM bytes and cannot open an encrypted one: with
``tls.server.keyPassword`` set the start fails, naming the key, instead of serving plaintext.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from orbitmq.errors import ConfigError
from orbitmq.transport.tls import TlsConfig, TlsMode

__all__ = ["grpc_server_credentials"]


def grpc_server_credentials(tls: TlsConfig | None) -> grpc.ServerCredentials | None:
    """The gRPC port's TLS credentials, or None for a plaintext port (see the module docstring).

    Raises:
        ConfigError: enforcing without a certificate and key, an unreadable file, or an
            encrypted key.
    """
    if tls is None or tls.server_mode is not TlsMode.ENFORCING:
        return None
    if not tls.server_cert_path or not tls.server_key_path:
        raise ConfigError(
            "tls.server.mode=enforcing needs tls.server.certPath and tls.server.keyPath (the gRPC port too)"
        )
    if tls.server_key_password:
        raise ConfigError(
            f"tls.server.keyPath {tls.server_key_path}: the gRPC port cannot read an encrypted key "
            "(tls.server.keyPassword); give it an unencrypted PEM key"
        )
    cert = _read(tls.server_cert_path, "tls.server.certPath")
    key = _read(tls.server_key_path, "tls.server.keyPath")
    if any(line.startswith((b"-----BEGIN ENCRYPTED", b"Proc-Type:")) for line in key.splitlines()):
        raise ConfigError(
            f"tls.server.keyPath {tls.server_key_path}: the gRPC port needs an unencrypted PEM key"
        )
    asks = tls.server_need_client_auth in ("optional", "require")
    roots = None
    if asks:
        if not tls.server_trust_cert_path:
            raise ConfigError(
                f"tls.server.need.client.auth={tls.server_need_client_auth} needs tls.server.trustCertPath "
                "(the CAs client certificates are checked against)"
            )
        roots = _read(tls.server_trust_cert_path, "tls.server.trustCertPath")
    return grpc.ssl_server_credentials(
        [(key, cert)],
        root_certificates=roots,
        require_client_auth=tls.server_need_client_auth == "require",
    )


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{key} {path}: {exc.strerror or exc}") from None
