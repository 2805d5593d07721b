"""BrokerConfig and the loading of a RocketMQ ``broker.conf``.

One file feeds two frozen dataclasses: :class:`BrokerConfig` (this module) and the store's
``StoreConfig`` (``orbitmq.store.config``); a key belongs to whichever declares it. Precedence
is defaults < file < CLI overrides. Keys RocketMQ knows but OrbitMQ does not implement (listed
in :data:`UNIMPLEMENTED_KEYS`) only log a warning; keys that would switch on a replication mode
OrbitMQ lacks (DLedger, controller, quorum acks) are refused; any other unknown key is an error.

The ``tls.*`` keys (``transport.tls``) are read from the same file into :class:`TlsConfig`,
carried as ``BrokerConfig.tls``. With ``aclEnable=true`` every request is checked against the
accounts in ``aclFile`` (default ``<storePathRootDir>/conf/plain_acl.yml``), and the broker
signs its own requests to the name servers with ``innerClientAuthenticationCredentials``
(RocketMQ 5's key: ``{"accessKey":"...","secretKey":"..."}``).

The address clients reach (written as STOREHOST into every record, returned in routes) is
``brokerIP1:listenPort``. An unset ``brokerIP1`` means the bind address (``bindAddress``) when
it names one interface; bound to every interface (the default, as in RocketMQ), the first
non-loopback IPv4 address of this host (127.0.0.1 when there is none); tests set
``brokerIP1=127.0.0.1``.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

import orjson

from orbitmq.acl.signature import Credentials
from orbitmq.conf import build_configs, load_properties
from orbitmq.errors import ConfigError
from orbitmq.metrics.exporter import MetricsExporterType
from orbitmq.store.config import StoreConfig
from orbitmq.transport.server import ServerLimits
from orbitmq.transport.tls import TLS_UNIMPLEMENTED_KEYS, TlsConfig, merge_tls_config_file


class BrokerRole(Enum):
    """Replication role (ha-replication §1.1): a master takes writes, a slave copies its master."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def _key(name: str, *aliases: str) -> dict[str, object]:
    return {"key": name, "aliases": aliases} if aliases else {"key": name}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Settings of the broker shell (the store has its own StoreConfig)."""

    # Cluster this broker belongs to, as published in routes.
    broker_cluster_name: str = field(default="DefaultCluster", metadata=_key("brokerClusterName"))
    # Name shared by a master and its slaves.
    broker_name: str = field(default="broker-a", metadata=_key("brokerName"))
    # 0 for a master, >= 1 for slaves.
    broker_id: int = field(default=0, metadata=_key("brokerId"))
    # Name servers to register with ("a:9876;b:9876"); empty = register nowhere.
    namesrv_addr: tuple[str, ...] = field(default=(), metadata=_key("namesrvAddr"))
    # TCP port clients connect to.
    listen_port: int = field(default=10911, metadata=_key("listenPort"))
    # Serve every request on listenPort - 2 too, as RocketMQ's broker always does (its VIP
    # channel, where a Java slave fetches its master's topics). OrbitMQ's key, off by default:
    # OrbitMQ's own layouts (orbitmq cluster) put brokers two ports apart.
    vip_channel_enabled: bool = field(default=False, metadata=_key("vipChannelEnabled"))
    # Interface the listening socket binds (OrbitMQ's own key).
    bind_address: str = field(default="0.0.0.0", metadata=_key("bindAddress"))
    # Client-facing IPv4 address; None = first non-loopback IPv4 of this host.
    broker_ip1: str | None = field(default=None, metadata=_key("brokerIP1"))
    # Create unknown topics on send through the TBW102 template.
    auto_create_topic_enable: bool = field(default=True, metadata=_key("autoCreateTopicEnable"))
    # Let admins give a topic message.type=MIXED (every message type; RocketMQ's default is off).
    enable_mixed_message_type: bool = field(default=False, metadata=_key("enableMixedMessageType"))
    # Create unknown consumer groups on heartbeat.
    auto_create_subscription_group: bool = field(default=True, metadata=_key("autoCreateSubscriptionGroup"))
    # Queue count of TBW102 and so the cap of auto-created topics.
    default_topic_queue_nums: int = field(default=8, metadata=_key("defaultTopicQueueNums"))
    # Broker-wide permission bits (2 write, 4 read).
    broker_permission: int = field(default=6, metadata=_key("brokerPermission"))
    # Park pulls that find nothing until a message arrives or suspendTimeoutMillis passes.
    long_polling_enable: bool = field(default=True, metadata=_key("longPollingEnable"))
    # Hold time of an empty pull when long polling is off.
    short_polling_time_ms: int = field(default=1000, metadata=_key("shortPollingTimeMills"))
    # Period of REGISTER_BROKER to every name server.
    register_name_server_period_ms: int = field(default=30_000, metadata=_key("registerNameServerPeriod"))
    # Timeout of one REGISTER_BROKER call.
    register_broker_timeout_ms: int = field(default=6_000, metadata=_key("registerBrokerTimeoutMills"))
    # A client silent for this long is dropped from the producer/consumer tables.
    channel_expired_timeout_ms: int = field(
        default=120_000, metadata=_key("channelExpiredTimeout", "clientChannelExpiredTimeout")
    )
    # How often the client tables are scanned for expired clients (OrbitMQ's own key).
    client_scan_interval_ms: int = field(default=10_000, metadata=_key("clientScanInterval"))
    # ASYNC_MASTER, SYNC_MASTER (a send waits for a slave's acknowledgement) or SLAVE.
    broker_role: BrokerRole = field(default=BrokerRole.ASYNC_MASTER, metadata=_key("brokerRole"))
    # Port of the HA link (raw CommitLog bytes); None = listenPort + 1 (0 when listenPort is 0).
    ha_listen_port: int | None = field(default=None, metadata=_key("haListenPort"))
    # Host part of the advertised HA address; None = brokerIP1's address.
    broker_ip2: str | None = field(default=None, metadata=_key("brokerIP2"))
    # A slave's fixed master HA address (host:port); None = learned from the name servers.
    ha_master_address: str | None = field(default=None, metadata=_key("haMasterAddress"))
    # SYNC_MASTER: how long a send waits for a slave before FLUSH_SLAVE_TIMEOUT.
    slave_timeout_ms: int = field(default=3_000, metadata=_key("slaveTimeout"))
    # Idle time after which either side of the HA link sends a keep-alive.
    ha_send_heartbeat_interval_ms: int = field(default=5_000, metadata=_key("haSendHeartbeatInterval"))
    # Silence after which either side of the HA link drops it.
    ha_housekeeping_interval_ms: int = field(default=20_000, metadata=_key("haHousekeepingInterval"))
    # Largest body of one HA transfer frame.
    ha_transfer_batch_size_bytes: int = field(default=32 * 1024, metadata=_key("haTransferBatchSize"))
    # A slave further behind than this is not available to SYNC_MASTER sends (nor in sync).
    ha_slave_fallbehind_max_bytes: int = field(
        default=256 * 1024 * 1024, metadata=_key("haSlaveFallbehindMax")
    )
    # Pause between a slave's HA connection attempts (OrbitMQ's own key; RocketMQ waits 5 s).
    ha_reconnect_interval_ms: int = field(default=5_000, metadata=_key("haReconnectInterval"))
    # Period of a slave's metadata copy from its master (OrbitMQ's own key; RocketMQ: 10 s).
    slave_sync_interval_ms: int = field(default=10_000, metadata=_key("slaveSyncInterval"))
    # Whether pulls that read far behind the log's end are sent to a slave (suggestWhichBrokerId).
    slave_read_enable: bool = field(default=False, metadata=_key("slaveReadEnable"))
    # "Far behind": more than this share of the host's memory between the read and the log's end.
    access_message_in_memory_max_ratio_percent: int = field(
        default=40, metadata=_key("accessMessageInMemoryMaxRatio")
    )
    # Period of persisting consumer offsets (and other dirty config tables).
    flush_consumer_offset_interval_ms: int = field(
        default=5_000, metadata=_key("flushConsumerOffsetInterval")
    )
    # Reconsume attempts before a message goes to %DLQ%<group> (default retryMaxTimes of new groups).
    max_reconsume_times: int = field(default=16, metadata=_key("maxReconsumeTimes"))
    # Queue lock lifetime for orderly consumers without renewal.
    rebalance_lock_max_live_time_ms: int = field(default=60_000, metadata=_key("rebalanceLockMaxLiveTime"))
    # How long shutdown waits for requests in flight (OrbitMQ's own key).
    shutdown_grace_ms: int = field(default=5_000, metadata=_key("shutdownGracePeriod"))
    # Period of persisting the delay-level progress (config/delayOffset.json).
    flush_delay_offset_interval_ms: int = field(default=1_000, metadata=_key("flushDelayOffsetInterval"))
    # A half message undecided for this long is checked with its producer.
    transaction_timeout_ms: int = field(default=6_000, metadata=_key("transactionTimeOut"))
    # Checks of one half message before the broker rolls it back.
    transaction_check_max: int = field(default=15, metadata=_key("transactionCheckMax"))
    # Period of the transaction check service.
    transaction_check_interval_ms: int = field(default=60_000, metadata=_key("transactionCheckInterval"))
    # Whether TIMER_* / __STARTDELIVERTIME messages are held until their time (else refused).
    timer_wheel_enable: bool = field(default=True, metadata=_key("timerWheelEnable"))
    # Width of one time-wheel slot; delivery itself is to the millisecond.
    timer_precision_ms: int = field(default=1_000, metadata=_key("timerPrecisionMs"))
    # Whether RECALL_MESSAGE is served; off by default, as in RocketMQ (recallMessageEnable).
    recall_message_enable: bool = field(default=False, metadata=_key("recallMessageEnable"))
    # Timed messages due further ahead than this are refused with MESSAGE_ILLEGAL.
    timer_max_delay_sec: int = field(default=259_200, metadata=_key("timerMaxDelaySec"))
    # Period of flushing the timer log and wheel and writing the timer checkpoint.
    timer_flush_interval_ms: int = field(default=1_000, metadata=_key("timerFlushIntervalMs"))
    # Always send REGISTER_BROKER compressed; otherwise only a JSON body over 4 MiB is compressed.
    compressed_register: bool = field(default=False, metadata=_key("compressedRegister"))

    # -- resource limits (docs/limits.md) -------------------------------------------------------
    # Frames larger than this close their connection (RocketMQ: com.rocketmq.remoting.frameMaxLength).
    max_frame_bytes: int = field(default=16 * 1024 * 1024, metadata=_key("frameMaxLength"))
    # Open client connections; one more is closed at once.
    server_max_connections: int = field(default=10_000, metadata=_key("serverMaxConnections"))
    # Unsent response bytes above which a connection stops reading requests until it drains.
    write_buffer_high_bytes: int = field(default=4 * 1024 * 1024, metadata=_key("writeBufferHighWaterMark"))
    # Unsent response bytes above which a connection is aborted (a client that does not read).
    write_buffer_max_bytes: int = field(default=64 * 1024 * 1024, metadata=_key("writeBufferMaxBytes"))
    # A frame's header must arrive within this long of its first byte, else the connection closes.
    header_read_timeout_ms: int = field(default=10_000, metadata=_key("headerReadTimeoutMillis"))
    # A whole frame must arrive within this long of its first byte, else the connection closes.
    frame_read_timeout_ms: int = field(default=60_000, metadata=_key("frameReadTimeoutMillis"))
    # Shortest time between two log lines of one kind of bad input.
    bad_request_log_interval_ms: int = field(default=10_000, metadata=_key("badRequestLogIntervalMillis"))
    # Longest a pull is parked, whatever its suspendTimeoutMillis (clients time out at 30 s).
    long_polling_suspend_max_ms: int = field(default=25_000, metadata=_key("longPollingSuspendMaxMillis"))
    # Parked pulls per connection; past it a pull that would park answers SYSTEM_BUSY.
    parked_pulls_per_connection_max: int = field(default=2048, metadata=_key("maxParkedPullsPerConnection"))
    # Topics this broker hosts, system topics included; creating one more is refused.
    topics_max: int = field(default=150_000, metadata=_key("maxTopicsPerBroker"))
    # Consumer groups (subscription group configs) this broker keeps; one more is refused.
    consumer_groups_max: int = field(default=10_000, metadata=_key("maxConsumerGroups"))
    # Producer groups with a live member; a heartbeat naming one more is refused.
    producer_groups_max: int = field(default=10_000, metadata=_key("maxProducerGroups"))
    # Group memberships (client connection x group) tracked for producers and consumers together.
    tracked_clients_max: int = field(default=100_000, metadata=_key("maxTrackedClients"))
    # Queue locks of orderly consumers held at once; past it (after expired ones are dropped) a
    # queue is not locked.
    queue_locks_max: int = field(default=100_000, metadata=_key("maxQueueLocks"))

    # -- operations (SQL92 filters, trace, resets, request-reply) ---------------------------------
    # Serve SQL92 subscriptions (RocketMQ's default is off: pulls with SQL92 answer SYSTEM_ERROR).
    enable_property_filter: bool = field(default=False, metadata=_key("enablePropertyFilter"))
    # Create the message-trace topic (msgTraceTopicName, 1 queue) at start-up.
    trace_topic_enable: bool = field(default=False, metadata=_key("traceTopicEnable"))
    # Topic the trace records go to when clients use the default.
    msg_trace_topic_name: str = field(default="RMQ_SYS_TRACE_TOPIC", metadata=_key("msgTraceTopicName"))
    # Region stamped on every stored message (MSG_REGION) and send answer; trace records carry it.
    region_id: str = field(default="DefaultRegion", metadata=_key("regionId"))
    # Stamped as TRACE_ON on every message; false tells clients not to trace what this broker stores.
    trace_on: bool = field(default=True, metadata=_key("traceOn"))
    # Offset resets (INVOKE_BROKER_TO_RESET_OFFSET) held by the broker until the group's next pull
    # (RocketMQ 5); false: only RESET_CONSUMER_CLIENT_OFFSET to the online consumers (RocketMQ 4).
    use_server_side_reset_offset: bool = field(default=True, metadata=_key("useServerSideResetOffset"))
    # Also store the replies of request-reply in <cluster>_REPLY_TOPIC (besides pushing them).
    store_reply_message_enable: bool = field(default=True, metadata=_key("storeReplyMessageEnable"))
    # Period of writing the POP state snapshot (config/popState.json; OrbitMQ's own key).
    pop_snapshot_interval_ms: int = field(default=5_000, metadata=_key("popSnapshotInterval"))
    # Check every request against the accounts file (RocketMQ's plain ACL).
    acl_enable: bool = field(default=False, metadata=_key("aclEnable"))
    # The main accounts file; None = <storePathRootDir>/conf/plain_acl.yml (OrbitMQ's own key).
    acl_file: str | None = field(default=None, metadata=_key("aclFile"))
    # JSON {"accessKey": ..., "secretKey": ...} this broker signs its name-server requests with.
    inner_client_authentication_credentials: str | None = field(
        default=None, repr=False, metadata=_key("innerClientAuthenticationCredentials")
    )
    # TLS of the listening port and of the connections to the name servers (the tls.* keys).
    tls: TlsConfig = field(default_factory=TlsConfig)
    # -- controller mode (RocketMQ 5, RIP-44; docs/replication.md "Automatic failover") ------
    # The controller decides this broker's role and id; brokerRole and brokerId are ignored.
    enable_controller_mode: bool = field(default=False, metadata=_key("enableControllerMode"))
    # Every controller's remoting address ("a:9878;b:9878;c:9878").
    controller_addr: tuple[str, ...] = field(default=(), metadata=_key("controllerAddr"))
    # Silence after which the controller elects another master; a master stops taking writes
    # (its lease) after three quarters of it without the leader's confirmation.
    controller_heartbeat_timeout_ms: int = field(
        default=10_000, metadata=_key("controllerHeartBeatTimeoutMills")
    )
    # Period of the heartbeat to every controller (it also fetches the group's state).
    broker_heartbeat_interval_ms: int = field(default=1_000, metadata=_key("brokerHeartbeatInterval"))
    # Lower is preferred when two candidates are equally up to date.
    broker_election_priority: int = field(default=2_147_483_647, metadata=_key("brokerElectionPriority"))
    # A slave not caught up for this long leaves the SyncStateSet.
    ha_max_time_slave_not_catchup_ms: int = field(default=15_000, metadata=_key("haMaxTimeSlaveNotCatchup"))
    # Period of the master's SyncStateSet check.
    check_sync_state_set_period_ms: int = field(default=5_000, metadata=_key("checkSyncStateSetPeriod"))
    # A send is acknowledged once every SyncStateSet member has it; reads stop at the confirm offset.
    all_ack_in_sync_state_set: bool = field(default=False, metadata=_key("allAckInSyncStateSet"))
    # Without allAckInSyncStateSet: replicas (the master included) that must hold a send.
    in_sync_replicas: int = field(default=1, metadata=_key("inSyncReplicas"))
    # Sends are refused (SYSTEM_ERROR) while the SyncStateSet is smaller than this.
    min_in_sync_replicas: int = field(default=1, metadata=_key("minInSyncReplicas"))

    # DISABLE (no metrics) or PROM (Prometheus text at /metrics); RocketMQ 5.x's key and values.
    metrics_exporter_type: MetricsExporterType = field(
        default=MetricsExporterType.DISABLE, metadata=_key("metricsExporterType")
    )
    # Port of /metrics when metricsExporterType=PROM (0 = any free port, logged at start-up).
    metrics_prom_exporter_port: int = field(default=5557, metadata=_key("metricsPromExporterPort"))
    # Interface /metrics binds; None = brokerIP1's address (RocketMQ's default).
    metrics_prom_exporter_host: str | None = field(default=None, metadata=_key("metricsPromExporterHost"))
    # Topics exported one by one on /metrics, the most active first (messages stored, then name);
    # the others are summed under topic="__other__". Bounds a scrape's size and cost.
    metrics_max_topic_labels: int = field(default=100, metadata=_key("metricsMaxTopicLabels"))
    # Consumer groups exported one by one, the most active first (messages consumed, then name);
    # the others are summed under group="__other__".
    metrics_max_group_labels: int = field(default=100, metadata=_key("metricsMaxGroupLabels"))

    def __post_init__(self) -> None:
        if not 0 <= self.metrics_prom_exporter_port <= 65535:
            raise ConfigError(
                f"config key 'metricsPromExporterPort': {self.metrics_prom_exporter_port} is not a TCP port"
            )
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError(f"config key 'listenPort': {self.listen_port} is not a TCP port")
        for key, value in (
            ("metricsMaxTopicLabels", self.metrics_max_topic_labels),
            ("metricsMaxGroupLabels", self.metrics_max_group_labels),
        ):
            if value < 0:
                raise ConfigError(f"config key '{key}': {value} < 0")
        if self.enable_controller_mode:
            self._check_controller_mode()
        elif self.broker_id < 0:
            raise ConfigError(f"config key 'brokerId': {self.broker_id} is negative")
        elif self.broker_role is not BrokerRole.SLAVE and self.broker_id != 0:
            raise ConfigError(
                f"config key 'brokerId': a {self.broker_role.value} must have id 0, not {self.broker_id}"
            )
        elif self.broker_role is BrokerRole.SLAVE and self.broker_id == 0:
            raise ConfigError("config key 'brokerId': a SLAVE must have an id above 0 (0 is its master's)")
        self._check_replication()
        if not 0 <= self.broker_permission <= 7:
            raise ConfigError(f"config key 'brokerPermission': {self.broker_permission} is not in 0..7")
        if self.default_topic_queue_nums < 1:
            raise ConfigError(f"config key 'defaultTopicQueueNums': {self.default_topic_queue_nums} < 1")
        if self.max_reconsume_times < 0:
            raise ConfigError(f"config key 'maxReconsumeTimes': {self.max_reconsume_times} is negative")
        if self.transaction_check_max < 1:
            raise ConfigError(f"config key 'transactionCheckMax': {self.transaction_check_max} < 1")
        if self.transaction_check_interval_ms < 1 or self.transaction_timeout_ms < 0:
            raise ConfigError("config keys 'transactionCheckInterval'/'transactionTimeOut' must be positive")
        if not 1 <= self.timer_precision_ms <= 60_000:
            raise ConfigError(f"config key 'timerPrecisionMs': {self.timer_precision_ms} is not 1..60000")
        if self.timer_max_delay_sec < 1:
            raise ConfigError(f"config key 'timerMaxDelaySec': {self.timer_max_delay_sec} < 1")
        if self.pop_snapshot_interval_ms < 1:
            raise ConfigError(f"config key 'popSnapshotInterval': {self.pop_snapshot_interval_ms} < 1")
        if self.timer_flush_interval_ms < 1 or self.flush_delay_offset_interval_ms < 1:
            raise ConfigError(
                "config keys 'timerFlushIntervalMs'/'flushDelayOffsetInterval' must be positive"
            )
        for key, value in (
            ("frameMaxLength", self.max_frame_bytes),
            ("serverMaxConnections", self.server_max_connections),
            ("writeBufferHighWaterMark", self.write_buffer_high_bytes),
            ("writeBufferMaxBytes", self.write_buffer_max_bytes),
            ("headerReadTimeoutMillis", self.header_read_timeout_ms),
            ("frameReadTimeoutMillis", self.frame_read_timeout_ms),
            ("badRequestLogIntervalMillis", self.bad_request_log_interval_ms),
            ("longPollingSuspendMaxMillis", self.long_polling_suspend_max_ms),
            ("maxParkedPullsPerConnection", self.parked_pulls_per_connection_max),
            ("maxTopicsPerBroker", self.topics_max),
            ("maxConsumerGroups", self.consumer_groups_max),
            ("maxProducerGroups", self.producer_groups_max),
            ("maxTrackedClients", self.tracked_clients_max),
            ("maxQueueLocks", self.queue_locks_max),
        ):
            if value < 1:
                raise ConfigError(f"config key {key!r}: {value} must be positive")
        if self.write_buffer_max_bytes < self.write_buffer_high_bytes:
            raise ConfigError("config key 'writeBufferMaxBytes' must be at least 'writeBufferHighWaterMark'")
        self.inner_credentials  # noqa: B018 - parse now, so a malformed value stops the start

    @property
    def inner_credentials(self) -> Credentials | None:
        """The credentials of ``innerClientAuthenticationCredentials``, if set."""
        return parse_credentials_json(
            self.inner_client_authentication_credentials, "innerClientAuthenticationCredentials"
        )

    def _check_controller_mode(self) -> None:
        if not self.controller_addr:
            raise ConfigError(
                "enableControllerMode=true needs controllerAddr (every controller, ';'-separated)"
            )
        if self.ha_master_address is not None:
            raise ConfigError(
                "config key 'haMasterAddress': in controller mode the controller names the master"
            )
        for key, value in (
            ("controllerHeartBeatTimeoutMills", self.controller_heartbeat_timeout_ms),
            ("brokerHeartbeatInterval", self.broker_heartbeat_interval_ms),
            ("haMaxTimeSlaveNotCatchup", self.ha_max_time_slave_not_catchup_ms),
            ("checkSyncStateSetPeriod", self.check_sync_state_set_period_ms),
            ("inSyncReplicas", self.in_sync_replicas),
            ("minInSyncReplicas", self.min_in_sync_replicas),
        ):
            if value < 1:
                raise ConfigError(f"config key {key!r}: {value} must be positive")
        if self.broker_heartbeat_interval_ms * 3 > self.controller_heartbeat_timeout_ms:
            raise ConfigError(
                "config key 'controllerHeartBeatTimeoutMills' must be at least three brokerHeartbeatInterval, "
                "or a master loses its lease between two heartbeats"
            )

    @property
    def master_lease_ms(self) -> int:
        """How long a master takes writes after the controller leader last confirmed it."""
        return self.controller_heartbeat_timeout_ms * 3 // 4

    def server_limits(self) -> ServerLimits:
        """The transport limits of the broker's remoting server."""
        return ServerLimits(
            max_connections=self.server_max_connections,
            write_buffer_high_bytes=self.write_buffer_high_bytes,
            write_buffer_max_bytes=self.write_buffer_max_bytes,
            header_read_timeout_ms=self.header_read_timeout_ms,
            frame_read_timeout_ms=self.frame_read_timeout_ms,
        )

    def _check_replication(self) -> None:
        if self.ha_listen_port is not None and not 0 <= self.ha_listen_port <= 65535:
            raise ConfigError(f"config key 'haListenPort': {self.ha_listen_port} is not a TCP port")
        if self.ha_listen_port is None and self.listen_port == 65535:
            raise ConfigError("config key 'haListenPort': listenPort + 1 is not a TCP port; set haListenPort")
        positive = {
            "slaveTimeout": self.slave_timeout_ms,
            "haSendHeartbeatInterval": self.ha_send_heartbeat_interval_ms,
            "haHousekeepingInterval": self.ha_housekeeping_interval_ms,
            "haTransferBatchSize": self.ha_transfer_batch_size_bytes,
            "haSlaveFallbehindMax": self.ha_slave_fallbehind_max_bytes,
            "haReconnectInterval": self.ha_reconnect_interval_ms,
            "slaveSyncInterval": self.slave_sync_interval_ms,
        }
        for key, value in positive.items():
            if value < 1:
                raise ConfigError(f"config key {key!r}: {value} must be positive")
        if self.ha_transfer_batch_size_bytes > 4 * 1024 * 1024:
            raise ConfigError(
                f"config key 'haTransferBatchSize': {self.ha_transfer_batch_size_bytes} is above 4 MiB, "
                "the largest frame a slave reads"
            )
        if self.ha_housekeeping_interval_ms <= self.ha_send_heartbeat_interval_ms:
            raise ConfigError(
                "config key 'haHousekeepingInterval' must exceed 'haSendHeartbeatInterval', "
                "or idle HA links are dropped between keep-alives"
            )
        if not 0 <= self.access_message_in_memory_max_ratio_percent <= 100:
            raise ConfigError(
                f"config key 'accessMessageInMemoryMaxRatio': "
                f"{self.access_message_in_memory_max_ratio_percent} is not 0..100"
            )
        if (
            self.ha_master_address is not None
            and self.broker_role is not BrokerRole.SLAVE
            and not self.enable_controller_mode
        ):
            raise ConfigError(
                f"config key 'haMasterAddress' is for slaves; this broker is a {self.broker_role.value}"
            )

    @property
    def ha_port(self) -> int:
        """The HA port to bind: haListenPort, else listenPort + 1 (0, any free port, with listenPort 0)."""
        if self.ha_listen_port is not None:
            return self.ha_listen_port
        return self.listen_port + 1 if self.listen_port else 0

    @property
    def advertised_host(self) -> str:
        """The IPv4 address clients use to reach this broker.

        ``brokerIP1`` when set; else the bind address when it names one interface (the only one
        clients can reach then); else, bound to every interface, this host's first
        non-loopback IPv4 address, as RocketMQ does.
        """
        if self.broker_ip1:
            return self.broker_ip1
        if self.bind_address not in WILDCARD_ADDRESSES:
            return self.bind_address
        return first_non_loopback_ipv4()

    @property
    def advertised_address(self) -> str:
        return f"{self.advertised_host}:{self.listen_port}"


