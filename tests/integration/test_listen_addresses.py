"""The servers' start-up logs name the addresses their sockets are really bound to.

Method: start ``orbitmq standalone`` told to bind every interface (``--bind-address 0.0.0.0``) and a
broker with ``bindAddress=127.0.0.1``; read every ``host:port`` each log says a server listens
on; each must be a listening socket with exactly that local address in ``/proc/net/tcp`` (an
advertised ``127.0.0.1`` over a socket bound to ``0.0.0.0`` fails).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import struct
import time
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess, start_broker, start_standalone

_TCP_LISTEN = "0A"
# "listening on H:P", "HA on H:P", "nameserver on H:P", "broker on H:P", "gRPC on H:P".
_LISTEN_LINE = re.compile(r"(?:listening on|HA on|nameserver on|broker on|gRPC on) ([0-9.]+):(\d+)")

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc/net/tcp")


def _listening() -> set[tuple[str, int]]:
    """(host, port) of every socket in LISTEN state on this host.

    An IPv6 wildcard socket (gRPC binds ``[::]`` dual-stack when told ``0.0.0.0``) counts as
    ``0.0.0.0``: it too accepts IPv4 connections on every interface.
    """
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != _TCP_LISTEN:
                continue
            host_hex, port_hex = fields[1].split(":")
            if len(host_hex) == 8:
                host = socket.inet_ntoa(struct.pack("<I", int(host_hex, 16)))
            elif int(host_hex, 16) == 0:
                host = "0.0.0.0"
            else:
                continue
            found.add((host, int(port_hex, 16)))
    return found


def _logged_addresses(server: ServerProcess, expected: int) -> set[tuple[str, int]]:
    deadline = time.monotonic() + 10
    while True:
        text = server.log_path.read_text(errors="replace")
        logged = {(host, int(port)) for host, port in _LISTEN_LINE.findall(text)}
        if len(logged) >= expected or time.monotonic() > deadline:
            return logged
        time.sleep(0.1)


def test_standalone_logs_the_every_interface_address_it_binds(tmp_path: Path) -> None:
    # standalone binds 127.0.0.1 unless told otherwise; every interface is what a log could
    # misstate (an advertised address over a wildcard socket).
    server = start_standalone(tmp_path, "--bind-address", "0.0.0.0")
    try:
        logged = _logged_addresses(server, 4)
        listening = _listening()
        ports = {server.port, *server.extra_ports}
        assert ports <= {port for _, port in logged}, (ports, logged)
        for host, port in logged:
            assert ipaddress.ip_address(host)  # a bound address, not a name
            assert (host, port) in listening, (host, port, server.log()[-2000:])
        # Told to bind every interface, and the log says so.
        assert ("0.0.0.0", server.port) in logged
    finally:
        server.kill()


def test_broker_logs_the_loopback_address_it_was_told_to_bind(tmp_path: Path) -> None:
    broker = start_broker(tmp_path, None, bindAddress="127.0.0.1")
    try:
        logged = _logged_addresses(broker, 2)
        listening = _listening()
        assert ("127.0.0.1", broker.port) in logged, broker.log()[-2000:]
        assert ("0.0.0.0", broker.port) not in logged
        for address in logged:
            assert address in listening, (address, broker.log()[-2000:])
    finally:
        broker.kill()
