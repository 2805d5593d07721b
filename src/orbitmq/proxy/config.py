"""ProxyConfig: the gRPC proxy's settings, with the Java proxy's key names and defaults.

Cluster mode (``orbitmq proxy -c proxy.conf``) reads them from their own ``key=value`` file,
with the ``tls.*`` keys of ``transport.tls`` (the gRPC port's TLS, and the connections to
brokers).
Local mode (inside ``orbitmq broker`` / ``orbitmq standalone``) reads them from the broker's
``broker.conf``: ``namesrvAddr``, ``maxMessageSize`` and the ACL keys (``aclEnable``,
``aclFile``, ``innerClientAuthenticationCredentials``) then mean the same thing for the broker,
its store and its proxy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orbitmq.conf import build_configs, load_properties
from orbitmq.errors import ConfigError
from orbitmq.transport.tls import TLS_UNIMPLEMENTED_KEYS, TlsConfig, merge_tls_config_file

__all__ = ["ProxyConfig", "load_proxy_config", "load_proxy_configs"]

_HOUR_MS = 3_600_000


def _key(name: str) -> dict[str, object]:
    return {"key": name}


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Settings of the gRPC MessagingService."""

    # Name servers the proxy reads routes from ("a:9876;b:9876").
    namesrv_addr: tuple[str, ...] = field(default=(), metadata=_key("namesrvAddr"))
    # Port of the gRPC MessagingService (HTTP/2, TLS and plaintext by default: proxy.tls).
    grpc_server_port: int = field(default=8081, metadata=_key("grpcServerPort"))
    # Interface the gRPC port binds (OrbitMQ's own key).
    grpc_bind_address: str = field(default="0.0.0.0", metadata=_key("grpcBindAddress"))
    # With no tls.server.mode set, the gRPC port serves TLS beside plaintext with a self-signed
    # certificate made at start, as RocketMQ's proxy does by default (proxy.tls); false: plaintext.
    tls_test_mode_enable: bool = field(default=True, metadata=_key("tlsTestModeEnable"))
    # Largest message body a producer may send (publishing.max_body_size in settings).
    max_message_size_bytes: int = field(default=4 * 1024 * 1024, metadata=_key("maxMessageSize"))
    # Timed messages due further ahead than this are refused with ILLEGAL_DELIVERY_TIME.
    max_delay_time_ms: int = field(default=24 * _HOUR_MS, metadata=_key("maxDelayTimeMills"))
    # Longest message group (FIFO sharding key), in UTF-8 bytes.
    max_message_group_size_bytes: int = field(default=64, metadata=_key("maxMessageGroupSize"))
    # Largest total of a message's user properties, in UTF-8 bytes.
    max_user_property_size_bytes: int = field(default=16 * 1024, metadata=_key("maxUserPropertySize"))
    # Invisible time of an auto-renewed receive (push consumers send none).
    default_invisible_time_ms: int = field(default=60_000, metadata=_key("defaultInvisibleTimeMills"))
    # Shortest invisible time a receive without auto-renew may ask for.
    min_invisible_time_ms_for_recv: int = field(default=10_000, metadata=_key("minInvisibleTimeMillsForRecv"))
    # Longest invisible time of a receive or a change.
    max_invisible_time_ms: int = field(default=12 * _HOUR_MS, metadata=_key("maxInvisibleTimeMills"))
    # Long-poll time bounds of a receive.
    min_long_polling_ms: int = field(
        default=5_000, metadata=_key("grpcClientConsumerMinLongPollingTimeoutMillis")
    )
    max_long_polling_ms: int = field(
        default=20_000, metadata=_key("grpcClientConsumerMaxLongPollingTimeoutMillis")
    )
    # Auto-renew: renew handles this close to their deadline, checking at this period, for at most this long.
    renew_ahead_time_ms: int = field(default=10_000, metadata=_key("renewAheadTimeMillis"))
    renew_schedule_period_ms: int = field(default=5_000, metadata=_key("renewSchedulePeriodMillis"))
    renew_max_time_ms: int = field(default=3 * _HOUR_MS, metadata=_key("renewMaxTimeMillis"))
    # A client without heartbeat or stream activity for this long is gone (its handles are released).
    client_idle_time_ms: int = field(default=120_000, metadata=_key("grpcClientIdleTimeMills"))
    # Timeout of one request from the proxy to a broker or name server.
    broker_request_timeout_ms: int = field(default=3_000, metadata=_key("brokerRequestTimeoutMillis"))
    # Shortest time between two log lines of one kind of bad request (the remoting port's key).
    bad_request_log_interval_ms: int = field(default=10_000, metadata=_key("badRequestLogIntervalMillis"))
    # Refuse a send whose message type is not its topic's message.type (proxy.topic_types), and
    # tell the SDKs to check it themselves (publishing.validate_message_type).
    enable_topic_message_type_check: bool = field(default=True, metadata=_key("enableTopicMessageTypeCheck"))
    # Check every gRPC call against the accounts in aclFile (proxy.auth); the brokers' key.
    acl_enable: bool = field(default=False, metadata=_key("aclEnable"))
    # The main accounts file (plain_acl.yml, plus acl/*.yml beside it); OrbitMQ's own key.
    acl_file: str | None = field(default=None, metadata=_key("aclFile"))
    # JSON {"accessKey": ..., "secretKey": ...}: the account the proxy uses at the brokers.
    inner_client_authentication_credentials: str | None = field(
        default=None, repr=False, metadata=_key("innerClientAuthenticationCredentials")
    )

    def __post_init__(self) -> None:
        if not 0 <= self.grpc_server_port <= 65535:
            raise ConfigError(f"config key 'grpcServerPort': {self.grpc_server_port} is not a TCP port")
        if not 0 < self.min_long_polling_ms <= self.max_long_polling_ms:
            raise ConfigError(
                "config keys 'grpcClientConsumerMinLongPollingTimeoutMillis' and "
                "'grpcClientConsumerMaxLongPollingTimeoutMillis' must satisfy 0 < min <= max"
            )
        if not 0 < self.min_invisible_time_ms_for_recv <= self.max_invisible_time_ms:
            raise ConfigError(
                "config keys 'minInvisibleTimeMillsForRecv' and 'maxInvisibleTimeMills' must satisfy "
                "0 < min <= max"
            )
        for key, value in (
            ("maxMessageSize", self.max_message_size_bytes),
            ("maxDelayTimeMills", self.max_delay_time_ms),
            ("maxMessageGroupSize", self.max_message_group_size_bytes),
            ("maxUserPropertySize", self.max_user_property_size_bytes),
            ("defaultInvisibleTimeMills", self.default_invisible_time_ms),
            ("renewAheadTimeMillis", self.renew_ahead_time_ms),
            ("renewSchedulePeriodMillis", self.renew_schedule_period_ms),
            ("renewMaxTimeMillis", self.renew_max_time_ms),
            ("grpcClientIdleTimeMills", self.client_idle_time_ms),
            ("badRequestLogIntervalMillis", self.bad_request_log_interval_ms),
        ):
            if value <= 0:
                raise ConfigError(f"config key {key!r}: {value} must be positive")


