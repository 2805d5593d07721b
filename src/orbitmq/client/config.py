"""Client configuration: one frozen dataclass per concern, defaults in code.

:class:`ClientConfig` holds what every client of one process shares through a
:class:`~orbitmq.client._instance.ClientInstance` (name servers, identity, background
intervals). :class:`ProducerConfig` holds what one producer decides on its own. Both take
RocketMQ's defaults; names carry their unit (``_ms``, ``_bytes``).

Producers and consumers accept their settings as keyword arguments;
:func:`split_config` sorts them into the two dataclasses and names any unknown key.

Credentials (``access_key`` + ``secret_key``) make every request carry RocketMQ's ACL
signature; ``tls_enable`` makes every connection TLS. Library code never reads them from the
environment: the ``orbitmq`` command does (``ORBITMQ_ACCESS_KEY`` / ``ORBITMQ_SECRET_KEY``).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import socket
import ssl
from dataclasses import dataclass, field
from typing import Any, TypeVar

from orbitmq.acl.signature import Credentials
from orbitmq.errors import ConfigError
from orbitmq.transport.tls import client_ssl_context

__all__ = [
    "DEFAULT_INSTANCE_NAME",
    "ClientConfig",
    "ProducerConfig",
    "default_client_ip",
    "split_config",
]

DEFAULT_INSTANCE_NAME = "DEFAULT"
"""Replaced by the process id in the client id, as the Java client does."""

_T = TypeVar("_T")


def default_client_ip() -> str:
    """The first non-loopback IPv4 address of this host, else ``127.0.0.1``.

    A UDP ``connect`` sends nothing; it only asks the kernel which local address would
    route outward. Hosts without a route fall back to the addresses of the host name.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            address = str(probe.getsockname()[0])
            if not address.startswith("127.") and address != "0.0.0.0":
                return address
    except OSError:
        pass
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            address = str(info[4][0])
            if not address.startswith("127."):
                return address
    except OSError:
        pass
    return "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Settings shared by the producers, consumers and admin clients of one client instance."""

    # Name servers as "host:port;host:port"; one is chosen at random, the others are fail-overs.
    namesrv_addr: str
    # Second half of the client id; "DEFAULT" becomes the process id.
    instance_name: str = DEFAULT_INSTANCE_NAME
    # First half of the client id and the address put into UNIQ_KEY message ids.
    client_ip: str = field(default_factory=default_client_ip)
    # How often the routes of every topic in use are fetched again.
    poll_name_server_interval_ms: int = 30_000
    # How often every broker gets a heartbeat naming this client's groups.
    heartbeat_broker_interval_ms: int = 30_000
    # How often consumers commit their offsets to the brokers.
    persist_consumer_offset_interval_ms: int = 5_000
    # Default timeout of name-server and admin requests.
    request_timeout_ms: int = 3_000
    # How long opening a TCP connection may take.
    connect_timeout_ms: int = 3_000
    # Optional third part of the client id (RocketMQ's unitName).
    unit_name: str | None = None
    # ACL access key; with secret_key, every request is signed (RocketMQ's AclClientRPCHook).
    access_key: str | None = None
    # ACL secret key (never printed).
    secret_key: str | None = field(default=None, repr=False)
    # Connect to name servers and brokers over TLS.
    tls_enable: bool = False
    # Verify the servers' certificates and addresses (RocketMQ's tls.client.authServer).
    tls_auth_server: bool = True
    # CA certificates (PEM) to verify servers with; None = the system's.
    tls_trust_cert_path: str | None = None
    # Client certificate (PEM) for servers that ask for one, and its key.
    tls_cert_path: str | None = None
    tls_key_path: str | None = None
    # Password of an encrypted client key (never printed).
    tls_key_password: str | None = field(default=None, repr=False)
    # Send RocketMQ-format trace records of this client's sends and consumption (message trace).
    enable_msg_trace: bool = False
    # Topic the trace records go to; None = RMQ_SYS_TRACE_TOPIC (RocketMQ's customizedTraceTopic).
    trace_topic: str | None = None

    def __post_init__(self) -> None:
        if not self.namesrv_addrs:
            raise ConfigError(f"namesrv_addr {self.namesrv_addr!r} names no name server")
        for name in (
            "poll_name_server_interval_ms",
            "heartbeat_broker_interval_ms",
            "persist_consumer_offset_interval_ms",
            "request_timeout_ms",
            "connect_timeout_ms",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if bool(self.access_key) != bool(self.secret_key):
            raise ConfigError("access_key and secret_key go together: give both or neither")
        if bool(self.tls_cert_path) != bool(self.tls_key_path):
            raise ConfigError("tls_cert_path and tls_key_path go together: give both or neither")

    @property
    def credentials(self) -> Credentials | None:
        """The ACL credentials, when both keys are set."""
        if self.access_key and self.secret_key:
            return Credentials(self.access_key, self.secret_key)
        return None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of this client's connections (None without ``tls_enable``).

        Raises:
            ConfigError: a certificate or key cannot be read.
        """
        if not self.tls_enable:
            return None
        return client_ssl_context(
            trust_cert_path=self.tls_trust_cert_path,
            auth_server=self.tls_auth_server,
            cert_path=self.tls_cert_path,
            key_path=self.tls_key_path,
            key_password=self.tls_key_password,
        )

    @property
    def namesrv_addrs(self) -> list[str]:
        """The name-server addresses, in the order given."""
        return [addr.strip() for addr in self.namesrv_addr.split(";") if addr.strip()]

    @property
    def client_id(self) -> str:
        """``ip@instance`` (``@unit`` appended when set): how brokers tell clients apart."""
        instance = self.instance_name
        if instance == DEFAULT_INSTANCE_NAME:
            instance = str(os.getpid())
        client_id = f"{self.client_ip}@{instance}"
        if self.unit_name:
            client_id += f"@{self.unit_name}"
        return client_id


_LATENCY_MAX_MS = (50, 100, 550, 1_000, 2_000, 3_000, 15_000)
_NOT_AVAILABLE_DURATION_MS = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """Settings of one producer (RocketMQ's DefaultMQProducer fields)."""

    # Default timeout of one send, retries included.
    send_msg_timeout_ms: int = 3_000
    # Extra attempts of a sync send on another broker after a retriable failure.
    retry_times_when_send_failed: int = 2
    # The same budget for send_async.
    retry_times_when_send_async_failed: int = 2
    # Retry when the broker stored the message but answered FLUSH_*_TIMEOUT / SLAVE_NOT_AVAILABLE.
    retry_another_broker_when_not_store_ok: bool = False
    # Bodies larger than this many bytes are zlib-compressed (sysFlag bit 0).
    compress_msg_body_over_howmuch: int = 4_096
    # zlib level for compressed bodies (RocketMQ's default).
    compress_level: int = 5
    # Largest body accepted, and the largest batch request body sent.
    max_message_size_bytes: int = 4 * 1024 * 1024
    # Template topic whose route is used for topics the name server does not know.
    create_topic_key: str = "TBW102"
    # Queues per broker for a topic auto-created from the template.
    default_topic_queue_nums: int = 4
    # Skip brokers whose recent sends were slow or failed (RocketMQ's latency fault tolerance).
    send_latency_fault_enable: bool = False
    # Latency thresholds; a send at least this slow isolates its broker for the matching duration.
    latency_max_ms: tuple[int, ...] = _LATENCY_MAX_MS
    # Isolation time paired with each latency threshold.
    not_available_duration_ms: tuple[int, ...] = _NOT_AVAILABLE_DURATION_MS

    def __post_init__(self) -> None:
        if len(self.latency_max_ms) != len(self.not_available_duration_ms):
            raise ConfigError(
                f"latency_max_ms has {len(self.latency_max_ms)} entries but not_available_duration_ms "
                f"has {len(self.not_available_duration_ms)}"
            )
        if self.retry_times_when_send_failed < 0 or self.retry_times_when_send_async_failed < 0:
            raise ConfigError(
                "retry_times_when_send_failed and retry_times_when_send_async_failed must be >= 0"
            )
        if self.send_msg_timeout_ms <= 0:
            raise ConfigError(f"send_msg_timeout_ms must be positive, got {self.send_msg_timeout_ms}")
        if not 0 < self.max_message_size_bytes <= 4 * 1024 * 1024:
            raise ConfigError(
                f"max_message_size_bytes must be in (0, 4 MiB], got {self.max_message_size_bytes}"
            )


def _field_names(cls: type[Any]) -> set[str]:
    return {item.name for item in dataclasses.fields(cls)}


def split_config(namesrv_addr: str, options: dict[str, Any], own_type: type[_T]) -> tuple[ClientConfig, _T]:
    """Sort keyword options into a :class:`ClientConfig` and an ``own_type`` config.

    Args:
        namesrv_addr: the name-server list (``host:port;host:port``).
        options: keyword options of a producer, consumer or admin client.
        own_type: the component's own frozen config dataclass (e.g. :class:`ProducerConfig`).

    Returns:
        The shared client config and the component's config.

    Raises:
        ConfigError: an option belongs to neither dataclass; the message names it and the
            nearest known option.
    """
    client_fields = _field_names(ClientConfig) - {"namesrv_addr"}
    own_fields = _field_names(own_type)
    unknown = sorted(set(options) - client_fields - own_fields)
    if unknown:
        known = sorted(client_fields | own_fields)
        hints = []
        for name in unknown:
            nearest = difflib.get_close_matches(name, known, n=1)
            hints.append(f"{name!r}" + (f" (did you mean {nearest[0]!r}?)" if nearest else ""))
        raise ConfigError(f"unknown {own_type.__name__} option(s): {', '.join(hints)}")
    client_options = {key: value for key, value in options.items() if key in client_fields}
    own_options = {key: value for key, value in options.items() if key in own_fields}
    return ClientConfig(namesrv_addr, **client_options), own_type(**own_options)
