"""Test tiers by folder: tests under integration/, fault/, fuzz/ and spark/ get that marker.

So `pytest -m "not integration and not fault and not spark"` runs the unit tier alone, and
every tier runs from one `pytest` call.

`make test` runs the tiers on a few pytest-xdist workers (`--dist loadgroup`): most tests wait
on real processes rather than on the CPU. Spark tests share one session per worker, so they
are kept on one worker (one JVM) through the `spark` xdist group. Tests in the
`failover-jepsen` group (minutes of faults on their own worker) are collected first, so they
start at once and overlap everything else instead of running alone at the end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_TIERS = {"integration", "fault", "fuzz", "spark"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = set(Path(str(item.path)).parts)
        for tier in _TIERS & parts:
            item.add_marker(getattr(pytest.mark, tier))
        if "spark" in parts:
            item.add_marker(pytest.mark.xdist_group("spark"))
    items.sort(key=lambda item: not _in_group(item, "failover-jepsen"))


def _in_group(item: pytest.Item, group: str) -> bool:
    return any(marker.args == (group,) for marker in item.iter_markers("xdist_group"))
