"""Full garbage collections that walk a large, settled heap once, not again and again, and a
short switch interval: what keeps the process's other threads from holding up its event loop.

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

The same policy shortens the switch interval to :data:`SWITCH_INTERVAL_S`, the other way the
process's threads hold up its event loop. With 50,000 topics the store's write-out threads, the
executor threads that encode ``topics.json`` and REGISTER_BROKER bodies and, in a standalone, the
name server's decoding of those bodies run pure Python for hundreds of milliseconds. CPython hands
the GIL to a waiting thread only after the holder ran for the switch interval (5 ms by default),
and the loop gives it up at every system call it makes (each poll, read and write of a request),
then queues again behind every busy thread: a stall watchdog saw the loop late by 100 to 600 ms
while such threads ran, with no lock held. At 1 ms those waits are a fifth as long; the interval
only matters while another thread asks for the GIL.

:func:`install` and :func:`uninstall` are counted: the policy holds while one server of the
process has it installed, and the last ``uninstall`` gives the frozen objects back to the
collector and restores the switch interval the first ``install`` found (tests start and stop
many servers in one process).
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from typing import Any

__all__ = ["FREEZE_AFTER_MS", "SWITCH_INTERVAL_S", "freezes", "install", "uninstall"]

FREEZE_AFTER_MS = 50.0
"""A full collection at least this long freezes what survived it."""

SWITCH_INTERVAL_S = 0.001
"""The longest a thread holding the GIL keeps it once another thread asks for it."""

_lock = threading.Lock()
_installs = 0
_threshold_ns = int(FREEZE_AFTER_MS * 1_000_000)
_started_ns = 0
_freezes = 0
_switch_interval_found_s = 0.0


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
    global _installs, _threshold_ns, _switch_interval_found_s
    with _lock:
        _threshold_ns = int(freeze_after_ms * 1_000_000)
        _installs += 1
        if _installs == 1:
            gc.callbacks.append(_on_collection)
            _switch_interval_found_s = sys.getswitchinterval()
            sys.setswitchinterval(min(SWITCH_INTERVAL_S, _switch_interval_found_s))


def uninstall() -> None:
    """Undo one :func:`install`; the last one unfreezes what the policy froze."""
    global _installs
    with _lock:
        if _installs == 0:
            return
        _installs -= 1
        if _installs == 0:
            gc.callbacks.remove(_on_collection)
            sys.setswitchinterval(_switch_interval_found_s)
            gc.unfreeze()


def freezes() -> int:
    """How many times the policy froze the heap since the process started."""
    return _freezes
