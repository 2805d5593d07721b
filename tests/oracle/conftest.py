"""One Apache RocketMQ pair (Java NameServer + Broker) and one OrbitMQ pair per test module.

The Java servers come from Maven Central through tests/oracle/java/pom.xml, cached in
``.cache/m2``; without java or mvn on PATH the tier skips (``.ci/run`` installs both).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.oracle_servers import start_apache_broker, start_apache_namesrv, tools_available
from tests.support.processes import ServerProcess, start_broker, start_namesrv, wait_route


@dataclass(frozen=True)
class Pair:
    namesrv_addr: str
    broker_addr: str


def _stop(servers: list[ServerProcess]) -> None:
    for server in reversed(servers):
        server.stop(timeout_s=10)


@pytest.fixture(scope="module")
def apache_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    # A pair already running (ORACLE_APACHE=namesrv_addr,broker_addr) saves a JVM start while
    # working on the corpus; the tier itself always starts its own.
    given = os.environ.get("ORACLE_APACHE")
    if given:
        namesrv_addr, broker_addr = given.split(",")
        yield Pair(namesrv_addr, broker_addr)
        return
    missing = tools_available()
    if missing:
        pytest.skip(f"the oracle tier needs {missing} on PATH")
    tmp_path = tmp_path_factory.mktemp("apache")
    servers: list[ServerProcess] = []
    try:
        servers.append(start_apache_namesrv(tmp_path))
        servers.append(start_apache_broker(tmp_path, servers[0].addr))
        wait_route(servers[0].addr, "TBW102", {"broker-a"}, timeout_s=60)
        yield Pair(servers[0].addr, servers[1].addr)
    finally:
        _stop(servers)


@pytest.fixture(scope="module")
def orbitmq_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    tmp_path = tmp_path_factory.mktemp("orbitmq")
    servers: list[ServerProcess] = []
    try:
        servers.append(start_namesrv(tmp_path))
        servers.append(start_broker(tmp_path, servers[0].addr, "broker-a"))
        wait_route(servers[0].addr, "TBW102", {"broker-a"})
        yield Pair(servers[0].addr, servers[1].addr)
    finally:
        _stop(servers)
