"""The broker's switch interval: its event loop gets the GIL back from busy threads within 1 ms.

Method: counted, not timed: a started broker's process runs at ``gc_policy.SWITCH_INTERVAL_S``
(not CPython's 5 ms), and the last server to stop gives back the interval it found.
"""

from __future__ import annotations

import sys
from pathlib import Path

from orbitmq.broker import gc_policy
from tests.unit.broker._apps import start_broker_app


async def test_gc_policy_broker_runs_at_a_short_switch_interval_while_it_serves(tmp_path: Path) -> None:
    found = sys.getswitchinterval()
    first = await start_broker_app(tmp_path / "a")
    second = await start_broker_app(tmp_path / "b")
    try:
        assert sys.getswitchinterval() <= gc_policy.SWITCH_INTERVAL_S < found
        await first.shutdown()
        assert sys.getswitchinterval() <= gc_policy.SWITCH_INTERVAL_S  # one server still runs
    finally:
        await second.shutdown()
        await first.shutdown()
    assert sys.getswitchinterval() == found
