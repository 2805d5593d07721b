"""The test harness's server starts survive a port another parallel test took first.

A port is free when picked and bound by the server a moment later; in between, another test's
server may bind it. The harness then starts the server again on fresh ports, and only then.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess, _listens, free_port, start_on_free_ports


def _namesrv(tmp_path: Path, port: int) -> ServerProcess:
    args = [sys.executable, "-m", "orbitmq.namesrv", "--listen-port", str(port)]
    return ServerProcess("namesrv", args, port, tmp_path / "namesrv", tmp_path / "namesrv.log")


def test_a_server_whose_port_was_taken_starts_again_on_a_fresh_port(tmp_path: Path) -> None:
    # Bound, not listening: the server's bind fails, and nothing answers a connect on it.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken_port = taken.getsockname()[1]
        ports = iter([taken_port, free_port()])
        server = start_on_free_ports(lambda: _namesrv(tmp_path, next(ports)))
        try:
            assert server.port != taken_port
            with socket.create_connection(("127.0.0.1", server.port), timeout=5):
                pass
            assert "address already in use" in server.log_path.read_text().lower()
        finally:
            server.kill()


def test_a_start_that_fails_for_another_reason_is_not_repeated(tmp_path: Path) -> None:
    built = []

    def build() -> ServerProcess:
        built.append(1)
        args = [sys.executable, "-m", "orbitmq.namesrv", "--listen-port", str(free_port()), "--no-such-flag"]
        return ServerProcess("namesrv", args, 1, tmp_path / "namesrv", tmp_path / "namesrv.log")

    with pytest.raises(RuntimeError, match="exited"):
        start_on_free_ports(build)
    assert len(built) == 1


def test_a_start_is_not_fooled_by_another_server_answering_on_its_port(tmp_path: Path) -> None:
    # Another test's server listens on the port first: it answers connects, but the start
    # must wait for this server's own listener, see it fail to bind, and try fresh ports.
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        taken_port = squatter.getsockname()[1]
        ports = iter([taken_port, free_port()])
        server = start_on_free_ports(lambda: _namesrv(tmp_path, next(ports)))
        try:
            assert server.port != taken_port
            assert server.proc is not None and server.proc.poll() is None
        finally:
            server.kill()


def test_a_listener_check_is_not_confused_by_a_descriptor_closing_while_it_reads(tmp_path: Path) -> None:
    # Reading this process's own /proc/<pid>/fd always lists the descriptor of the listing
    # itself, closed before its link is read: the deterministic case of a descriptor closing
    # mid-scan, which once turned the answer into "cannot tell" (and so "started").
    with socket.create_server(("127.0.0.1", 0)) as listener, socket.socket() as bound_only:
        bound_only.bind(("127.0.0.1", 0))
        assert _listens(os.getpid(), listener.getsockname()[1]) is True
        assert _listens(os.getpid(), bound_only.getsockname()[1]) is False


def test_a_listener_check_of_a_process_that_is_gone_says_not_listening(tmp_path: Path) -> None:
    # Gone between the caller's look at it and the scan: "not yet", so the caller looks again
    # and sees the exit, never "cannot tell", which counted as started.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
        assert _listens(int(gone.stdout), listener.getsockname()[1]) is False
