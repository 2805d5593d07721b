"""NameServer configuration: RocketMQ's ``namesrv.conf`` keys mapped onto a frozen dataclass.

The ``tls.*`` keys (``transport.tls``) are read from the same file into ``NamesrvConfig.tls``.
``aclEnable=true`` (an OrbitMQ extension: RocketMQ's name server checks nothing) makes
registration and the other broker-only writes need an admin signature from the accounts in
``aclFile``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from orbitmq.conf import build_configs, load_properties
from orbitmq.controller.config import CONTROLLER_UNIMPLEMENTED_KEYS, ControllerConfig
from orbitmq.errors import ConfigError
from orbitmq.metrics.exporter import MetricsExporterType
from orbitmq.transport.server import ServerLimits
from orbitmq.transport.tls import TLS_UNIMPLEMENTED_KEYS, TlsConfig, merge_tls_config_file

__all__ = ["NAMESRV_UNIMPLEMENTED_KEYS", "NamesrvConfig", "load_namesrv_config", "load_namesrv_configs"]

NAMESRV_UNIMPLEMENTED_KEYS = frozenset(
    {
        "rocketmqHome",
        "configStorePath",
        "productEnvName",
        "clusterTest",
        "orderMessageEnable",
        "serverWorkerThreads",
        "serverCallbackExecutorThreads",
        "serverSelectorThreads",
        "serverOnewaySemaphoreValue",
        "serverAsyncSemaphoreValue",
        "serverSocketSndBufSize",
        "serverSocketRcvBufSize",
        "serverPooledByteBufAllocatorEnable",
        "useEpollNativeSelector",
        "defaultThreadPoolNums",
        "clientRequestThreadPoolNums",
        "defaultThreadPoolQueueCapacity",
        "clientRequestThreadPoolQueueCapacity",
        "enableAllTopicList",
        "enableTopicList",
        "notifyMinBrokerIdChanged",
    }
)
"""RocketMQ namesrv keys that OrbitMQ accepts and ignores (a warning names each one)."""


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    """Settings of one name server process."""

    # TCP port clients and brokers connect to.
    listen_port: int = field(default=9876, metadata={"key": "listenPort"})
    # Address to bind; 0.0.0.0 listens on every interface.
    bind_address: str = field(default="0.0.0.0", metadata={"key": "bindAddress"})
    # A master's registration with a new data version drops the topics it no longer lists. Off,
    # as in RocketMQ: a topic goes with DELETE_TOPIC_IN_NAMESRV (what mqadmin deleteTopic sends),
    # and a RocketMQ 5 broker registers a topic it just created on its own.
    delete_topic_with_broker_registration: bool = field(
        default=False, metadata={"key": "deleteTopicWithBrokerRegistration"}
    )
    # How often silent brokers are looked for.
    scan_not_active_broker_interval_ms: int = field(
        default=10_000, metadata={"key": "scanNotActiveBrokerInterval"}
    )
    # A broker that has not registered for this long is removed with its routes.
    broker_channel_expired_ms: int = field(default=120_000, metadata={"key": "brokerChannelExpiredTime"})
    # A client or broker connection with no traffic for this long is closed.
    server_channel_max_idle_s: int = field(default=120, metadata={"key": "serverChannelMaxIdleTimeSeconds"})
    # Where the KV configuration (mqadmin updateKvConfig) is kept; empty = in memory only.
    kv_config_path: str = field(default="", metadata={"key": "kvConfigPath"})
    # Frames larger than this close their connection (RocketMQ: -Dcom.rocketmq.remoting.frameMaxLength).
    max_frame_bytes: int = field(default=16 * 1024 * 1024, metadata={"key": "frameMaxLength"})
    # Run a controller (controller mode, RIP-44) inside this name server, on its port; the
    # controller's keys (controllerDLegerPeers, ...) go in the same file.
    enable_controller_in_namesrv: bool = field(default=False, metadata={"key": "enableControllerInNamesrv"})
    # Registration and other broker-only writes need an admin signature (OrbitMQ's extension).
    acl_enable: bool = field(default=False, metadata={"key": "aclEnable"})
    # The main accounts file (RocketMQ's plain_acl.yml format); required with aclEnable.
    acl_file: str | None = field(default=None, metadata={"key": "aclFile"})
    # TLS of the listening port (the tls.* keys).
    tls: TlsConfig = field(default_factory=TlsConfig)

    # DISABLE or PROM (Prometheus text at /metrics), as the broker's key.
    metrics_exporter_type: MetricsExporterType = field(
        default=MetricsExporterType.DISABLE, metadata={"key": "metricsExporterType"}
    )
    # Port of /metrics with PROM (OrbitMQ's default 5558: the broker's 5557 may share the host).
    metrics_prom_exporter_port: int = field(default=5558, metadata={"key": "metricsPromExporterPort"})
    # Interface /metrics binds; None = bindAddress.
    metrics_prom_exporter_host: str | None = field(default=None, metadata={"key": "metricsPromExporterHost"})
    # -- resource limits (docs/limits.md) -------------------------------------------------------
    # Open connections; one more is closed at once.
    server_max_connections: int = field(default=10_000, metadata={"key": "serverMaxConnections"})
    # Unsent response bytes above which a connection stops reading requests until it drains.
    write_buffer_high_bytes: int = field(
        default=4 * 1024 * 1024, metadata={"key": "writeBufferHighWaterMark"}
    )
    # Unsent response bytes above which a connection is aborted (a client that does not read).
    write_buffer_max_bytes: int = field(default=64 * 1024 * 1024, metadata={"key": "writeBufferMaxBytes"})
    # A frame's header must arrive within this long of its first byte, else the connection closes.
    header_read_timeout_ms: int = field(default=10_000, metadata={"key": "headerReadTimeoutMillis"})
    # A whole frame must arrive within this long of its first byte, else the connection closes.
    frame_read_timeout_ms: int = field(default=60_000, metadata={"key": "frameReadTimeoutMillis"})
    # Shortest time between two log lines of one kind of bad input.
    bad_request_log_interval_ms: int = field(default=10_000, metadata={"key": "badRequestLogIntervalMillis"})
    # Topics one broker may register; a registration with more is refused.
    topics_per_broker_max: int = field(default=150_000, metadata={"key": "maxTopicsPerBroker"})
    # Broker addresses registered at once; a registration of one more is refused.
    brokers_max: int = field(default=1_000, metadata={"key": "maxBrokers"})

    def __post_init__(self) -> None:
        if not 0 <= self.metrics_prom_exporter_port < 65536:
            raise ConfigError(
                f"config key 'metricsPromExporterPort': {self.metrics_prom_exporter_port} is not a TCP port"
            )
        if not 0 <= self.listen_port < 65536:
            raise ConfigError(f"config key 'listenPort': {self.listen_port} is not a TCP port")
        for key, value in (
            ("scanNotActiveBrokerInterval", self.scan_not_active_broker_interval_ms),
            ("brokerChannelExpiredTime", self.broker_channel_expired_ms),
            ("serverChannelMaxIdleTimeSeconds", self.server_channel_max_idle_s),
            ("frameMaxLength", self.max_frame_bytes),
            ("serverMaxConnections", self.server_max_connections),
            ("writeBufferHighWaterMark", self.write_buffer_high_bytes),
            ("writeBufferMaxBytes", self.write_buffer_max_bytes),
            ("headerReadTimeoutMillis", self.header_read_timeout_ms),
            ("frameReadTimeoutMillis", self.frame_read_timeout_ms),
            ("badRequestLogIntervalMillis", self.bad_request_log_interval_ms),
            ("maxTopicsPerBroker", self.topics_per_broker_max),
            ("maxBrokers", self.brokers_max),
        ):
            if value <= 0:
                raise ConfigError(f"config key {key!r}: {value} must be positive")
        if self.acl_enable and not self.acl_file:
            raise ConfigError(
                "config key 'aclEnable' needs 'aclFile' (the accounts file, plain_acl.yml format)"
            )
        if self.write_buffer_max_bytes < self.write_buffer_high_bytes:
            raise ConfigError("config key 'writeBufferMaxBytes' must be at least 'writeBufferHighWaterMark'")

    def server_limits(self) -> ServerLimits:
        """The transport limits of the name server's remoting server."""
        return ServerLimits(
            max_connections=self.server_max_connections,
            write_buffer_high_bytes=self.write_buffer_high_bytes,
            write_buffer_max_bytes=self.write_buffer_max_bytes,
            header_read_timeout_ms=self.header_read_timeout_ms,
            frame_read_timeout_ms=self.frame_read_timeout_ms,
        )


