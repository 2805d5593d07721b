"""The oracle tier's gRPC corpus: every scenario played against Apache's 5.x proxy and OrbitMQ's.

Both proxies run in their broker's process (Apache: ProxyStartup in LOCAL mode; OrbitMQ:
``orbitmq broker --enable-proxy``), each with a name server of its own, started once for the
module. A difference fails the scenario unless tests/oracle/grpc_intended_differences.py lists it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.oracle.grpc_harness import Endpoint, GrpcTarget, grpc_target, remark_of
from tests.oracle.grpc_intended_differences import ALLOWED
from tests.oracle.grpc_scenarios import SCENARIOS
from tests.oracle.grpc_servers import start_apache_proxy
from tests.oracle.harness import Difference, compare, unexplained
from tests.support.oracle_servers import start_apache_namesrv, tools_available
from tests.support.processes import (
    ServerProcess,
    broker_conf,
    free_ports,
    start_namesrv,
    start_on_free_ports,
    wait_route,
    write_conf,
)

pytestmark = [pytest.mark.oracle, pytest.mark.xdist_group("oracle_grpc"), pytest.mark.timeout(600)]


def _stop(servers: list[ServerProcess], timeout_s: float = 10) -> None:
    for server in reversed(servers):
        server.stop(timeout_s=timeout_s)


@pytest.fixture(scope="module")
def apache_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    # A proxy already running (ORACLE_GRPC_APACHE=grpc_addr,broker_addr) saves a JVM start while
    # working on the corpus; the tier itself always starts its own.
    given = os.environ.get("ORACLE_GRPC_APACHE")
    if given:
        grpc_addr, broker_addr = given.split(",")
        yield Endpoint(grpc_addr, broker_addr)
        return
    missing = tools_available()
    if missing:
        pytest.skip(f"the oracle tier needs {missing} on PATH")
    tmp_path = tmp_path_factory.mktemp("apache-grpc")
    servers: list[ServerProcess] = []
    try:
        servers.append(start_apache_namesrv(tmp_path))
        servers.append(start_apache_proxy(tmp_path, servers[0].addr))
        wait_route(servers[0].addr, "TBW102", {"broker-a"}, timeout_s=60)
        proxy = servers[1]
        yield Endpoint(proxy.addr, f"127.0.0.1:{proxy.extra_ports[0]}")
    finally:
        # Nothing is read back from the Apache side's store: a JVM that takes its time to shut
        # down is killed after a few seconds.
        _stop(servers, timeout_s=3)


def _start_orbitmq_proxy(tmp_path: Path, namesrv_addr: str) -> ServerProcess:
    def build() -> ServerProcess:
        broker_port, grpc_port = free_ports(2)
        conf = broker_conf(
            tmp_path,
            "broker-a",
            namesrv_addr,
            broker_port,
            grpcServerPort=grpc_port,
            grpcBindAddress="127.0.0.1",
            # RecallMessage: off by default in both brokers, as in RocketMQ.
            recallMessageEnable=True,
        )
        conf_path = write_conf(tmp_path / "broker.conf", conf)
        args = [sys.executable, "-m", "orbitmq.cli", "broker", "-c", str(conf_path), "--enable-proxy"]
        return ServerProcess(
            "broker", args, grpc_port, tmp_path / "broker", tmp_path / "broker.log", extra_ports=[broker_port]
        )

    return start_on_free_ports(build)


@pytest.fixture(scope="module")
def orbitmq_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    tmp_path = tmp_path_factory.mktemp("orbitmq-grpc")
    servers: list[ServerProcess] = []
    try:
        servers.append(start_namesrv(tmp_path))
        servers.append(_start_orbitmq_proxy(tmp_path, servers[0].addr))
        wait_route(servers[0].addr, "TBW102", {"broker-a"})
        proxy = servers[1]
        yield Endpoint(proxy.addr, f"127.0.0.1:{proxy.extra_ports[0]}")
    finally:
        _stop(servers)


# Against a proxy that is already running each run needs topic and group names of its own.
_RUN_TAG = f"_{os.getpid()}" if os.environ.get("ORACLE_GRPC_APACHE") else ""


def _collapsed(differences: list[Difference]) -> list[Difference]:
    """Differences under a field that one side does not have at all, shown once (at that field)."""
    absent = {
        (d.label, d.path)
        for d in differences
        if "<absent>" in (d.apache, d.orbitmq) and not d.path.endswith("=")
    }
    return [
        d
        for d in differences
        if not any(
            (d.label, d.path[: len(path)]) == (label, path) and len(d.path) > len(path)
            for label, path in absent
            if label == d.label
        )
    ]


async def _play(name: str, endpoint: Endpoint, server: str) -> GrpcTarget:
    async with grpc_target(server, endpoint, f"g_{name}{_RUN_TAG}") as target:
        await SCENARIOS[name](target)
    return target


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_oracle_grpc_scenario_answers_as_apache(
    name: str, apache_proxy: Endpoint, orbitmq_proxy: Endpoint
) -> None:
    apache = await _play(name, apache_proxy, "apache")
    orbitmq = await _play(name, orbitmq_proxy, "orbitmq")
    differences = unexplained(compare(name, apache.recorded, orbitmq.recorded), ALLOWED)
    if differences:
        remarks = "\n".join(
            f"  {a.label}: apache={remark_of(a)!r} / orbitmq={remark_of(b)!r}"
            for a, b in zip(apache.recorded, orbitmq.recorded, strict=False)
            if remark_of(a) or remark_of(b)
        )
        listing = "\n".join(f"  {d}" for d in _collapsed(differences))
        pytest.fail(
            f"{len(differences)} unexplained difference(s):\n{listing}\nstatus messages:\n{remarks}",
            pytrace=False,
        )
