"""The broker's garbage-collection policy: a long full collection freezes what survived it.

Method: counted, not timed. With the threshold at 0 ms every full collection counts as long;
the objects a full collection leaves must then be frozen (``gc.get_freeze_count``), so that
the next full collection walks only newer ones, and the last uninstall must give them back.
"""

from __future__ import annotations

import gc

from orbitmq.broker import gc_policy


class _Cycle:
    freed = 0

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        _Cycle.freed += 1


def test_gc_policy_freezes_the_survivors_of_a_long_full_collection_and_never_garbage() -> None:
    # A full collection walked every object of a broker with 50,000 topics (1 to 4 s on a
    # loaded machine, every thread waiting), again at every quarter of growth.
    gc.collect()
    assert gc.get_freeze_count() == 0
    gc_policy.install(freeze_after_ms=0)
    try:
        kept = [_Cycle() for _ in range(1000)]
        _Cycle.freed = 0
        for _ in range(1000):
            _Cycle()  # garbage cycles: collected, never frozen
        freezes = gc_policy.freezes()
        gc.collect()
        assert gc_policy.freezes() == freezes + 1
        frozen = gc.get_freeze_count()
        assert frozen >= len(kept)
        # Nothing that survived is left for the next full collection to walk...
        assert not gc.get_objects(generation=2)
        # ... and the 1,000 garbage cycles were collected, not frozen.
        assert _Cycle.freed == 1000
    finally:
        gc_policy.uninstall()
    assert gc.get_freeze_count() == 0


def test_gc_policy_leaves_short_collections_alone() -> None:
    gc_policy.install(freeze_after_ms=60_000)
    try:
        freezes = gc_policy.freezes()
        gc.collect()
        assert gc_policy.freezes() == freezes
        assert gc.get_freeze_count() == 0
    finally:
        gc_policy.uninstall()