def load_namesrv_config(path: str | None, overrides: dict[str, object] | None = None) -> NamesrvConfig:
    """Defaults < ``path`` (a namesrv.conf, optional) < ``overrides`` (RocketMQ keys from the CLI)."""
    config, _ = load_namesrv_configs(path, overrides)
    return config


def load_namesrv_configs(
    path: str | None, overrides: dict[str, object] | None = None
) -> tuple[NamesrvConfig, ControllerConfig | None]:
    """The name server's config and, with ``enableControllerInNamesrv=true``, its controller's."""
    values: dict[str, object] = dict(load_properties(path)) if path else {}
    values.update(overrides or {})
    values = merge_tls_config_file(values)
    enabled = str(values.get("enableControllerInNamesrv", "false")).strip().lower() in ("true", "1")
    classes: list[type] = [NamesrvConfig, TlsConfig]
    unimplemented = NAMESRV_UNIMPLEMENTED_KEYS | TLS_UNIMPLEMENTED_KEYS
    if enabled:
        classes.append(ControllerConfig)
        unimplemented |= CONTROLLER_UNIMPLEMENTED_KEYS
    built = build_configs(classes, values, unimplemented)
    namesrv_config = replace(built[0], tls=built[1])
    return namesrv_config, (built[2] if enabled else None)
