"""Benchmarks pointed at a running server: they work with ``--namesrv`` alone, print their
verdicts, keep logs readable and leave no topic behind.

Method: one `orbitmq standalone` (free ports, tmp dir, killed in teardown); each benchmark runs
as `python -m orbitmq.cli bench ...` with its output piped (not a terminal), small enough to
take a second or two. The name server's topic list is compared before and after.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.client import AdminClient
from tests.integration.client.test_producer import wait_for_brokers
from tests.support.processes import ServerProcess, start_standalone

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_standalone(tmp_path_factory.mktemp("bench"))
    try:
        yield proc
    finally:
        proc.kill()


def _topics(namesrv: str) -> list[str]:
    async def listed() -> list[str]:
        async with AdminClient(namesrv) as admin:
            await wait_for_brokers(admin)
            return await admin.list_topics()

    return asyncio.run(listed())


def _bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orbitmq.cli", "bench", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_bench_consume_prefills_through_namesrv_alone_and_cleans_up(
    server: ServerProcess, tmp_path: Path
) -> None:
    before = _topics(server.addr)
    done = _bench(tmp_path, "consume", "--namesrv", server.addr, "--prefill", "3000", "--duration-s", "5")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "prefilled 3000 messages" in done.stdout
    assert "consumed 3,000 messages" in done.stdout
    assert "target >= 200,000 msgs/s: " in done.stdout
    assert "\r" not in done.stdout
    assert _topics(server.addr) == before


def test_bench_consume_fails_when_it_consumes_less_than_asked(server: ServerProcess, tmp_path: Path) -> None:
    done = _bench(
        tmp_path, "consume", "-n", server.addr, "--topic", "BenchEmpty", "--prefill", "0", "--count", "10",
        "--duration-s", "1",
    )  # fmt: skip
    assert done.returncode == 1
    assert "consumed 0 of 10 messages" in done.stderr


def test_bench_produce_prints_target_reference_and_verdict(server: ServerProcess, tmp_path: Path) -> None:
    before = _topics(server.addr)
    done = _bench(
        tmp_path, "produce", "-n", server.addr, "--duration-s", "1", "--warmup-s", "0.2", "--batch-size", "16",
        "--reference-s", "0.5",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    reference = r"^  reference, the same requests straight over the connection: [\d,]+ msg/s; producer / reference \d+\.\d\d$"
    assert re.search(reference, done.stdout, re.MULTILINE), done.stdout
    assert re.search(r"^  target >= 200,000 msg/s: (met|MISSED)$", done.stdout, re.MULTILINE), done.stdout
    assert "\r" not in done.stdout
    assert _topics(server.addr) == before


def test_bench_latency_prints_no_percentile_over_one_sample(server: ServerProcess, tmp_path: Path) -> None:
    before = _topics(server.addr)
    done = _bench(tmp_path, "latency", "-n", server.addr, "--count", "1", "--rate", "100")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "p50 n/a  p90 n/a  p99 n/a  p99.9 n/a (1 sample)" in done.stdout
    assert "not judged" in done.stdout
    assert _topics(server.addr) == before


def test_bench_filter_prints_sql_ratio_beside_unfiltered_and_verdict(tmp_path: Path) -> None:
    done = _bench(tmp_path, "filter", "--prefill", "2000")
    assert done.returncode == 0, done.stdout + done.stderr
    for case, delivered in (
        ("unfiltered", "2,000"),
        ("sql-all", "2,000"),
        ("sql-quarter", "500"),
        ("tag-quarter", "500"),
    ):
        assert re.search(rf"^{case} +{delivered} +[\d,]+ +[\d,]+ +\d+\.\d\dx$", done.stdout, re.MULTILINE), (
            done.stdout
        )
    # Three rounds of every case, interleaved; the table holds each case's median round.
    assert re.search(r"^round 3 sql-quarter +500 delivered in", done.stdout, re.MULTILINE), done.stdout
    assert re.search(
        r"^SQL92 filtered pulls examine \d+\.\d\dx the unfiltered msgs/s .*median of 3 rounds\)$",
        done.stdout,
        re.MULTILINE,
    )
    assert re.search(r"^  target >= 0\.5x: (met|MISSED)$", done.stdout, re.MULTILINE), done.stdout
    assert "removed the benchmark's topics: BenchFilter" in done.stdout


def test_bench_consume_compare_defaults_prints_each_consumer_and_its_ratio(
    server: ServerProcess, tmp_path: Path
) -> None:
    before = _topics(server.addr)
    done = _bench(
        tmp_path, "consume", "-n", server.addr, "--topic", "BenchDefaults", "--compare-defaults", "--no-cpp",
        "--no-java", "--no-go", "--prefill", "2000", "--duration-s", "30", "--rounds", "2",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.findall(r"^round (\d) of 2: ", done.stdout, re.MULTILINE) == ["1", "2"], done.stdout
    for name in ("push defaults", "push defaults (def)", "pull defaults"):
        line = rf"^  {re.escape(name)} +[\d,]+ +[\d,]+ +\d+\.\d\dx [✓✗]"
        assert re.search(line, done.stdout, re.MULTILINE), done.stdout
    assert re.search(r"^  push tuned +[\d,]+ +[\d,]+ +1\.00x", done.stdout, re.MULTILINE), done.stdout
    assert "C++ push defaults      skipped: --no-cpp" in done.stdout
    assert "Java push defaults     skipped: --no-java" in done.stdout
    assert "Go push defaults       skipped: --no-go" in done.stdout
    assert _topics(server.addr) == before
