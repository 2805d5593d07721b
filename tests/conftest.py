"""Test tiers by folder: tests under tests/integration/, tests/fault/, tests/fuzz/, tests/spark/,
tests/interop/ and tests/oracle/ get that marker (tests/unit/spark uses fakes: it is the unit
tier).

So `pytest -m "not integration and not fault and not fuzz and not spark and not interop and not
oracle"` runs the unit tier alone, and
every tier runs from one `pytest` call.

`make test` runs the tiers on a few pytest-xdist workers (`--dist loadgroup`): most tests wait
on real processes rather than on the CPU. Spark tests share one session per worker, so they
are kept on one worker (one JVM) through the `spark` xdist group. The Spark tests that use no
local session run Spark in processes of their own (a standalone cluster, a Connect server, a
child driver): they are the `spark_child` group, so they run beside the local-session tests
rather than after them, on another worker. Tests in the `failover-jepsen` and `interop` groups
(minutes of faults, and minutes of Java and Go clients, each group on one worker) are collected
first, so they start at once and overlap everything else instead of running alone at the end."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

# Property tests check what the code computes, never how fast: Hypothesis' per-example deadline
# (200 ms) fails them on a machine busy with the other tiers' servers, so there is none.
settings.register_profile("orbitmq", deadline=None)
settings.load_profile("orbitmq")

_TIERS = {"integration", "fault", "fuzz", "spark", "interop", "oracle"}
_TESTS = Path(__file__).resolve().parent


# Per item as it is collected, so before any pytest_collection_modifyitems (pytest's -m
# selection and pytest-xdist's grouping both read these markers there).
def pytest_itemcollected(item: pytest.Item) -> None:
    # The tier is the folder right under tests/ (tests/unit/spark is the unit tier: it uses fakes).
    tier = Path(str(item.path)).resolve().relative_to(_TESTS).parts[0]
    if tier not in _TIERS:
        return
    item.add_marker(getattr(pytest.mark, tier))
    if tier == "interop":
        # Real Java and Go clients: one worker runs them in turn (their JVMs would crowd two
        # cores, and the first one resolves and compiles the drivers for the rest).
        item.add_marker(pytest.mark.xdist_group("interop"))
    if tier == "spark":
        local = "spark" in getattr(item, "fixturenames", ())
        item.add_marker(pytest.mark.xdist_group("spark" if local else "spark_child"))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Make ``--dist loadgroup`` group again under pytest 9.2.

    pytest-xdist 3.8 tells its scheduler a test's group by appending ``@group`` to the test's
    node id on the worker (``item._nodeid``); pytest 9.2 builds node ids from ``item._id`` and
    ignores that field, so every group is silently spread over all workers
    (pytest-dev/pytest-xdist#1386): each worker would start a Spark session of its own. This
    appends the suffix where pytest 9.2 reads it, the way xdist's own hook means to, and does
    nothing once the id already carries it (an xdist release with the fix).
    """
    items.sort(key=lambda item: not (_in_group(item, "failover-jepsen") or _in_group(item, "interop")))
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import NodeId

    for item in items:
        names = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        suffix = "@" + "_".join(sorted(names))
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)


def _in_group(item: pytest.Item, group: str) -> bool:
    return any(marker.args == (group,) for marker in item.iter_markers("xdist_group"))
