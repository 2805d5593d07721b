"""Ctrl-C on a long command (a benchmark, an admin verb that repeats): the first stops it with a
summary, a second quits at once; no traceback.

Method: one `orbitmq standalone` (free ports, tmp dir, killed in teardown); `orbitmq bench
produce` and `consume` and `orbitmq admin clusterRT` run against it as real processes with their
output piped, and are sent SIGINT once their first progress line shows they are working.
"""

from __future__ import annotations

import asyncio
import json
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.client import AdminClient
from tests.support.processes import ServerProcess, start_standalone

pytestmark = pytest.mark.integration

_EXIT_WITHIN_S = 20.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_standalone(tmp_path_factory.mktemp("bench-interrupt"), "--no-proxy", "--no-metrics")
    try:
        yield proc
    finally:
        proc.kill()


# A terminal's child gets SIGINT at its default, not blocked; a child inherits an ignored or
# blocked SIGINT from its parent instead (the pytest worker's, whatever earlier tests in it did).
# This runs the command as a terminal would: SIGINT reset in the child, then the command exec'd.
_AS_FROM_A_TERMINAL = (
    "import os, signal, sys; "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def _bench(server: ServerProcess, *args: str, command: str = "bench") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _AS_FROM_A_TERMINAL,
            "-m",
            "orbitmq.cli",
            command,
            *args,
            "--namesrv",
            server.addr,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _until_line(proc: subprocess.Popen[str], marker: str, timeout_s: float = 60.0) -> str:
    """Read stdout until a line holding ``marker``; returns what was read."""
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=deadline - time.monotonic()):
                break
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if marker in line:
                return "".join(seen)
    proc.kill()
    raise AssertionError(f"no {marker!r} line: {''.join(seen)}{proc.communicate()[1]}")


def _until_topic(
    server: ServerProcess, topic: str, proc: subprocess.Popen[str], timeout_s: float = 60.0
) -> None:
    async def listed() -> bool:
        async with AdminClient(server.addr) as admin:
            return topic in await admin.list_topics()

    deadline = time.monotonic() + timeout_s
    while not asyncio.run(listed()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(0.5)  # its consumers park their pulls, its first sends go out


def _stored(server: ServerProcess, topic: str) -> int:
    async def stored() -> int:
        async with AdminClient(server.addr) as admin:
            return sum(offset.max_offset for offset in (await admin.topic_stats(topic)).values())

    return asyncio.run(stored())


def _until_stored(
    server: ServerProcess, topic: str, count: int, proc: subprocess.Popen[str], timeout_s: float = 60.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while _stored(server, topic) < count:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)


def _interrupt(proc: subprocess.Popen[str], times: int = 1) -> tuple[str, str]:
    for _ in range(times):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
    try:
        out, err = proc.communicate(timeout=_EXIT_WITHIN_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(
            f"still running {_EXIT_WITHIN_S:g} s after Ctrl-C: {out[-2000:]}{err[-2000:]}"
        ) from None
    return out, err


def test_bench_produce_stops_on_the_first_ctrl_c_with_a_summary(server: ServerProcess) -> None:
    proc = _bench(server, "produce", "--duration-s", "300", "--warmup-s", "0", "--reference-s", "0")
    before = _until_line(proc, "TPS")
    out, err = _interrupt(proc)
    output = before + out + err
    assert proc.returncode == 130, output
    assert "Traceback" not in output and "send failed" not in output, output
    assert "interrupted after" in out and "summary:" in out, output
    assert len(output.splitlines()) < 40, output


def test_bench_produce_quits_on_a_second_ctrl_c_without_a_traceback(server: ServerProcess) -> None:
    proc = _bench(server, "produce", "--duration-s", "300", "--warmup-s", "0", "--reference-s", "0")
    before = _until_line(proc, "TPS")
    out, err = _interrupt(proc, times=2)
    output = before + out + err
    # 130 when the second one lands while it stops; killed by SIGINT itself once it has stopped.
    assert proc.returncode in (130, -signal.SIGINT), output
    assert "Traceback" not in output, output
    assert len(output.splitlines()) < 40, output


def test_bench_consume_stops_on_the_first_ctrl_c_with_a_summary(
    server: ServerProcess, tmp_path: Path
) -> None:
    proc = _bench(
        server, "consume", "--topic", "BenchInterrupt", "--prefill", "2000", "--live-rate", "50",
        "--duration-s", "300", "--count", "100000000",
    )  # fmt: skip
    before = _until_line(proc, "msgs/s")
    out, err = _interrupt(proc)
    output = before + out + err
    assert proc.returncode == 130, output
    assert "Traceback" not in output, output
    assert "consumed" in out and "interrupted after" in err, output


def test_bench_without_a_summary_of_its_own_ends_on_ctrl_c_in_one_line(server: ServerProcess) -> None:
    # latency measures to the end or not at all: Ctrl-C ends it with one line, its topic removed.
    proc = _bench(server, "latency", "--count", "1000000", "--rate", "200")
    _until_topic(server, f"LatencyBench_{proc.pid}", proc)  # it measures once its topic exists
    out, err = _interrupt(proc)
    output = out + err
    assert proc.returncode == 130, output
    assert "Traceback" not in output, output
    assert "orbitmq bench latency: interrupted after" in err, output


@pytest.mark.parametrize("output", ["table", "json"])
def test_admin_cluster_rt_stops_on_ctrl_c_with_what_it_measured(server: ServerProcess, output: str) -> None:
    # clusterRT repeats until stopped, as mqadmin's does: Ctrl-C is how it ends.
    args = ["clusterRT", "-a", "3", "-i", "0.2"] + (["--json"] if output == "json" else [])
    stored_before = _stored(server, "broker-a")  # clusterRT sends to the topic named after each broker
    proc = _bench(server, *args, command="admin")
    if output == "table":
        before = _until_line(proc, "broker-a")
    else:  # JSON is printed once, at the end: wait for a round's samples to reach the broker
        _until_stored(server, "broker-a", stored_before + 3, proc)
        before = ""
    out, err = _interrupt(proc)
    text = before + out + err
    assert proc.returncode == 130, text
    assert "Traceback" not in text, text
    assert re.search(r"clusterRT: [1-9]\d* rounds, [1-9]\d* samples before Ctrl-C", err), text
    assert err.rstrip().endswith("orbitmq admin: interrupted"), text
    if output == "json":
        samples = json.loads(out)
        assert samples and all(sample["brokerName"] == "broker-a" for sample in samples), text