def load_proxy_config(path: str | Path | None, overrides: dict[str, object] | None = None) -> ProxyConfig:
    """Defaults < ``path`` (a proxy.conf, optional) < ``overrides`` (RocketMQ keys from the CLI).

    Raises:
        ConfigError: unreadable file, unknown key or bad value; or no ``namesrvAddr``.
    """
    return load_proxy_configs(path, overrides)[0]


def load_proxy_configs(
    path: str | Path | None, overrides: dict[str, object] | None = None
) -> tuple[ProxyConfig, TlsConfig]:
    """As :func:`load_proxy_config`, with the file's ``tls.*`` keys (``transport.tls``) too.

    Raises:
        ConfigError: as :func:`load_proxy_config`, or a bad ``tls.*`` value.
    """
    values: dict[str, object] = dict(load_properties(path)) if path else {}
    values.update(overrides or {})
    values = merge_tls_config_file(values)
    config, tls = build_configs([ProxyConfig, TlsConfig], values, TLS_UNIMPLEMENTED_KEYS)
    if not config.namesrv_addr:
        raise ConfigError("config key 'namesrvAddr' is required: the proxy reads routes from name servers")
    if config.acl_enable and not config.acl_file:
        raise ConfigError("aclEnable=true needs aclFile: the plain_acl.yml the proxy checks callers against")
    if config.acl_enable and not config.inner_client_authentication_credentials:
        raise ConfigError(
            "aclEnable=true needs innerClientAuthenticationCredentials: the account the proxy "
            "uses at the brokers, which check it as any client"
        )
    return config, tls
