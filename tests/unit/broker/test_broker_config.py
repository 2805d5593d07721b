"""load_broker_config: one broker.conf feeds BrokerConfig and StoreConfig; precedence and errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from orbitmq.broker.config import BrokerConfig, BrokerRole, load_broker_config
from orbitmq.errors import ConfigError
from orbitmq.store.config import FlushDiskType


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_broker_config_defaults_match_rocketmq() -> None:
    config = BrokerConfig()
    assert config.broker_cluster_name == "DefaultCluster"
    assert config.listen_port == 10911
    assert config.default_topic_queue_nums == 8
    assert config.register_name_server_period_ms == 30_000
    assert config.channel_expired_timeout_ms == 120_000
    assert config.broker_role is BrokerRole.ASYNC_MASTER


def test_load_broker_config_splits_keys_between_broker_and_store(tmp_path: Path) -> None:
    conf = _write(
        tmp_path / "broker.conf",
        "brokerName=broker-b\nnamesrvAddr=a:9876;b:9876\nlistenPort=20911\n"
        f"storePathRootDir={tmp_path / 'store'}\nflushDiskType=SYNC_FLUSH\nbrokerIP1=127.0.0.1\n",
    )
    broker, store = load_broker_config(conf)
    assert broker.broker_name == "broker-b"
    assert broker.namesrv_addr == ("a:9876", "b:9876")
    assert broker.advertised_address == "127.0.0.1:20911"
    assert store.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert Path(store.store_path_root_dir) == tmp_path / "store"


def test_load_broker_config_overrides_win_over_file(tmp_path: Path) -> None:
    conf = _write(tmp_path / "broker.conf", f"listenPort=1\nstorePathRootDir={tmp_path}\n")
    broker, _ = load_broker_config(conf, {"listenPort": 2})
    assert broker.listen_port == 2


def test_load_broker_config_requires_store_dir() -> None:
    with pytest.raises(ConfigError, match="storePathRootDir"):
        load_broker_config(None, {})


def test_load_broker_config_unknown_key_names_nearest(tmp_path: Path) -> None:
    conf = _write(tmp_path / "broker.conf", f"storePathRootDir={tmp_path}\nbrokerNmae=x\n")
    with pytest.raises(ConfigError, match="brokerNmae.*brokerName"):
        load_broker_config(conf)


def test_load_broker_config_unimplemented_key_only_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # brokerIP2 served here until replication implemented it; serverWorkerThreads stays ignored.
    conf = _write(tmp_path / "broker.conf", f"storePathRootDir={tmp_path}\nserverWorkerThreads=8\n")
    with caplog.at_level(logging.WARNING):
        load_broker_config(conf)
    assert "serverWorkerThreads" in caplog.text


def test_broker_config_master_must_have_id_zero() -> None:
    with pytest.raises(ConfigError, match="brokerId"):
        BrokerConfig(broker_id=1)
    assert BrokerConfig(broker_id=1, broker_role=BrokerRole.SLAVE).broker_id == 1


def test_broker_config_unset_ip_resolves_to_an_ipv4_address() -> None:
    host = BrokerConfig().advertised_host
    assert len(host.split(".")) == 4


def test_load_broker_config_reads_commit_log_warming_keys(tmp_path: Path) -> None:
    conf = _write(
        tmp_path / "broker.conf",
        f"storePathRootDir={tmp_path}\nwarmMapedFileEnable=false\nwarmMapedFileWindowBytes=1048576\n",
    )
    _, store = load_broker_config(conf)
    assert store.warm_mapped_file_enable is False
    assert store.warm_mapped_file_window_bytes == 1 << 20
    with pytest.raises(ConfigError, match="warmMapedFileWindowBytes=100"):
        load_broker_config(conf, {"warmMapedFileWindowBytes": 100})


def test_broker_config_slave_needs_an_id_above_zero() -> None:
    with pytest.raises(ConfigError, match="SLAVE must have an id above 0"):
        BrokerConfig(broker_role=BrokerRole.SLAVE)


def test_broker_config_ha_port_defaults_to_listen_port_plus_one() -> None:
    assert BrokerConfig(listen_port=10911).ha_port == 10912
    assert BrokerConfig(listen_port=0).ha_port == 0  # tests: any free port, like listenPort 0
    assert BrokerConfig(listen_port=10911, ha_listen_port=20000).ha_port == 20000
    with pytest.raises(ConfigError, match="haHousekeepingInterval"):
        BrokerConfig(ha_send_heartbeat_interval_ms=5000, ha_housekeeping_interval_ms=5000)
    with pytest.raises(ConfigError, match="haMasterAddress"):
        BrokerConfig(ha_master_address="10.0.0.1:10912")


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("enableControllerMode=true", "needs controllerAddr"),
        ("enableDLegerCommitLog=true", "DLedger"),
        ("enableSlaveActingMaster=true", "slave-acting-master"),
        ("inSyncReplicas=2", "needs enableControllerMode=true"),
        ("allAckInSyncStateSet=false", "needs enableControllerMode=true"),
        ("totalReplicas=3", "slave-acting-master"),
    ],
)
def test_load_broker_config_refuses_replication_modes_it_lacks(tmp_path: Path, line: str, words: str) -> None:
    conf = _write(tmp_path / "broker.conf", f"storePathRootDir={tmp_path}\n{line}\n")
    with pytest.raises(ConfigError, match=words):
        load_broker_config(conf)


def test_load_broker_config_mode_switched_off_only_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = _write(tmp_path / "broker.conf", f"storePathRootDir={tmp_path}\nenableDLegerCommitLog=false\n")
    with caplog.at_level(logging.WARNING):
        load_broker_config(conf)
    assert "enableDLegerCommitLog" in caplog.text


def test_load_broker_config_reads_controller_mode(tmp_path: Path) -> None:
    conf = _write(
        tmp_path / "broker.conf",
        f"storePathRootDir={tmp_path}\nenableControllerMode=true\ncontrollerAddr=127.0.0.1:1;127.0.0.1:2\n"
        "allAckInSyncStateSet=true\nminInSyncReplicas=2\nbrokerRole=SLAVE\nbrokerId=-1\n",
    )
    broker, _ = load_broker_config(conf)
    assert broker.enable_controller_mode and broker.all_ack_in_sync_state_set
    assert broker.controller_addr == ("127.0.0.1:1", "127.0.0.1:2")
    assert broker.min_in_sync_replicas == 2
    assert broker.master_lease_ms < broker.controller_heartbeat_timeout_ms


def test_load_broker_config_reads_every_role(tmp_path: Path) -> None:
    for role, broker_id in (("ASYNC_MASTER", 0), ("SYNC_MASTER", 0), ("SLAVE", 2)):
        conf = _write(
            tmp_path / "broker.conf",
            f"storePathRootDir={tmp_path}\nbrokerRole={role}\nbrokerId={broker_id}\nslaveTimeout=1500\n",
        )
        broker_config, _ = load_broker_config(conf)
        assert (broker_config.broker_role.value, broker_config.broker_id) == (role, broker_id)
        assert broker_config.slave_timeout_ms == 1500
