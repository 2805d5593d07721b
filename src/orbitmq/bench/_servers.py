"""The server a benchmark runs against: a running cluster named by ``-n/--namesrv`` (the same
flag in every benchmark that talks to a server), else one temporary ``orbitmq standalone``
subprocess on free ports."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["add_namesrv_argument", "start_standalone"]

START_TIMEOUT_S = 30.0


def add_namesrv_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--namesrv",
        help="name servers host:port;host:port of a running cluster (default: start a temporary standalone)",
    )


def _free_ports(count: int) -> list[int]:
    ports = []
    for _ in range(count):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
    return ports


def start_standalone(workdir: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int, int]:
    """Start ``orbitmq standalone`` with its data under ``workdir``.

    Returns:
        The process, the name-server port and the broker port (both connectable).

    Raises:
        RuntimeError: the broker port did not accept connections within 30 s.
    """
    namesrv_port, broker_port = _free_ports(2)
    cmd = [
        sys.executable, "-m", "orbitmq.cli", "standalone",
        "--data-dir", str(workdir / "data"),
        "--namesrv-port", str(namesrv_port),
        "--broker-port", str(broker_port),
        "--log-level", "WARNING",
        *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", broker_port), timeout=0.2):
                return proc, namesrv_port, broker_port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    proc.wait(10)
    raise RuntimeError(f"the standalone broker did not start within {START_TIMEOUT_S:g} s")
