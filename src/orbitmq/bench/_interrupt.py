"""Ctrl-C during a benchmark: the first stops it where it stands and lets it print its summary.

A measuring loop calls :func:`stop_on_interrupt` with what ends it (usually setting its stop
event); the first SIGINT then calls that and says so on stderr, so the run ends as if its time
were up and reports what it measured. A second SIGINT raises :class:`KeyboardInterrupt`, which
``orbitmq bench`` turns into one line and exit status 130 after the clean-up blocks ran (the
temporary server is still stopped).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable

__all__ = ["INTERRUPTED_STATUS", "stop_on_interrupt"]

INTERRUPTED_STATUS = 130  # the shell's status for a process ended by SIGINT


def stop_on_interrupt(stop: Callable[[], None]) -> Callable[[], None]:
    """On the running loop, make the first SIGINT call ``stop``; returns the function that undoes it."""
    loop = asyncio.get_running_loop()
    interrupted = False

    def on_interrupt() -> None:
        nonlocal interrupted
        if interrupted:
            loop.remove_signal_handler(signal.SIGINT)
            raise KeyboardInterrupt
        interrupted = True
        print(
            "\ninterrupted: stopping and summarising (Ctrl-C again to quit now)", file=sys.stderr, flush=True
        )
        stop()

    try:
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
    except (NotImplementedError, RuntimeError):  # not the main thread: Ctrl-C stays KeyboardInterrupt
        return lambda: None

    def undo() -> None:
        if not interrupted:
            loop.remove_signal_handler(signal.SIGINT)

    return undo
