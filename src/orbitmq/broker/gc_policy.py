"""Full garbage collections that walk a large, settled heap once, not again and again.

CPython's cyclic collector runs a full collection whenever the objects that survived the
younger collections since the last full one reach a quarter of those that survived it, and a
full collection walks every tracked object while it holds the GIL: every thread of the
process waits, the event loops included. With 50,000 topics a standalone (broker and name
server in one process) holds about 250,000 tracked objects (topic configs, consume queues,
routes), and on a loaded 2-core machine one full collection held every thread for 1 to 4 s,
again at every quarter of growth while topics were being created.

So once a full collection took longer than :data:`FREEZE_AFTER_MS`, the objects that survived
it are frozen (``gc.freeze``: moved to a permanent generation that no collection walks), and
the next full collections walk only what came after. Right after a full collection the younger
generations are empty and the oldest holds only objects that were reachable, so nothing
garbage is frozen. What it costs: an object frozen then that later becomes part of an
unreachable cycle is never reclaimed (objects freed by reference counting, the usual case, are
freed as ever); a freeze only follows a long collection, that is a heap grown by tens of
thousands of objects since the last one, which bounds how often that can happen.

:func:`install` and :func:`uninstall` are counted: the policy holds while one server of the
process has it installed, and the last ``uninstall`` gives the frozen objects back to the
collector (tests start and stop many servers in one process).
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

__all__ = ["FREEZE_AFTER_MS", "freezes", "install", "uninstall"]

FREEZE_AFTER_MS = 50.0
"""A full collection at least this long freezes what survived it."""

_lock = threading.Lock()
_installs = 0
_threshold_ns = int(FREEZE_AFTER_MS * 1_000_000)
_started_ns = 0
_freezes = 0


def _on_collection(phase: str, info: dict[str, Any]) -> None:
    # Runs on whichever thread collects, holding the GIL: no other collection runs meanwhile.
    global _started_ns, _freezes
    if phase == "start":
        _started_ns = time.perf_counter_ns()
    elif info["generation"] == 2 and time.perf_counter_ns() - _started_ns >= _threshold_ns:
        gc.freeze()
        _freezes += 1


def install(freeze_after_ms: float = FREEZE_AFTER_MS) -> None:
    """Freeze the survivors of every full collection that takes ``freeze_after_ms`` or longer."""
    global _installs, _threshold_ns
    with _lock:
        _threshold_ns = int(freeze_after_ms * 1_000_000)
        _installs += 1
        if _installs == 1:
            gc.callbacks.append(_on_collection)


def uninstall() -> None:
    """Undo one :func:`install`; the last one unfreezes what the policy froze."""
    global _installs
    with _lock:
        if _installs == 0:
            return
        _installs -= 1
        if _installs == 0:
            gc.callbacks.remove(_on_collection)
            gc.unfreeze()


def freezes() -> int:
    """How many times the policy froze the heap since the process started."""
    return _freezes