UNIMPLEMENTED_KEYS = frozenset(
    {
        "dLegerGroup",
        "dLegerPeers",
        "dLegerSelfId",
        "sendMessageThreadPoolNums",
        "pullMessageThreadPoolNums",
        "queryMessageThreadPoolNums",
        "adminBrokerThreadPoolNums",
        "clientManageThreadPoolNums",
        "consumerManageThreadPoolNums",
        "serverWorkerThreads",
        "serverSelectorThreads",
        "serverCallbackExecutorThreads",
        "useReentrantLockWhenPutMessage",
        "waitTimeMillsInSendQueue",
        "waitTimeMillsInPullQueue",
        "osPageCacheBusyTimeOutMills",
        "enableCalcFilterBitMap",
        "filterServerNums",
        "transferMsgByHeap",
        "transientStorePoolEnable",
        "fetchNamesrvAddrByAddressServer",
        "rejectTransactionMessage",
        "clusterTopicEnable",
        "brokerTopicEnable",
        "isEnableBatchPush",
        "offsetCheckInSlave",
        "autoDeleteUnusedStats",
        "commercialEnable",
    }
)
"""RocketMQ broker.conf keys OrbitMQ accepts with a warning and ignores."""

REFUSED_WHEN_ENABLED = {
    "enableDLegerCommitLog": "DLedger (Raft) CommitLog replication is not implemented; use brokerRole",
    "enableSlaveActingMaster": "slave-acting-master mode is not implemented",
}
"""Keys that switch on a replication mode OrbitMQ does not have: refused when true, ignored
with a warning when false, so a broker never runs silently in a mode other than the one asked."""

