"""Starting servers from the command line: one per data directory, ports, and everyday mistakes.

Method: real ``orbitmq`` processes on free ports. A refused start must exit non-zero at once
with one line naming what is wrong and the flag that fixes it, never a traceback; a server
already running on the directory or port must be left as it was.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import (
    ServerProcess,
    _listens,
    broker_conf,
    free_port,
    start_broker,
    start_on_free_ports,
    start_standalone,
    write_conf,
)

pytestmark = pytest.mark.integration

_RUN_TIMEOUT_S = 60.0


def _orbitmq(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "orbitmq.cli", *args],
        capture_output=True,
        text=True,
        timeout=_RUN_TIMEOUT_S,
        cwd=cwd,
        env=env,
    )


def _refusal(result: subprocess.CompletedProcess[str]) -> str:
    """The refusal's line, after checking that the start was refused without a traceback."""
    output = result.stdout + result.stderr
    assert result.returncode in (1, 2), output
    assert "Traceback" not in output, output
    return output


@pytest.fixture
def squatter() -> Iterator[int]:
    """A port another program listens on."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock.getsockname()[1]


def test_standalone_refuses_a_data_directory_another_standalone_runs_on(tmp_path: Path) -> None:
    first = start_standalone(tmp_path, "--no-proxy", "--no-metrics")
    try:
        data_dir = first.workdir / "data"
        second = _orbitmq(
            "standalone", "--data-dir", str(data_dir), "--no-proxy", "--no-metrics",
            "--namesrv-port", str(free_port()), "--broker-port", str(free_port()),
        )  # fmt: skip
        output = _refusal(second)
        assert second.returncode == 1
        assert first.proc is not None
        lines = [line for line in output.splitlines() if "in use by process" in line]
        assert len(lines) == 1 and str(data_dir) in lines[0] and str(first.proc.pid) in lines[0], output
        # The first one is untouched: still serving, its abort marker (it is running) still there.
        assert first.proc.poll() is None
        assert (data_dir / "store" / "abort").exists()
        with socket.create_connection(("127.0.0.1", first.port), timeout=5):
            pass
    finally:
        first.kill()


def test_broker_refuses_a_store_directory_another_broker_runs_on(tmp_path: Path) -> None:
    first = start_broker(tmp_path, None)
    try:
        store = tmp_path / "broker-a" / "store"
        conf = write_conf(tmp_path / "second.conf", broker_conf(tmp_path, "broker-a", None, free_port()))
        second = subprocess.run(
            [sys.executable, "-m", "orbitmq.broker", "-c", str(conf)],
            capture_output=True,
            text=True,
            timeout=_RUN_TIMEOUT_S,
            cwd=tmp_path,
        )
        output = _refusal(second)
        assert first.proc is not None
        assert f"the store directory {store} is in use by process {first.proc.pid}" in output
        assert first.proc.poll() is None and (store / "abort").exists()
    finally:
        first.kill()


@pytest.mark.parametrize("flag", ["--namesrv-port", "--broker-port", "--grpc-port"])
def test_standalone_port_in_use_is_one_line_naming_the_flag(tmp_path: Path, squatter: int, flag: str) -> None:
    ports = {"--namesrv-port": free_port(), "--broker-port": free_port(), "--grpc-port": free_port()}
    ports[flag] = squatter
    result = _orbitmq(
        "standalone", "--data-dir", str(tmp_path / "data"), "--no-metrics",
        *(item for pair in ports.items() for item in (pair[0], str(pair[1]))),
    )  # fmt: skip
    output = _refusal(result)
    assert f"127.0.0.1:{squatter}: address already in use (pass {flag} to choose another port)" in output
    assert [line for line in output.splitlines() if " INFO " not in line] == [
        line for line in output.splitlines() if "cannot start" in line
    ], output


def test_namesrv_port_in_use_is_one_line_naming_the_flag(squatter: int) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "orbitmq.namesrv", "--listen-port", str(squatter)],
        capture_output=True,
        text=True,
        timeout=_RUN_TIMEOUT_S,
    )
    assert "address already in use (pass --listen-port" in _refusal(result)


def test_standalone_data_directory_it_cannot_create_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = _orbitmq("standalone", "--data-dir", str(tmp_path / "a-file" / "data"))
    output = _refusal(result)
    assert "cannot create the data directory" in output and "--data-dir" in output
    assert len(output.strip().splitlines()) == 1, output


def test_broker_store_directory_it_cannot_create_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = _orbitmq("broker", "--store-dir", str(tmp_path / "a-file" / "store"), cwd=tmp_path)
    output = _refusal(result)
    assert "cannot create the store directory" in output and "--store-dir" in output
    assert len(output.strip().splitlines()) == 1, output


@pytest.mark.parametrize("command", ["standalone", "namesrv", "broker", "proxy", "controller", "dashboard"])
def test_cli_unknown_log_level_is_refused_before_anything_starts(tmp_path: Path, command: str) -> None:
    result = _orbitmq(command, "--log-level", "verbose", cwd=tmp_path)
    output = _refusal(result)
    assert result.returncode == 2
    assert "argument --log-level: invalid choice: 'VERBOSE'" in output
    assert not (tmp_path / ".orbitmq-data").exists() and not (tmp_path / "store").exists()


_BLOCK_STARLETTE = """
import sys


