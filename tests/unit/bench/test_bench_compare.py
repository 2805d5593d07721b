"""``bench compare`` without a redis-server: the Redis peer is skipped, and the message says how
to install it (the figures of a run with both peers: tests/integration/test_bench_compare.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from orbitmq.bench import compare


def test_bench_compare_without_redis_server_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    compare.add_arguments(parser)
    args = parser.parse_args(["--quick", "--redis-server", str(tmp_path / "no-redis-server")])
    assert compare._start_redis(args, tmp_path / "redis") is None
    out = capsys.readouterr().out
    assert "redis-server not found: the Redis Streams peer is skipped" in out
    assert "apt-get install -y --no-install-recommends redis-server" in out
    assert not (tmp_path / "redis").exists()