REFUSED_KEYS = {
    "totalReplicas": "slave-acting-master quorum writes are not implemented",
}
CONTROLLER_MODE_KEYS = ("inSyncReplicas", "minInSyncReplicas", "allAckInSyncStateSet")
"""Quorum keys that mean something only in controller mode: refused without it."""
"""Keys whose every value asks for behaviour OrbitMQ does not have: always refused."""


def _enabled(value: object) -> bool:
    return str(value).strip().lower() in ("true", "1")


def check_refused_keys(values: Mapping[str, object]) -> None:
    """Refuse the keys that would make this broker run in a mode it does not implement.

    Raises:
        ConfigError: naming the key and what is missing.
    """
    for key, reason in REFUSED_WHEN_ENABLED.items():
        if key in values and _enabled(values[key]):
            raise ConfigError(f"config key {key!r}={values[key]}: {reason}")
    for key, reason in REFUSED_KEYS.items():
        if key in values:
            raise ConfigError(f"config key {key!r}: {reason}")
    if not _enabled(values.get("enableControllerMode", "false")):
        for key in CONTROLLER_MODE_KEYS:
            if key in values:
                raise ConfigError(
                    f"config key {key!r} needs enableControllerMode=true: without a controller a "
                    "SYNC_MASTER waits for one slave (4.x)"
                )


WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "", "::"})
"""Bind addresses that mean "every interface"."""


def load_broker_config(
    path: str | Path | None, overrides: Mapping[str, object] | None = None
) -> tuple[BrokerConfig, StoreConfig]:
    """Read ``broker.conf`` (if given), apply CLI overrides, and build both configs.

    Raises:
        ConfigError: unreadable file, unknown key, bad value, broken cross-field rule, a key
            asking for a replication mode OrbitMQ lacks, or no ``storePathRootDir`` (the CLI
            derives one when the operator gives none).
    """
    broker_config, store_config = load_broker_configs(path, overrides)
    return broker_config, store_config


def load_broker_configs(
    path: str | Path | None, overrides: Mapping[str, object] | None = None, extra: Sequence[type] = ()
) -> tuple[Any, ...]:
    """As :func:`load_broker_config`, plus configs of parts run in the broker's process.

    ``extra`` config dataclasses read their keys from the same file (the gRPC proxy in local
    mode reads ``grpcServerPort`` and friends from ``broker.conf``); returns
    ``(BrokerConfig, StoreConfig, *extra instances)``.
    """
    values: dict[str, object] = dict(load_properties(path)) if path is not None else {}
    values.update(overrides or {})
    values = merge_tls_config_file(values)
    if not values.get("storePathRootDir"):
        raise ConfigError("config key 'storePathRootDir' is required (the directory of the store)")
    check_refused_keys(values)
    broker_config, store_config, tls_config, *others = build_configs(
        [BrokerConfig, StoreConfig, TlsConfig, *extra],
        values,
        UNIMPLEMENTED_KEYS | REFUSED_WHEN_ENABLED.keys() | TLS_UNIMPLEMENTED_KEYS,
    )
    return (replace(broker_config, tls=tls_config), store_config, *others)


