"""The name server benchmark at smoke size: it starts its own name server, registers simulated
brokers, queries routes from client processes and prints every figure with its verdict.

Method: `python -m orbitmq.bench namesrv --quick` as a subprocess, output piped. Its speed is
never judged here; only that each figure is printed and every answer was SUCCESS.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_bench_namesrv_quick_prints_rounds_queries_and_verdict(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orbitmq.bench", "namesrv", "--quick"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "4 broker groups x 2 members x 20 topics" in out
    for label in ("first registration round", "re-registration, unchanged", "re-registration, new version"):
        assert re.search(rf"{label}\s+\d+\.\d\d s", out), label
    assert re.search(r"name server RSS \d+ MiB empty, \d+ MiB with every route", out)
    match = re.search(
        r"route queries: ([\d,]+) in [\d.]+ s from 2 client processes .*; 0 answers not SUCCESS", out
    )
    assert match is not None and int(match.group(1).replace(",", "")) > 0, out
    assert re.search(r"name server CPU [\d.]+ us/query = [\d,]+ queries per CPU second", out)
    assert re.search(r"target >= 20,000 route queries/s on one core: [\d,]+/s (met|MISSED)", out)
