"""orbitmq.conf: reading RocketMQ-style properties files and mapping them onto config dataclasses.

Method: a small dataclass covering every supported field type, plus the fixture files under
tests/fixtures/conf fed through NamesrvConfig, the way the name server loads them.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orbitmq.conf import build_config, build_configs, config_keys, load_properties
from orbitmq.errors import ConfigError
from orbitmq.namesrv.config import NamesrvConfig, load_namesrv_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conf"


class FlushDiskType(enum.Enum):
    SYNC_FLUSH = "sync"
    ASYNC_FLUSH = "async"


@dataclass(frozen=True)
class SampleConfig:
    port: int = field(default=1, metadata={"key": "listenPort"})
    name: str = field(default="a", metadata={"key": "brokerName"})
    enabled: bool = field(default=False, metadata={"key": "autoCreateTopicEnable"})
    ratio: float = field(default=0.5, metadata={"key": "diskMaxUsedSpaceRatio"})
    root: Path = field(default=Path("/tmp"), metadata={"key": "storePathRootDir"})
    flush: FlushDiskType = field(default=FlushDiskType.ASYNC_FLUSH, metadata={"key": "flushDiskType"})
    file_size_bytes: int = field(
        default=10, metadata={"key": "mappedFileSizeCommitLog", "aliases": ("mapedFileSizeCommitLog",)}
    )
    namesrv_addrs: tuple[str, ...] = field(default=(), metadata={"key": "namesrvAddr"})
    ha_addr: str | None = field(default=None, metadata={"key": "haMasterAddress"})
    internal: int = 7


@dataclass(frozen=True)
class OtherConfig:
    port: int = field(default=2, metadata={"key": "listenPort"})
    retention_hours: int = field(default=72, metadata={"key": "fileReservedTime"})


def test_load_properties_reads_both_separators_comments_and_trims(tmp_path: Path) -> None:
    path = tmp_path / "a.conf"
    path.write_text("# c\n! c\n\n  a = 1 \nb:2\nc=x=y\nd=\na=3\n")
    assert load_properties(path) == {"a": "3", "b": "2", "c": "x=y", "d": ""}


def test_load_properties_malformed_line_names_file_and_line() -> None:
    with pytest.raises(ConfigError, match=r"malformed\.conf:2"):
        load_properties(FIXTURES / "malformed.conf")


def test_load_properties_missing_file_names_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nope.conf"):
        load_properties(tmp_path / "nope.conf")


def test_build_config_coerces_every_supported_type() -> None:
    config = build_config(
        SampleConfig,
        {
            "listenPort": "10911",
            "brokerName": "broker-a",
            "autoCreateTopicEnable": "TRUE",
            "diskMaxUsedSpaceRatio": "0.75",
            "storePathRootDir": "/data/store",
            "flushDiskType": "sync_flush",
            "mapedFileSizeCommitLog": "1024",
            "namesrvAddr": "127.0.0.1:9876;127.0.0.1:9877",
            "haMasterAddress": "",
        },
    )
    assert config == SampleConfig(
        port=10911,
        name="broker-a",
        enabled=True,
        ratio=0.75,
        root=Path("/data/store"),
        flush=FlushDiskType.SYNC_FLUSH,
        file_size_bytes=1024,
        namesrv_addrs=("127.0.0.1:9876", "127.0.0.1:9877"),
        ha_addr=None,
    )


def test_build_config_accepts_typed_values_and_defaults_the_rest() -> None:
    config = build_config(
        SampleConfig, {"listenPort": 5, "autoCreateTopicEnable": True, "diskMaxUsedSpaceRatio": 1}
    )
    assert (config.port, config.enabled, config.ratio, config.name) == (5, True, 1.0, "a")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("listenPort", "ninety", "int"),
        ("listenPort", True, "int"),
        ("autoCreateTopicEnable", "yes", "bool"),
        ("flushDiskType", "FAST", "FlushDiskType"),
        ("diskMaxUsedSpaceRatio", "lots", "float"),
    ],
)
def test_build_config_bad_value_names_key_value_and_type(key: str, value: object, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build_config(SampleConfig, {key: value})
    message = str(caught.value)
    assert key in message and repr(value) in message and expected in message


def test_build_config_unknown_key_names_nearest_known_key() -> None:
    with pytest.raises(ConfigError, match=r"'listenPrt'.*'listenPort'"):
        build_config(SampleConfig, {"listenPrt": "1"})


def test_build_config_unknown_key_without_near_match_still_fails() -> None:
    with pytest.raises(ConfigError, match="zzzzzz"):
        build_config(SampleConfig, {"zzzzzz": "1"})


def test_build_config_known_unimplemented_key_only_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="orbitmq.conf"):
        config = build_config(SampleConfig, {"rocketmqHome": "/opt"}, known_unimplemented={"rocketmqHome"})
    assert config == SampleConfig()
    assert "rocketmqHome" in caplog.text


def test_build_config_key_and_alias_together_is_an_error() -> None:
    with pytest.raises(ConfigError, match="mapedFileSizeCommitLog"):
        build_config(SampleConfig, {"mappedFileSizeCommitLog": "1", "mapedFileSizeCommitLog": "2"})


def test_build_configs_spreads_one_file_over_several_classes() -> None:
    sample, other = build_configs(
        [SampleConfig, OtherConfig], {"listenPort": "7", "brokerName": "b", "fileReservedTime": "48"}
    )
    assert (sample.port, sample.name) == (7, "b")
    assert (other.port, other.retention_hours) == (7, 48)


def test_build_configs_key_unknown_to_every_class_fails() -> None:
    with pytest.raises(ConfigError, match="fileReservedTme"):
        build_configs([SampleConfig, OtherConfig], {"fileReservedTme": "48"})


def test_config_keys_lists_keys_and_aliases_not_unkeyed_fields() -> None:
    keys = config_keys(SampleConfig)
    assert keys["mapedFileSizeCommitLog"] == keys["mappedFileSizeCommitLog"] == "file_size_bytes"
    assert "internal" not in keys.values()


def test_namesrv_config_loads_valid_fixture_with_cli_override(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = load_namesrv_config(str(FIXTURES / "valid.conf"), {"scanNotActiveBrokerInterval": 2000})
    assert config == NamesrvConfig(
        listen_port=19876, bind_address="127.0.0.1", scan_not_active_broker_interval_ms=2000
    )
    assert "rocketmqHome" in caplog.text


def test_namesrv_config_unknown_key_fixture_fails() -> None:
    with pytest.raises(ConfigError, match=r"'listenPrt'.*did you mean 'listenPort'"):
        load_namesrv_config(str(FIXTURES / "unknown_key.conf"))


def test_namesrv_config_bad_value_fixture_fails() -> None:
    with pytest.raises(ConfigError, match=r"'listenPort'.*'ninety'.*int"):
        load_namesrv_config(str(FIXTURES / "bad_value.conf"))


def test_namesrv_config_rejects_out_of_range_port() -> None:
    with pytest.raises(ConfigError, match="listenPort"):
        load_namesrv_config(None, {"listenPort": 70000})