def parse_credentials_json(text: str | None, key: str) -> Credentials | None:
    """``{"accessKey": ..., "secretKey": ...}`` -> Credentials (None for an empty value).

    Raises:
        ConfigError: not such a JSON object; the message never quotes the secret.
    """
    if not text:
        return None
    try:
        tree = orjson.loads(text)
        access_key, secret_key = tree["accessKey"], tree["secretKey"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise ConfigError(f'config key {key!r} must be {{"accessKey": "...", "secretKey": "..."}}') from None
    if not isinstance(access_key, str) or not isinstance(secret_key, str) or not access_key or not secret_key:
        raise ConfigError(f"config key {key!r}: accessKey and secretKey must be non-empty strings")
    return Credentials(access_key, secret_key)


def first_non_loopback_ipv4() -> str:
    """The first IPv4 address of this host that is not loopback, else 127.0.0.1."""
    candidates: list[str] = []
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            candidates.append(str(info[4][0]))
    except OSError:
        pass
    # The address the kernel would use for an outbound route: no packet is sent by connect()
    # on a UDP socket, it only picks the source address.
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))
            candidates.append(str(probe.getsockname()[0]))
    except OSError:
        pass
    for address in candidates:
        if not address.startswith("127.") and address != "0.0.0.0":
            return address
    return "127.0.0.1"
