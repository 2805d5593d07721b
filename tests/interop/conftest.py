"""Fixtures of the interop tier: OrbitMQ servers, and the real clients resolved and compiled.

The plain server is shared by the whole tier (the ACL and TLS ones by their module): each test
uses topics and groups of its own. Their broker.conf
shortens what Apache's defaults make slow to watch (delay levels of one second, a transaction
check-back every second) and turns on what the clients' features need (SQL92 filtering,
the trace topic).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.interop_go import go_available, go_driver
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


@pytest.fixture(scope="session", autouse=True)
def _warm_up_drivers() -> Iterator[None]:
    """Build what later tests need while the first ones run: the Go driver (minutes of CPU on a
    fresh machine) and every Java line (Maven downloads, then javac) in two background threads.

    Each build is locked and marked complete on disk, so a test that asks before its build is
    done waits for it, and one that fails here is built again, and reported, by the test."""

    def quietly(build: Callable[[], object]) -> None:
        with contextlib.suppress(Exception):
            build()

    def java_lines() -> None:
        for profile in ("remoting5", "remoting4", "grpc", "spring"):
            quietly(lambda profile=profile: java_line(profile))  # type: ignore[misc]

    threads = []
    if tools_available() is None:
        threads.append(threading.Thread(target=java_lines, name="warm-java", daemon=True))
    if go_available() is None:
        threads.append(threading.Thread(target=quietly, args=(go_driver,), name="warm-go", daemon=True))
    for thread in threads:
        thread.start()
    yield


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A standalone (nameserver, broker, gRPC proxy); ``extra_ports`` = [broker, gRPC].

    One for the tier (its tests run on one worker): every test uses topics and groups of its own,
    so a start per module (seconds each on busy cores) bought nothing."""
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