class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "starlette":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
from orbitmq.cli.main import main

sys.exit(main(["dashboard"]))
"""


def test_dashboard_without_its_extra_says_how_to_install_it() -> None:
    # As if installed without the [dashboard] extra: importing starlette fails.
    result = subprocess.run(
        [sys.executable, "-c", _BLOCK_STARLETTE], capture_output=True, text=True, timeout=_RUN_TIMEOUT_S
    )
    output = _refusal(result)
    assert "'starlette' is missing" in output and "pip install 'orbitmq[dashboard]'" in output
    assert len(output.strip().splitlines()) == 1, output


def _free(port: int) -> bool:
    try:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


def test_standalone_moves_grpc_and_metrics_ports_with_the_ports_given(tmp_path: Path) -> None:
    def build() -> ServerProcess:
        for _ in range(100):
            broker = random.randrange(16_000, 30_000)
            namesrv = random.randrange(16_000, 30_000)
            derived = [broker - 10911 + 8081, broker - 10911 + 5557, namesrv - 9876 + 5558]
            if (
                all(map(_free, [namesrv, broker, broker + 1, *derived]))
                and len({namesrv, broker, broker + 1, *derived}) == 6
            ):
                break
        args = [
            sys.executable, "-m", "orbitmq.cli", "standalone", "--data-dir", str(tmp_path / "data"),
            "--namesrv-port", str(namesrv), "--broker-port", str(broker),
        ]  # fmt: skip
        return ServerProcess(
            "standalone", args, namesrv, tmp_path, tmp_path / "standalone.log", extra_ports=[broker, *derived]
        )

    server = start_on_free_ports(build)
    try:
        assert server.proc is not None
        for port in server.extra_ports:
            assert _listens(server.proc.pid, port) is True, port
    finally:
        server.kill()


def test_standalone_takes_ports_from_its_config_file_unless_a_flag_is_given(tmp_path: Path) -> None:
    def build() -> ServerProcess:
        namesrv, file_broker, file_grpc, file_metrics, flag_grpc = (free_port() for _ in range(5))
        conf = write_conf(
            tmp_path / "broker.conf",
            {"listenPort": file_broker, "grpcServerPort": file_grpc, "metricsPromExporterPort": file_metrics},
        )
        args = [
            sys.executable, "-m", "orbitmq.cli", "standalone", "-c", str(conf), "--data-dir",
            str(tmp_path / "data"), "--namesrv-port", str(namesrv), "--grpc-port", str(flag_grpc),
            "--namesrv-metrics-port", "0",
        ]  # fmt: skip
        server = ServerProcess(
            "standalone", args, namesrv, tmp_path, tmp_path / "standalone.log",
            extra_ports=[file_broker, flag_grpc, file_metrics],
        )  # fmt: skip
        server.port_not_used = file_grpc  # type: ignore[attr-defined]
        return server

    server = start_on_free_ports(build)
    try:
        assert server.proc is not None
        for port in server.extra_ports:
            assert _listens(server.proc.pid, port) is True, port
        assert _listens(server.proc.pid, server.port_not_used) is False  # type: ignore[attr-defined]
    finally:
        server.kill()


def test_cli_help_lists_every_flag_a_command_accepts() -> None:
    broker = _orbitmq("broker", "--help")
    assert broker.returncode == 0 and "--enable-proxy" in broker.stdout and "--grpc-port" in broker.stdout
    standalone = _orbitmq("standalone", "--help")
    assert "gRPC                 = broker port - 10911 + 8081" in standalone.stdout
    refused = _orbitmq("broker", "--grpc-port", "1234")
    assert refused.returncode == 2 and "--grpc-port needs --enable-proxy" in refused.stderr
