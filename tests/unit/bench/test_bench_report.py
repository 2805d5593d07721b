"""What benchmarks print: percentiles only over enough samples, log-friendly progress lines,
defaults in --help, and one flag name for the server in every benchmark that talks to one."""

from __future__ import annotations

import argparse
import importlib

import pytest

from orbitmq.bench.__main__ import SUBCOMMANDS, main
from orbitmq.bench._report import ProgressLine, percentile, percentiles_text


def test_bench_percentiles_are_not_printed_over_too_few_samples() -> None:
    assert percentiles_text([4.0], (0.5, 0.99, 0.999)) == "p50 n/a  p99 n/a  p99.9 n/a (1 sample)"
    values = [float(i) for i in range(1, 101)]
    assert percentiles_text(values, (0.5, 0.99)) == "p50 50.000 ms  p99 99.000 ms"
    assert percentiles_text(values, (0.5, 0.99, 0.999)).endswith("p99.9 n/a (100 samples)")
    assert percentile(values, 0.999) is None
    assert percentile([float(i) for i in range(1000)], 0.999) == 998.0


def test_bench_replication_round_trips_need_enough_samples_for_a_percentile() -> None:
    from orbitmq.bench.replication import _Result, _round_trips

    assert _round_trips(_Result("one", rts_ms=[3.0])) == "send p50 n/a  p99 n/a (1 sample)"
    many = _Result("many", rts_ms=[float(i) for i in range(200, 0, -1)])
    assert _round_trips(many) == "send p50 100.00 ms  p99 198.00 ms"


def test_bench_progress_lines_end_with_a_newline_when_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    progress = ProgressLine()
    progress.show("[   1.0 s] first")
    progress.show("[   2.0 s] second")
    progress.end()
    assert capsys.readouterr().out == "[   1.0 s] first\n[   2.0 s] second\n"


def _parser(name: str) -> argparse.ArgumentParser:
    module = importlib.import_module(SUBCOMMANDS[name][0])
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return parser


@pytest.mark.parametrize("name", ["latency", "produce", "consume", "spark", "proxy"])
def test_bench_points_at_a_running_server_with_namesrv_only(name: str) -> None:
    options = {option for action in _parser(name)._actions for option in action.option_strings}
    assert {"-n", "--namesrv"} <= options
    assert "--broker" not in options


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_bench_help_shows_every_default(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([name, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for action in _parser(name)._actions:
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
            assert f"(default: {action.default})" in text, (name, action.dest)
