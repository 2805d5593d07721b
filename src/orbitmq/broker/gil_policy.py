"""A switch interval short enough that the event loop is not kept waiting behind other threads.

Every thread of a broker process shares one GIL with its event loop: the store's write-out and
housekeeping threads, the executor threads that encode ``topics.json`` and REGISTER_BROKER
bodies, and in a standalone the name server's decoding of those bodies. With 50,000 topics each
of these runs pure Python for hundreds of milliseconds. CPython hands the GIL to a waiting
thread only after the holder ran for the switch interval (5 ms by default), and the event loop
gives it up at every system call it makes (each poll, read and write of a request), after which
it queues again behind every busy thread: a request that needs a few system calls waited five
to ten of those intervals per busy thread, and a loop stall watchdog saw the broker's loop late
by 100 to 600 ms while such threads ran, with no lock held. At a 1 ms interval the same waits
are a fifth as long. Threads that do not compete for the GIL are not affected: the interval only
matters while another thread asks for it.

:func:`install` and :func:`uninstall` are counted, as ``gc_policy``'s are: the interval holds
while one server of the process has it installed, and the last ``uninstall`` restores the
interval found by the first ``install``.
"""

from __future__ import annotations

import sys
import threading

__all__ = ["SWITCH_INTERVAL_S", "install", "uninstall"]

SWITCH_INTERVAL_S = 0.001
"""The longest a thread holding the GIL keeps it once another thread asks for it."""

_lock = threading.Lock()
_installs = 0
_previous_s = 0.0


def install(interval_s: float = SWITCH_INTERVAL_S) -> None:
    """Shorten the switch interval to ``interval_s`` (never lengthen it)."""
    global _installs, _previous_s
    with _lock:
        _installs += 1
        if _installs == 1:
            _previous_s = sys.getswitchinterval()
            sys.setswitchinterval(min(interval_s, _previous_s))


def uninstall() -> None:
    """Undo one :func:`install`; the last one restores the interval the first one found."""
    global _installs
    with _lock:
        if _installs == 0:
            return
        _installs -= 1
        if _installs == 0:
            sys.setswitchinterval(_previous_s)
