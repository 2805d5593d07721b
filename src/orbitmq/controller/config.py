"""Controller configuration: RocketMQ 5's ``controller.conf`` keys on a frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field

from orbitmq.conf import build_config, load_properties
from orbitmq.errors import ConfigError

__all__ = ["ControllerConfig", "load_controller_config", "parse_peers"]

CONTROLLER_UNIMPLEMENTED_KEYS = frozenset(
    {
        "controllerType",
        "jRaftGroupId",
        "jRaftServerId",
        "jRaftInitConf",
        "jRaftControllerRPCAddr",
        "controllerThreadPoolNums",
        "controllerRequestThreadPoolQueueCapacity",
        "mappedFileSize",
        "notifyBrokerRoleChanged",
        "rocketmqHome",
        "configStorePath",
    }
)
"""RocketMQ controller keys OrbitMQ accepts and ignores (a warning names each one)."""


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Settings of one controller (standalone, or embedded in a name server)."""

    # Remoting port brokers and admin tools connect to (RocketMQ: the controller's listenPort).
    listen_port: int = field(default=9878, metadata={"key": "listenPort"})
    bind_address: str = field(default="0.0.0.0", metadata={"key": "bindAddress"})
    # The Raft group's name (informational; one group per controller process).
    group: str = field(default="group1", metadata={"key": "controllerDLegerGroup"})
    # Every controller's Raft address: n0-127.0.0.1:9877;n1-...;n2-...
    peers: str = field(default="", metadata={"key": "controllerDLegerPeers"})
    # This controller's entry in controllerDLegerPeers.
    self_id: str = field(default="n0", metadata={"key": "controllerDLegerSelfId"})
    # Where the Raft journal and snapshots live.
    store_path: str = field(default="", metadata={"key": "controllerStorePath"})
    # Elect a replica outside the SyncStateSet when no member is alive (may lose acknowledged messages).
    enable_elect_unclean_master: bool = field(default=False, metadata={"key": "enableElectUncleanMaster"})
    # How often the leader looks for groups whose master stopped heartbeating.
    scan_not_active_broker_interval_ms: int = field(
        default=5000, metadata={"key": "scanNotActiveBrokerInterval"}
    )
    # Raft election timeout range (OrbitMQ's keys; PySyncObj's raftMinTimeout/raftMaxTimeout).
    election_timeout_min_ms: int = field(default=400, metadata={"key": "raftElectionTimeoutMinMills"})
    election_timeout_max_ms: int = field(default=1400, metadata={"key": "raftElectionTimeoutMaxMills"})

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port < 65536:
            raise ConfigError(f"config key 'listenPort': {self.listen_port} is not a TCP port")
        peers = parse_peers(self.peers)
        if self.self_id not in peers:
            raise ConfigError(
                f"config key 'controllerDLegerSelfId': {self.self_id!r} is not in controllerDLegerPeers "
                f"{self.peers!r} (expected entries like n0-127.0.0.1:9877;n1-127.0.0.1:9878)"
            )
        if not self.store_path:
            raise ConfigError("config key 'controllerStorePath' is required (the Raft journal lives there)")
        if not 0 < self.election_timeout_min_ms < self.election_timeout_max_ms:
            raise ConfigError(
                "raftElectionTimeoutMinMills must be positive and below raftElectionTimeoutMaxMills"
            )
        if self.scan_not_active_broker_interval_ms <= 0:
            raise ConfigError("config key 'scanNotActiveBrokerInterval' must be positive")

    @property
    def self_raft_address(self) -> str:
        return parse_peers(self.peers)[self.self_id]

    @property
    def other_raft_addresses(self) -> list[str]:
        return [address for name, address in parse_peers(self.peers).items() if name != self.self_id]


def parse_peers(text: str) -> dict[str, str]:
    """``n0-host:port;n1-host:port`` -> {"n0": "host:port", ...}."""
    peers: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(";"))):
        name, separator, address = entry.partition("-")
        host, colon, port = address.rpartition(":")
        if not separator or not name or not colon or not host or not port.isdigit():
            raise ConfigError(
                f"config key 'controllerDLegerPeers': {entry!r} is not of the form n0-host:port"
            )
        peers[name] = address
    if not peers:
        raise ConfigError("config key 'controllerDLegerPeers' is required (n0-host:port;n1-host:port;...)")
    return peers


def load_controller_config(path: str | None, overrides: dict[str, object] | None = None) -> ControllerConfig:
    """Defaults < ``path`` (a controller.conf) < ``overrides``."""
    values: dict[str, object] = dict(load_properties(path)) if path else {}
    values.update(overrides or {})
    return build_config(ControllerConfig, values, known_unimplemented=CONTROLLER_UNIMPLEMENTED_KEYS)
