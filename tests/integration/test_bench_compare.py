"""``bench compare``: OrbitMQ beside a real Redis Streams server, both through their Python
clients, in one smoke run.

Method: ``python -m orbitmq.bench compare --quick`` as a subprocess (it starts its own
redis-server and OrbitMQ standalone servers on free ports of 127.0.0.1, in a temporary
directory, and stops them); its printed table is checked for every phase on both peers with a
ratio. Figures are never judged: timings on a shared machine are noise. Needs Debian's
``redis-server`` (``.ci/run`` installs it); the test skips only when it is absent.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from orbitmq.bench._redis_peer import INSTALL_HINT, find_redis_server

pytestmark = pytest.mark.integration

_RATE = r"[\d,]+ msgs/s\s+[\d.]+ MB/s"


@pytest.mark.skipif(find_redis_server() is None, reason=f"redis-server is not installed: {INSTALL_HINT}")
def test_bench_compare_prints_both_peers_ratios_and_cpu(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orbitmq.bench", "compare", "--quick"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"OrbitMQ beside Redis \d+\.\d+\.\d+ Streams, Python clients, 2,000 x 100 B", out), out
    for label in (
        "produce, acked as stored",
        "consume, group (with start-up)",
        "consume, plain (with start-up)",
    ):
        assert re.search(rf"^{re.escape(label)}\s+{_RATE}\s+{_RATE}\s+\d+\.\d\dx$", out, re.M), out
    for series in ("AOF everysec", "AOF always"):
        assert re.search(
            rf"^sync publish p50\s+[\d.]+ ms \({series}\)\s+[\d.]+ ms \(\w+_FLUSH\)\s+\d+\.\d\dx$", out, re.M
        ), out
    assert len(re.findall(r"CPU s: server \d+\.\d\d, client \d+\.\d\d", out)) == 6, out
    # The compare extra installs hiredis, so redis-py runs as Redis users run it.
    assert "redis-py with hiredis: active" in out, out
    assert "skipped" not in out
