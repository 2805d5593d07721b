"""Both servers say once, at start, that they are open to everyone when bound beyond loopback
without ACL; a broker with ACL says its HA port is not covered.

Tests must listen on 127.0.0.1 only, so a non-loopback bind is simulated: the remoting and HA
servers' ``start`` are replaced by ones that bind nothing. Everything else of the start-up runs.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from orbitmq.broker.app import BrokerApp
from orbitmq.broker.config import load_broker_config
from orbitmq.namesrv.app import NamesrvApp
from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.security import grpc_exposure_warning, ha_exposure_warning
from orbitmq.transport.server import RemotingServer
from orbitmq.transport.stream import StreamServer

WARNING_TEXT = "anyone who can reach this address can read, write and administer"


@pytest.fixture
def no_bind(monkeypatch: pytest.MonkeyPatch) -> None:
    async def start_without_binding(self: RemotingServer) -> None:
        return None

    async def stop_without_binding(self: RemotingServer, grace_s: float = 5.0) -> None:
        return None

    async def stream_without_binding(self: StreamServer) -> None:
        return None

    monkeypatch.setattr(RemotingServer, "start", start_without_binding)
    monkeypatch.setattr(RemotingServer, "stop", stop_without_binding)
    monkeypatch.setattr(StreamServer, "start", stream_without_binding)
    monkeypatch.setattr(StreamServer, "stop", stream_without_binding)


def warnings_in(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if WARNING_TEXT in record.getMessage()]


@pytest.mark.usefixtures("no_bind")
async def test_exposure_namesrv_on_every_interface_without_acl_warns_once(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    with caplog.at_level(logging.WARNING):
        app = NamesrvApp(NamesrvConfig(listen_port=0, bind_address="0.0.0.0"))
        await app.startup()
        await app.shutdown()
        guarded = NamesrvApp(
            NamesrvConfig(
                listen_port=0, bind_address="0.0.0.0", acl_enable=True, acl_file=str(tmp_path / "a.yml")
            )
        )
        await guarded.startup()
        await guarded.shutdown()
    found = warnings_in(caplog)
    assert len(found) == 1 and found[0].startswith("name server listens on 0.0.0.0:")


@pytest.mark.usefixtures("no_bind")
async def test_exposure_broker_on_every_interface_without_acl_warns_once(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    broker_config, store_config = load_broker_config(
        None,
        {"storePathRootDir": str(tmp_path / "store"), "listenPort": "0", "brokerIP1": "127.0.0.1",
         "bindAddress": "0.0.0.0", "mapedFileSizeCommitLog": str(1 << 20)},
    )  # fmt: skip
    with caplog.at_level(logging.WARNING):
        app = BrokerApp(broker_config, store_config)
        await app.startup()
        await app.shutdown()
    found = warnings_in(caplog)
    assert len(found) == 1 and found[0].startswith("broker broker-a listens on 0.0.0.0:")


@pytest.mark.usefixtures("no_bind")
async def test_exposure_broker_with_acl_warns_that_the_ha_port_is_open(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    (tmp_path / "a.yml").write_text("accounts: []\n")
    broker_config, store_config = load_broker_config(
        None,
        {"storePathRootDir": str(tmp_path / "store"), "listenPort": "0", "brokerIP1": "127.0.0.1",
         "bindAddress": "0.0.0.0", "mapedFileSizeCommitLog": str(1 << 20), "aclEnable": "true",
         "aclFile": str(tmp_path / "a.yml")},
    )  # fmt: skip
    with caplog.at_level(logging.WARNING):
        app = BrokerApp(broker_config, store_config)
        await app.startup()
        await app.shutdown()
    messages = [record.getMessage() for record in caplog.records]
    assert not [m for m in messages if WARNING_TEXT in m]
    assert len([m for m in messages if "ACL and TLS do not cover the HA link" in m]) == 1


def test_exposure_ha_and_grpc_ports_on_loopback_are_quiet() -> None:
    assert ha_exposure_warning("127.0.0.1", 10912) is None
    assert grpc_exposure_warning("127.0.0.1", 8081) is None
    assert "0.0.0.0:10912 hands this broker's commit log" in (ha_exposure_warning("0.0.0.0", 10912) or "")
    assert "gRPC proxy listens on 0.0.0.0:8081 without ACL" in (grpc_exposure_warning("", 8081) or "")
