"""Where the servers listen, what they say about it, and what they log per request.

Method: real server processes on free ports. Reachability is tested by connecting through
this host's non-loopback IPv4 address (the test needs one; it is skipped without), and the
start-up log is read for the address really bound.
"""

from __future__ import annotations

import asyncio
import re
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from orbitmq.broker.config import first_non_loopback_ipv4
from orbitmq.client import AdminClient, Message, Producer
from tests.integration.client.test_producer import wait_for_brokers
from tests.support.processes import (
    ServerProcess,
    broker_conf,
    free_port,
    free_ports,
    start_namesrv,
    start_standalone,
    write_conf,
)

pytestmark = pytest.mark.integration


def _outside_ip() -> str:
    ip = first_non_loopback_ipv4()
    if ip.startswith("127."):
        pytest.skip("this host has no non-loopback IPv4 address to test reachability through")
    return ip


def _reachable(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=2):
            return True
    except OSError:
        return False


def _listening_lines(log: str) -> list[str]:
    """Addresses the remoting servers, the broker's HA port and the gRPC proxy say they bound."""
    return re.findall(r"(?:remoting server|HA port|gRPC proxy) listening on ([^\s,]+)", log)


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def _log_when(proc: ServerProcess, done: Callable[[str], bool], timeout_s: float = 15.0) -> str:
    """The process's log once ``done(log)`` holds (a port accepts connections a moment before
    the server's start-up lines are all written); the log as it is after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    log = proc.log()
    while not done(log) and time.monotonic() < deadline:
        time.sleep(0.05)
        log = proc.log()
    return log


def test_standalone_listens_on_loopback_by_default_and_says_so(tmp_path: Path) -> None:
    ip = _outside_ip()
    proc = start_standalone(tmp_path)
    try:
        ports = [proc.port, *proc.extra_ports]  # name server, broker, gRPC proxy
        # ... and the broker's HA port (listenPort + 1, or a free port when that one is taken).
        log = _log_when(proc, lambda text: len(_listening_lines(text)) > len(ports))
        bound = _listening_lines(log)
        assert len(bound) == len(ports) + 1, log
        assert {_port(address) for address in bound} >= set(ports), log
        assert all(address.startswith("127.0.0.1:") for address in bound), log
        assert not any(_reachable(ip, _port(address)) for address in bound)
        assert "0.0.0.0" not in log
    finally:
        proc.kill()


def test_standalone_bind_address_opens_every_interface_and_warns(tmp_path: Path) -> None:
    ip = _outside_ip()
    proc = start_standalone(tmp_path, "--bind-address", "0.0.0.0")
    try:
        ports = [proc.port, *proc.extra_ports]  # name server, broker, gRPC proxy
        log = _log_when(proc, lambda text: len(_listening_lines(text)) > len(ports))
        bound = _listening_lines(log)
        assert len(bound) == len(ports) + 1, log  # and the HA port
        assert {_port(address) for address in bound} >= set(ports), log
        assert all(address.startswith("0.0.0.0:") for address in bound), log
        assert all(_reachable(ip, _port(address)) for address in bound)
        assert "without authentication" in log
    finally:
        proc.kill()


def test_broker_bind_address_flag_limits_it_to_one_interface(tmp_path: Path) -> None:
    ip = _outside_ip()
    namesrv = start_namesrv(tmp_path)
    port = free_port()
    args = [
        sys.executable, "-m", "orbitmq.broker", "-n", namesrv.addr, "--listen-port", str(port),
        "--bind-address", "127.0.0.1", "--store-dir", str(tmp_path / "store"),
    ]  # fmt: skip
    broker = ServerProcess("broker", args, port, tmp_path / "broker", tmp_path / "broker.log")
    try:
        broker.start()
        # Bound to one interface and no brokerIP1: clients, and slaves, are given that interface.
        log = _log_when(broker, lambda text: "advertised as" in text)
        assert f"listening on 127.0.0.1:{port}, advertised as 127.0.0.1:{port};" in log, log
        ha = re.search(r"HA port listening on 127\.0\.0\.1:(\d+), advertised as 127\.0\.0\.1:(\d+)", log)
        assert ha is not None and ha.group(1) == ha.group(2), log
        assert not _reachable(ip, port)
        assert not _reachable(ip, int(ha.group(1)))
    finally:
        broker.kill()
        namesrv.kill()


def test_broker_enable_proxy_listens_where_the_broker_conf_binds(tmp_path: Path) -> None:
    ip = _outside_ip()
    namesrv = start_namesrv(tmp_path)
    port, grpc_port = free_ports(2)
    # bindAddress in the file, no grpcBindAddress: the proxy beside the broker binds there too.
    conf = broker_conf(
        tmp_path, "broker-a", namesrv.addr, port, bindAddress="127.0.0.1", grpcServerPort=grpc_port
    )
    args = [sys.executable, "-m", "orbitmq.cli", "broker", "-c", str(write_conf(tmp_path / "broker.conf", conf)),
            "--enable-proxy"]  # fmt: skip
    broker = ServerProcess(
        "broker", args, port, tmp_path / "broker", tmp_path / "broker.log", extra_ports=[grpc_port]
    )
    try:
        broker.start()
        log = _log_when(broker, lambda text: len(_listening_lines(text)) >= 3)
        bound = _listening_lines(log)
        assert len(bound) == 3 and f"127.0.0.1:{grpc_port}" in bound, log  # remoting, HA, gRPC
        assert all(address.startswith("127.0.0.1:") for address in bound), log
        assert not any(_reachable(ip, _port(address)) for address in bound)
    finally:
        broker.kill()
        namesrv.kill()


def test_servers_log_each_request_code_by_name_at_debug_level(tmp_path: Path) -> None:
    proc = start_standalone(tmp_path, "--log-level", "DEBUG")
    try:

        async def use() -> None:
            async with AdminClient(proc.addr) as admin:
                await wait_for_brokers(admin)
                await admin.create_topic("DebugTopic", 1)
            async with Producer("PG_DEBUG", proc.addr) as producer:
                await producer.send(Message("DebugTopic", b"hello"))

        asyncio.run(use())
        log = _log_when(proc, lambda text: "request SEND_MESSAGE" in text)
    finally:
        proc.kill()
    # Name server and broker requests alike: name, code, opaque and the client's address.
    assert re.search(r"request GET_BROKER_CLUSTER_INFO \(code 106, opaque \d+\) from 127\.0\.0\.1:\d+", log)
    assert re.search(r"request UPDATE_AND_CREATE_TOPIC \(code 17, opaque \d+\)", log)
    assert re.search(r"request SEND_MESSAGE(_V2)? \(code 31?0, opaque \d+\)", log)
