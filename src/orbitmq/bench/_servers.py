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

__all__ = ["add_namesrv_argument", "start_standalone", "start_standalone_with_grpc"]

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


def start_standalone(
    workdir: Path, *extra: str, log_path: Path | None = None
) -> tuple[subprocess.Popen[bytes], int, int]:
    """Start ``orbitmq standalone`` (without its gRPC proxy) with its data under ``workdir``.

    Returns:
        The process, the name-server port and the broker port (both connectable).

    Raises:
        RuntimeError: the broker port did not accept connections within 30 s.
    """
    proc, namesrv_port, broker_port, _ = _start(workdir, False, *extra, log_path=log_path)
    return proc, namesrv_port, broker_port


def start_standalone_with_grpc(workdir: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int, int, int]:
    """As :func:`start_standalone`, with the gRPC proxy; also returns the gRPC port."""
    return _start(workdir, True, *extra)


def _start(
    workdir: Path, grpc: bool, *extra: str, log_path: Path | None = None
) -> tuple[subprocess.Popen[bytes], int, int, int]:
    namesrv_port, broker_port, grpc_port = _free_ports(3)
    proxy_flags = ["--grpc-port", str(grpc_port)] if grpc else ["--no-proxy"]
    cmd = [
        sys.executable, "-m", "orbitmq.cli", "standalone",
        "--data-dir", str(workdir / "data"),
        "--namesrv-port", str(namesrv_port),
        "--broker-port", str(broker_port),
        "--log-level", "INFO" if log_path else "WARNING",
        *proxy_flags,
        *(() if "--metrics-port" in extra else ("--no-metrics",)),
        *extra,
    ]  # fmt: skip
    # With a log path the server logs at INFO there (start-up lines name bound ports).
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
    # A session of its own: a Ctrl-C at the terminal reaches the benchmark alone, which then
    # summarises what it measured while the server still answers, and stops the server itself.
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=log, env=dict(os.environ), start_new_session=True
    )
    if log_path:
        log.close()  # type: ignore[union-attr]
    deadline = time.monotonic() + START_TIMEOUT_S
    waiting = [broker_port, grpc_port] if grpc else [broker_port]
    try:
        while time.monotonic() < deadline and waiting:
            try:
                with socket.create_connection(("127.0.0.1", waiting[0]), timeout=0.2):
                    waiting.pop(0)
            except OSError:
                time.sleep(0.05)
    except BaseException:  # Ctrl-C while it starts: it is in its own session, so stop it here
        proc.kill()
        proc.wait(10)
        raise
    if not waiting:
        return proc, namesrv_port, broker_port, grpc_port
    proc.kill()
    proc.wait(10)
    raise RuntimeError(f"the standalone server did not start within {START_TIMEOUT_S:g} s")
