"""TLS on the remoting ports, configured the way RocketMQ configures it (``tls.*`` keys).

Server side, ``tls.server.mode``:

==============  ==============================================================================
``disabled``    plaintext only (OrbitMQ's default; RocketMQ's is ``permissive``)
``permissive``  plaintext and TLS on the same port: the first byte a client sends decides;
                0x16 opens a TLS handshake record, anything else is a plaintext frame (the
                first byte of its length), as RocketMQ's ``TlsModeHandler`` decides
``enforcing``   TLS only; a plaintext client fails the handshake and is disconnected
==============  ==============================================================================

Keys (in ``broker.conf`` / ``namesrv.conf``, or in the properties file ``tls.config.file``
names, as RocketMQ's ``tls.properties``; keys in the server's own file win)::

    tls.server.mode=disabled|permissive|enforcing
    tls.server.certPath=server.pem          tls.server.keyPath=server.key
    tls.server.keyPassword=...              (for an encrypted key)
    tls.server.need.client.auth=none|optional|require
    tls.server.trustCertPath=ca.pem         (CAs accepted for client certificates)

    tls.enable=true  (alias useTLS)         this process's outgoing connections use TLS
    tls.client.authServer=true              verify the server's certificate and address
    tls.client.trustCertPath=ca.pem         (else the system's CAs)
    tls.client.certPath / tls.client.keyPath / tls.client.keyPassword   (client certificate)

One default differs from RocketMQ on purpose: ``tls.client.authServer`` is true, so a client
checks whom it talks to unless told otherwise. Everything is Python's ``ssl`` module.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from orbitmq.conf import load_properties
from orbitmq.errors import ConfigError

__all__ = [
    "TLS_CONFIG_FILE_KEY",
    "TLS_UNIMPLEMENTED_KEYS",
    "SniffingServer",
    "TlsConfig",
    "TlsMode",
    "client_ssl_context",
    "merge_tls_config_file",
    "start_sniffing_server",
]

logger = logging.getLogger(__name__)

TLS_CONFIG_FILE_KEY = "tls.config.file"
TLS_UNIMPLEMENTED_KEYS = frozenset({"tls.test.mode.enable", "tls.server.authClient"})
"""RocketMQ TLS keys OrbitMQ accepts with a warning: its remoting ports never invent a test
certificate (the gRPC port's own ``tlsTestModeEnable`` does, as Apache's proxy), and it always
verifies the client certificates it asks for."""

TLS_HANDSHAKE_BYTE = 0x16
"""First byte of a TLS record carrying a handshake (the ClientHello)."""

FIRST_BYTE_TIMEOUT_S = 30.0
"""A permissive-mode connection that sends nothing for this long is closed."""

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}


class TlsMode(Enum):
    """``tls.server.mode``."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


def _key(name: str, *aliases: str) -> dict[str, object]:
    return {"key": name, "aliases": aliases} if aliases else {"key": name}


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """The ``tls.*`` settings of one server process (its listening port and its own clients)."""

    # Plaintext, both, or TLS only on the listening port.
    server_mode: TlsMode = field(default=TlsMode.DISABLED, metadata=_key("tls.server.mode"))
    # PEM certificate chain of the server.
    server_cert_path: str | None = field(default=None, metadata=_key("tls.server.certPath"))
    # PEM private key of the server.
    server_key_path: str | None = field(default=None, metadata=_key("tls.server.keyPath"))
    # Password of an encrypted server key.
    server_key_password: str | None = field(default=None, repr=False, metadata=_key("tls.server.keyPassword"))
    # Whether clients must present a certificate: none, optional or require.
    server_need_client_auth: str = field(default="none", metadata=_key("tls.server.need.client.auth"))
    # CA certificates that client certificates must chain to.
    server_trust_cert_path: str | None = field(default=None, metadata=_key("tls.server.trustCertPath"))
    # Outgoing connections (a broker's to its name servers) use TLS.
    client_enable: bool = field(default=False, metadata=_key("tls.enable", "useTLS"))
    # Verify the server's certificate and address on outgoing connections.
    client_auth_server: bool = field(default=True, metadata=_key("tls.client.authServer"))
    # CA certificates for verifying servers (default: the system's).
    client_trust_cert_path: str | None = field(default=None, metadata=_key("tls.client.trustCertPath"))
    # PEM certificate presented to servers that ask for one.
    client_cert_path: str | None = field(default=None, metadata=_key("tls.client.certPath"))
    # PEM key of the client certificate.
    client_key_path: str | None = field(default=None, metadata=_key("tls.client.keyPath"))
    # Password of an encrypted client key.
    client_key_password: str | None = field(default=None, repr=False, metadata=_key("tls.client.keyPassword"))

    def __post_init__(self) -> None:
        if self.server_need_client_auth not in _CLIENT_AUTH:
            raise ConfigError(
                f"config key 'tls.server.need.client.auth': {self.server_need_client_auth!r} "
                "is not none, optional or require"
            )
        if self.server_mode is not TlsMode.DISABLED and not (self.server_cert_path and self.server_key_path):
            raise ConfigError(
                f"tls.server.mode={self.server_mode.value} needs tls.server.certPath and tls.server.keyPath"
            )
        if self.server_need_client_auth != "none" and not self.server_trust_cert_path:
            raise ConfigError("tls.server.need.client.auth needs tls.server.trustCertPath (the client CA)")
        if bool(self.client_cert_path) != bool(self.client_key_path):
            raise ConfigError("tls.client.certPath and tls.client.keyPath go together")

    def server_context(self) -> ssl.SSLContext | None:
        """The listening port's context (None when disabled).

        Raises:
            ConfigError: a certificate or key cannot be read or does not match.
        """
        if self.server_mode is TlsMode.DISABLED:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        _load_chain(
            context, self.server_cert_path, self.server_key_path, self.server_key_password, "tls.server"
        )
        context.verify_mode = _CLIENT_AUTH[self.server_need_client_auth]
        if self.server_trust_cert_path:
            _load_trust(context, self.server_trust_cert_path, "tls.server.trustCertPath")
        return context

    def client_context(self) -> ssl.SSLContext | None:
        """The context of this process's outgoing connections (None unless ``tls.enable``)."""
        if not self.client_enable:
            return None
        return client_ssl_context(
            trust_cert_path=self.client_trust_cert_path,
            auth_server=self.client_auth_server,
            cert_path=self.client_cert_path,
            key_path=self.client_key_path,
            key_password=self.client_key_password,
        )


