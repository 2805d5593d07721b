"""Test tiers by folder: tests under integration/, fault/ and spark/ get that marker.

So `pytest -m "not integration and not fault and not spark"` runs the unit tier alone, and
every tier runs from one `pytest` call.

`make test` runs the tiers on a few pytest-xdist workers (`--dist loadgroup`): most tests wait
on real processes rather than on the CPU. Spark tests share one session per worker, so they
are kept on one worker (one JVM) through the `spark` xdist group. The `spark_cluster` tests
start a Spark cluster and a Connect server of their own and use no local session: they are
a group of their own, so they run beside the local-session tests rather than after them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_TIERS = {"integration", "fault", "spark"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = set(Path(str(item.path)).parts)
        for tier in _TIERS & parts:
            item.add_marker(getattr(pytest.mark, tier))
        if "spark" in parts:
            group = "spark_cluster" if item.get_closest_marker("spark_cluster") else "spark"
            item.add_marker(pytest.mark.xdist_group(group))
