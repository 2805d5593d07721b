"""Safe defaults of ``orbitmq standalone``: every port on loopback unless told otherwise.

Where a socket is bound is read from ``/proc/net/tcp`` (the kernel's own table of listening
sockets), so the tests see what the process bound, not what it logged.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from tests.support.processes import start_standalone

pytestmark = pytest.mark.integration

_LISTEN = "0A"


def listening_hosts(port: int) -> set[str]:
    """Addresses that listen on ``port`` (from /proc/net/tcp and tcp6; v4-mapped shown as IPv4)."""
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        pytest.skip("no /proc/net/tcp: not Linux")
    hosts = set()
    for table in (t for t in tables if t.exists()):
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            hex_ip, hex_port = fields[1].split(":")
            if fields[3] != _LISTEN or int(hex_port, 16) != port:
                continue
            # The kernel prints each 32-bit word in host (little-endian) order.
            raw = b"".join(bytes.fromhex(hex_ip[i : i + 8])[::-1] for i in range(0, len(hex_ip), 8))
            address = ipaddress.ip_address(raw)
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                address = address.ipv4_mapped
            hosts.add(str(address))
    return hosts


def test_standalone_binds_every_port_to_loopback_by_default(tmp_path: Path) -> None:
    proc = start_standalone(tmp_path)
    try:
        broker_port, grpc_port = proc.extra_ports
        for name, port in (("name server", proc.port), ("broker", broker_port), ("gRPC", grpc_port)):
            assert listening_hosts(port) == {"127.0.0.1"}, f"{name} port {port}: {listening_hosts(port)}"
    finally:
        proc.kill()


def test_standalone_bind_address_flag_opens_the_ports(tmp_path: Path) -> None:
    proc = start_standalone(tmp_path, "--no-proxy", "--bind-address", "0.0.0.0")
    try:
        assert listening_hosts(proc.port) == {"0.0.0.0"}
        assert listening_hosts(proc.extra_ports[0]) == {"0.0.0.0"}
        log = proc.log_path.read_text()
        assert "without ACL: anyone who can reach this address" in log
    finally:
        proc.kill()