def client_ssl_context(
    *,
    trust_cert_path: str | None = None,
    auth_server: bool = True,
    cert_path: str | None = None,
    key_path: str | None = None,
    key_password: str | None = None,
) -> ssl.SSLContext:
    """A client context: verifies the server (against ``trust_cert_path`` or the system CAs)
    unless ``auth_server`` is false, and presents a certificate when one is given.

    Raises:
        ConfigError: a file cannot be read or the key does not match the certificate.
    """
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if trust_cert_path:
        _load_trust(context, trust_cert_path, "tls.client.trustCertPath")
    if not auth_server:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_path:
        _load_chain(context, cert_path, key_path, key_password, "tls.client")
    return context


def _load_chain(
    context: ssl.SSLContext, cert: str | None, key: str | None, password: str | None, prefix: str
) -> None:
    try:
        context.load_cert_chain(str(cert), str(key), password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{prefix}.certPath {cert} / {prefix}.keyPath {key}: {exc}") from None


def _load_trust(context: ssl.SSLContext, path: str, key: str) -> None:
    try:
        context.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{key} {path}: {exc}") from None


def merge_tls_config_file(values: Mapping[str, object]) -> dict[str, object]:
    """``values`` with the ``tls.*`` keys of the file ``tls.config.file`` names added under them.

    Raises:
        ConfigError: the file cannot be read, or holds a key that is not ``tls.*``.
    """
    merged = {key: value for key, value in values.items() if key != TLS_CONFIG_FILE_KEY}
    path = values.get(TLS_CONFIG_FILE_KEY)
    if not path:
        return merged
    for key, value in load_properties(Path(str(path))).items():
        if not key.startswith("tls."):
            raise ConfigError(f"{path}: key {key!r} does not belong in a tls.config.file")
        merged.setdefault(key, value)
    return merged


# -- permissive mode: plaintext and TLS on one port ------------------------------------------


class SniffingServer:
    """A listening socket whose connections become TLS or plaintext by their first byte.

    It offers the part of ``asyncio.Server`` the remoting server uses: ``sockets``,
    ``close()`` and ``wait_closed()``.
    """

    def __init__(
        self,
        sock: socket.socket,
        protocol_factory: Callable[[], asyncio.Protocol],
        ssl_context: ssl.SSLContext,
    ) -> None:
        self.sockets = (sock,)
        self._sock = sock
        self._factory = protocol_factory
        self._context = ssl_context
        self._accepting: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._accepting = asyncio.get_running_loop().create_task(self._accept())

    def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
        for task in self._pending:
            task.cancel()
        self._sock.close()

    async def wait_closed(self) -> None:
        tasks = [task for task in (self._accepting, *self._pending) if task is not None]
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except OSError as exc:
                # Out of file descriptors and the like: say so, back off, keep serving.
                logger.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._attach(conn))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _attach(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        conn.setblocking(False)
        try:
            first = await _peek_first_byte(loop, conn)
            if not first:
                conn.close()
                return
            tls = first[0] == TLS_HANDSHAKE_BYTE
            await loop.connect_accepted_socket(self._factory, conn, ssl=self._context if tls else None)
        except (OSError, TimeoutError) as exc:
            # A failed handshake or a silent client: only that connection is affected.
            logger.debug("connection dropped before its first request: %s", exc)
            conn.close()


async def _peek_first_byte(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> bytes:
    """Wait until ``conn`` is readable and look at its first byte without consuming it."""
    readable: asyncio.Future[None] = loop.create_future()

    def on_readable() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(conn.fileno(), on_readable)
    try:
        await asyncio.wait_for(readable, FIRST_BYTE_TIMEOUT_S)
    finally:
        loop.remove_reader(conn.fileno())
    return conn.recv(1, socket.MSG_PEEK)


async def start_sniffing_server(
    protocol_factory: Callable[[], asyncio.Protocol], host: str, port: int, ssl_context: ssl.SSLContext
) -> SniffingServer:
    """Listen on ``host:port`` in permissive mode (see the module docstring).

    Raises:
        OSError: the address cannot be bound.
    """
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family = infos[0][0]
    sock = socket.create_server((host, port), family=family, backlog=1024)
    sock.setblocking(False)
    server = SniffingServer(sock, protocol_factory, ssl_context)
    server.start()
    return server
