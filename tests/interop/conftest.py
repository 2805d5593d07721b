"""Fixtures of the interop tier: OrbitMQ servers, and the real clients resolved and compiled.

The servers are module-scoped: each test uses topics and groups of its own. Their broker.conf
shortens what Apache's defaults make slow to watch (delay levels of one second, a transaction
check-back every second) and turns on what the clients' features need (SQL92 filtering,
the trace topic).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.interop_java import JavaLine, java_line, tools_available
from tests.support.processes import ServerProcess, start_standalone, wait_route, write_conf

# messageDelayLevel: eighteen levels, as Apache's, each short so a retry or a delay is seconds.
INTEROP_BROKER_CONF: dict[str, object] = {
    "enablePropertyFilter": True,
    "traceTopicEnable": True,
    "transactionCheckInterval": 1000,
    "transactionTimeOut": 1000,
    "messageDelayLevel": "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s",
}


def start_interop_standalone(directory: Path, name: str = "standalone", **conf: object) -> ServerProcess:
    config = write_conf(directory / f"{name}.conf", {**INTEROP_BROKER_CONF, **conf})
    return start_standalone(directory, "-c", str(config), name=name)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A standalone (nameserver, broker, gRPC proxy); ``extra_ports`` = [broker, gRPC]."""
    proc = start_interop_standalone(tmp_path_factory.mktemp("interop"))
    try:
        # The broker's port opens a moment before its registration reaches the name server; a
        # client asking for a route then finds none ("No route info of this topic").
        wait_route(proc.addr, "TBW102", {"broker-a"})
        yield proc
    finally:
        proc.kill()


def _line(profile: str) -> JavaLine:
    missing = tools_available()
    if missing:
        pytest.skip(f"the interop tier needs a JDK and Maven: {missing} not on PATH")
    return java_line(profile)


@pytest.fixture(scope="session", params=["remoting4", "remoting5"])
def remoting(request: pytest.FixtureRequest) -> JavaLine:
    """The Apache remoting client, 4.9.x and the newest 5.x (tests/interop/java/pom.xml)."""
    return _line(str(request.param))


@pytest.fixture(scope="session")
def remoting5() -> JavaLine:
    return _line("remoting5")


@pytest.fixture(scope="session")
def grpc_client() -> JavaLine:
    """Apache's 5.x gRPC client, rocketmq-client-java (tests/interop/java/pom.xml)."""
    return _line("grpc")
