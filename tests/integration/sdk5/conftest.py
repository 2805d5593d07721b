"""Fixtures for the RocketMQ 5.x SDK tests: the SDK's venv, a standalone serving gRPC, a runner.

The standalone runs with short timings so that each behaviour shows in seconds: transaction
checks every second, receives may ask for 1 s of invisibility and poll for as little as 1 s,
push consumers' deliveries are renewed every second; SQL92 filters are on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess, start_standalone, write_conf
from tests.support.sdk5 import Sdk5, sdk_python

FAST_CONF: dict[str, object] = {
    "transactionCheckInterval": 1000,
    "transactionTimeOut": 1000,
    "minInvisibleTimeMillsForRecv": 1000,
    "grpcClientConsumerMinLongPollingTimeoutMillis": 1000,
    "renewSchedulePeriodMillis": 1000,
    "grpcBindAddress": "127.0.0.1",
    "enablePropertyFilter": "true",  # SQL92 subscriptions (off by default, as in RocketMQ)
    "enableMixedMessageType": "true",  # a topic of every message type (off by default, as in RocketMQ)
    "recallMessageEnable": "true",  # recall of timed messages (off by default, as in RocketMQ)
}


@pytest.fixture(scope="session")
def sdk5_python() -> Path:
    return sdk_python()


@pytest.fixture(scope="module")
def grpc_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One standalone (name server, broker, gRPC proxy) shared by a module's tests."""
    tmp = tmp_path_factory.mktemp("grpc")
    conf = write_conf(tmp / "broker.conf", FAST_CONF)
    proc = start_standalone(tmp, "-c", str(conf))
    try:
        yield proc
    finally:
        proc.kill()


def grpc_endpoint(server: ServerProcess) -> str:
    return f"127.0.0.1:{server.extra_ports[1]}"


def broker_addr(server: ServerProcess) -> str:
    return f"127.0.0.1:{server.extra_ports[0]}"


@pytest.fixture
def sdk5(sdk5_python: Path, grpc_standalone: ServerProcess, tmp_path: Path) -> Iterator[Sdk5]:
    client = Sdk5(sdk5_python, grpc_endpoint(grpc_standalone), tmp_path / "sdk5-home")
    try:
        yield client
    finally:
        client.kill_all()
