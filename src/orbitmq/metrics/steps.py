"""Work in steps: a pass over tens of thousands of rows that the event loop runs a slice at a time.

A scrape of a broker with 50,000 topics walks every topic a few times (offsets, counters, the
choice of the topics that keep their label). Run on the event loop at once, that holds every
request for seconds; run on a thread, it holds them nearly as long, because the thread and the
loop share the GIL (the loop gets it back only every switch interval, and gives it up at every
system call). So the passes are generators instead: a *step* is the work between two
``yield None`` statements, a bounded number of rows (:data:`ROWS_PER_STEP`), and the generator's
return value is the result. :func:`run_sliced` runs steps on the event loop until
:data:`SLICE_S` has gone by, then lets the loop serve what is waiting, and goes on; no request
waits for more than one slice. :func:`run_steps` runs them all at once (tests, one-shot callers).
A call that may wait (for a lock another thread holds while it writes every queue, say) is
made off the loop: ``result = yield from off_loop(call)`` runs ``call`` on a worker thread
under :func:`run_sliced`, in place under :func:`run_steps`.

Pure: no I/O, no clock but the slice timer of :func:`run_sliced`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from typing import TypeVar, cast

__all__ = ["ROWS_PER_STEP", "SLICE_S", "Steps", "off_loop", "run_sliced", "run_steps"]

_T = TypeVar("_T")


class _OffLoop:
    """A call the runner makes off the event loop (see :func:`off_loop`)."""

    __slots__ = ("call",)

    def __init__(self, call: Callable[[], object]) -> None:
        self.call = call


Steps = Generator[_OffLoop | None, object, _T]
"""Work that yields between bounded steps and returns its result."""


def off_loop(call: Callable[[], _T]) -> Steps[_T]:
    """``call()``, made on a worker thread when the steps run on the event loop."""
    result = yield _OffLoop(call)
    return cast(_T, result)


ROWS_PER_STEP = 256
"""Rows a pass handles between two ``yield``: well under a millisecond of Python each."""

SLICE_S = 0.010
"""How long :func:`run_sliced` runs steps before it lets the event loop serve other work."""


def run_steps(steps: Steps[_T]) -> _T:
    """Every step of ``steps`` at once; its result."""
    sent: object = None
    while True:
        try:
            request = steps.send(sent)
        except StopIteration as done:
            result: _T = done.value
            return result
        sent = request.call() if request is not None else None


async def run_sliced(steps: Steps[_T], slice_s: float = SLICE_S) -> _T:
    """Every step of ``steps`` on the running loop, yielding to it after each ``slice_s``."""
    clock = time.perf_counter
    started = clock()
    sent: object = None
    while True:
        try:
            request = steps.send(sent)
        except StopIteration as done:
            result: _T = done.value
            return result
        sent = None
        if request is not None:
            sent = await asyncio.to_thread(request.call)
            started = clock()
        elif clock() - started >= slice_s:
            await asyncio.sleep(0)
            started = clock()
