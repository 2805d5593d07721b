"""The scaling benchmark at smoke size: N = 1 and 2 brokers, a few thousand messages each.

Method: ``python -m orbitmq.bench scaling`` as a subprocess with one body size, a message count
instead of a duration and one client process per broker. Its speed is never judged here; only
that every phase of both N has its row in the table, with every message produced and the whole
backlog consumed, and that no server is left running.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_bench_scaling_prints_a_row_per_phase_and_broker_count(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orbitmq.bench", "scaling", "--max-brokers", "2", "--sizes", "100",
         "--count", "2000", "--queues", "2", "--producers-per-broker", "1", "--concurrency", "2",
         "--batch-size", "16"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    header = re.search(r"^phase\s+N\s+clients\s+messages\s+msgs/s\s+MB/s\s+broker CPU s\s+per-broker CPU %"
                       r"\s+broker us/msg\s+client us/msg\s+other work\s+speed-up$", out, re.M)  # fmt: skip
    assert header is not None, out
    rows = re.findall(r"^(produce|consume) 100 B\s+(\d)\s+(\d)\s+([\d,]+)\s+[\d,]+\s+[\d.]+\s+[\d.]+\s+"
                      r"((?:\d+ ?)+?)\s+[\d.]+\s+[\d.]+\s+[\d.]+ cores\s+([\d.]+)x$", out, re.M)  # fmt: skip
    assert [(phase, int(brokers)) for phase, brokers, *_ in rows] == [
        ("produce", 1), ("consume", 1), ("produce", 2), ("consume", 2)
    ], out  # fmt: skip
    for phase, brokers, clients, messages, per_broker, _speed_up in rows:
        assert int(clients) == int(brokers)
        assert len(per_broker.split()) == int(brokers)  # one CPU figure per broker process
        # The consumers also read the producers' warm-up sends: each producer sends one per queue.
        warm_up = int(brokers) * 2 * int(brokers) if phase == "consume" else 0
        assert int(messages.replace(",", "")) == 2000 + warm_up
    assert [row[-1] for row in rows[:2]] == ["1.00", "1.00"]
    assert not list(tmp_path.iterdir())  # the temporary directories went with the servers
