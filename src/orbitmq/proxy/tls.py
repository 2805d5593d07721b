"""TLS on the gRPC port, from the same ``tls.server.*`` keys as the remoting ports, and the
proxy's ``tlsTestModeEnable`` (RocketMQ's proxy key, true by default).

The 5.x SDKs turn TLS on with their ``tls_enable`` / ``enableSsl`` setting (Java and Go have it
on by default, and do not verify the server's certificate) and present no client certificate.
So, as RocketMQ's proxy, the gRPC port serves TLS and plaintext side by side unless told
otherwise (:func:`grpc_port_security`):

=====================================================  =========================================
``tls.server.mode=enforcing``                          TLS only, with ``tls.server.certPath`` /
                                                       ``tls.server.keyPath``
``tls.server.mode=permissive``                         TLS and plaintext on one port, with that
                                                       certificate
``disabled`` (OrbitMQ's default for the remoting       TLS and plaintext on one port, with a
ports) and ``tlsTestModeEnable=true`` (the default)    self-signed certificate made at start
``disabled`` and ``tlsTestModeEnable=false``           plaintext only
=====================================================  =========================================

Both-on-one-port is a ``transport.splice.SplicingServer`` in front of a TLS and a plaintext
local port of the same grpc server: grpc's server takes one kind of credentials per port.
``tls.server.need.client.auth`` asks clients for a certificate (``optional``) or refuses those
without one (``require``), checked against ``tls.server.trustCertPath``.

grpc reads the key as PEM bytes and cannot open an encrypted one: with
``tls.server.keyPassword`` set the start fails, naming the key, instead of serving plaintext.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from orbitmq.errors import ConfigError
from orbitmq.transport.tls import TlsConfig, TlsMode

__all__ = ["GrpcPortSecurity", "grpc_port_security", "grpc_server_credentials", "self_signed_certificate"]

SELF_SIGNED_VALIDITY = datetime.timedelta(days=365)
"""How long the certificate made at start is valid (a proxy restarted within makes a new one)."""


@dataclass(frozen=True, slots=True)
class GrpcPortSecurity:
    """What the gRPC port serves: ``mode`` (disabled: plaintext only, permissive: both,
    enforcing: TLS only) and the TLS credentials of the last two."""

    mode: TlsMode
    credentials: grpc.ServerCredentials | None
    self_signed: bool = False

    def describe(self) -> str:
        """For the start's log line."""
        if self.mode is TlsMode.DISABLED:
            return "plaintext"
        if self.mode is TlsMode.ENFORCING:
            return "TLS"
        return "TLS and plaintext" + (" (self-signed certificate)" if self.self_signed else "")


def grpc_port_security(tls: TlsConfig | None, test_mode_enable: bool = True) -> GrpcPortSecurity:
    """The gRPC port's mode and credentials (see the module docstring).

    Raises:
        ConfigError: as :func:`grpc_server_credentials`.
    """
    mode = TlsMode.DISABLED if tls is None else tls.server_mode
    if mode is TlsMode.ENFORCING:
        return GrpcPortSecurity(mode, grpc_server_credentials(tls))
    if mode is TlsMode.PERMISSIVE:
        assert tls is not None
        return GrpcPortSecurity(mode, _credentials(tls))
    if not test_mode_enable:
        return GrpcPortSecurity(TlsMode.DISABLED, None)
    cert, key = self_signed_certificate()
    return GrpcPortSecurity(TlsMode.PERMISSIVE, grpc.ssl_server_credentials([(key, cert)]), self_signed=True)


def self_signed_certificate(common_name: str = "OrbitMQ proxy") -> tuple[bytes, bytes]:
    """A new self-signed certificate and its unencrypted key (PEM), for localhost and this
    host's name; an EC P-256 key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + SELF_SIGNED_VALIDITY)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                ]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    return (
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def grpc_server_credentials(tls: TlsConfig | None) -> grpc.ServerCredentials | None:
    """The configured certificate's credentials when ``tls.server.mode=enforcing``, else None.

    Raises:
        ConfigError: enforcing without a certificate and key, an unreadable file, or an
            encrypted key.
    """
    if tls is None or tls.server_mode is not TlsMode.ENFORCING:
        return None
    return _credentials(tls)


def _credentials(tls: TlsConfig) -> grpc.ServerCredentials:
    """Credentials from the configured certificate and key (either mode that serves TLS)."""
    mode = tls.server_mode.value
    if not tls.server_cert_path or not tls.server_key_path:
        raise ConfigError(
            f"tls.server.mode={mode} needs tls.server.certPath and tls.server.keyPath (the gRPC port too)"
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
