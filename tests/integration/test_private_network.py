"""The private network namespace the README test moves into when the default ports are taken."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.support import netns

pytestmark = pytest.mark.integration


def _connect_and_read(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        return sock.recv(16)


def test_private_network_frees_a_port_held_outside_it() -> None:
    if not netns.available():
        pytest.skip("this machine does not allow network namespaces (needs root)")
    with socket.socket() as outside:
        outside.bind(("127.0.0.1", 0))
        outside.listen()
        port = outside.getsockname()[1]
        network = netns.PrivateNetwork()
        try:
            server = subprocess.Popen(
                network.argv([sys.executable, "-c", _SERVE_ONCE, str(port)]), stdout=subprocess.PIPE
            )
            assert server.stdout is not None
            assert server.stdout.readline().strip() == b"bound"  # the port is free in there
            # The probe thread reaches the server inside, not the socket that holds the port here.
            assert network.call(lambda: _connect_and_read(port)) == b"inside"
            assert server.wait(10) == 0
            server.stdout.close()
        finally:
            network.close()
        # The test's own thread stayed outside: the port is still the one held here.
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            conn, _ = outside.accept()
            conn.close()


_SERVE_ONCE = """
import socket, sys
with socket.socket() as sock:
    sock.bind(("127.0.0.1", int(sys.argv[1])))
    sock.listen()
    print("bound", flush=True)
    conn, _ = sock.accept()
    conn.sendall(b"inside")
    conn.close()
"""
