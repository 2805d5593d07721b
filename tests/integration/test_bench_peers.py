"""``bench peers``: OrbitMQ beside its peers in one invocation, in a tiny run.

Method: ``python -m orbitmq.bench peers`` as a subprocess with tiny counts and 0.3-1 s series
(it starts its own OrbitMQ standalone and redis-server on free ports of 127.0.0.1, in a
temporary directory, and stops them), the Java benchmark tools off, and ``--java`` pointing at
a path that does not exist: Apache RocketMQ and Kafka must each be skipped with one line
naming what is missing, while OrbitMQ and Redis run and their table carries a ratio on every
rate line. Figures are never judged: timings on a shared machine are noise. Costs about 15-25
s of wall time (two servers, about ten short series); needs Debian's ``redis-server``
(``.ci/run`` installs it) and skips only when it is absent. The Java peers themselves are not
started here: their JVMs alone take longer than this test's budget on two cores.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from orbitmq.bench._redis_peer import INSTALL_HINT, find_redis_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.skipif(find_redis_server() is None, reason=f"redis-server is not installed: {INSTALL_HINT}")
def test_bench_peers_runs_orbitmq_and_redis_and_skips_missing_java_peers(tmp_path: Path) -> None:
    missing_java = tmp_path / "no-such-jdk" / "java"
    done = subprocess.run(
        [
            sys.executable, "-m", "orbitmq.bench", "peers", "--no-tools",
            "--java", str(missing_java), "--peers", "rocketmq,kafka,redis",
            "--count-1k", "500", "--backlog", "1000", "--batch", "100", "--senders", "1,4",
            "--send-seconds", "0.3", "--rate", "100", "--latency-seconds", "1",
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert f"Apache RocketMQ skipped: {missing_java} not found" in out, out
    assert f"Apache Kafka skipped: {missing_java} not found" in out, out
    assert re.search(r"redis-py with hiredis: (active|NOT installed)", out), out
    assert re.search(r"^\s+OrbitMQ\s+Redis\s+vs Redis$", out, re.M), out
    for label in (
        "produce 1 KiB, batches (msgs/s)",
        "produce 100 B, batches (msgs/s)",
        "sync sends 1 KiB, 1 senders (msgs/s)",
        "sync sends 1 KiB, 4 senders (msgs/s)",
        "catch-up on 1,000 x 100 B (msgs/s)",
    ):
        assert re.search(rf"^{re.escape(label)}\s+[\d,]+\s+[\d,]+\s+\d+\.\d\dx", out, re.M), out
    assert re.search(r"^end to end p50 at 100/s \(ms\)\s+[\d.,]+ ms\s+[\d.,]+ ms\s+\d+\.\d\dx", out, re.M), (
        out
    )
    assert "RocketMQ targets: n/a (Apache RocketMQ skipped)" in out, out
    assert "Kafka target: n/a (Apache Kafka skipped)" in out, out
    assert "incomplete" not in out, out
