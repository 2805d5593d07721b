"""Counting the Python work a call does, to check that it does not grow with a table's size.

A timed check fails on a loaded machine and passes on a fast one; the number of Python
function calls a piece of code makes is the same on both. ``python_calls(action)`` runs
``action`` under a profile hook and returns how many Python functions it called (C functions
are not counted), optionally only those of one name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType

__all__ = ["python_calls"]


def python_calls(action: Callable[[], object], name: str | None = None) -> int:
    """How many Python functions (named ``name``, if given) ``action()`` calls."""
    calls = 0

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call" and (name is None or frame.f_code.co_name == name):
            calls += 1

    sys.setprofile(count)
    try:
        action()
    finally:
        sys.setprofile(None)
    return calls
