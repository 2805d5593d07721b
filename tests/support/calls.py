"""Counting the Python work a call does, to check that it does not grow with a table's size.

A timed check fails on a loaded machine and passes on a fast one; the number of Python
function calls a piece of code makes is the same on both. ``python_calls(action)`` runs
``action`` under a profile hook and returns how many Python functions it called (C functions
are not counted), optionally only those of one name. ``python_opcodes(action)`` counts the
bytecode instructions the Python functions it calls run, which also sees work done in a loop
without calls.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import TypeVar

__all__ = ["python_calls", "python_calls_while", "python_opcodes"]

_T = TypeVar("_T")


def python_calls(action: Callable[[], object], name: str | None = None) -> int:
    """How many Python functions (named ``name``, if given) ``action()`` calls."""
    calls = 0

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call" and (name is None or frame.f_code.co_name == name):
            calls += 1

    # No collection meanwhile: a library's gc callbacks are Python calls too.
    collecting = gc.isenabled()
    gc.disable()
    sys.setprofile(count)
    try:
        action()
    finally:
        sys.setprofile(None)
        if collecting:
            gc.enable()
    return calls


def python_opcodes(action: Callable[[], object]) -> int:
    """How many bytecode instructions ``action`` and the Python functions it calls run."""
    opcodes = 0

    def trace(frame: FrameType, event: str, arg: object) -> Callable[..., object]:
        nonlocal opcodes
        if event == "call":
            frame.f_trace_opcodes = True
        elif event == "opcode":
            opcodes += 1
        return trace

    collecting = gc.isenabled()
    gc.disable()
    sys.settrace(trace)
    try:
        action()
    finally:
        sys.settrace(None)
        if collecting:
            gc.enable()
    return opcodes


async def python_calls_while(awaitable: Awaitable[_T], name: str) -> tuple[_T, int]:
    """``await awaitable`` and count the calls of Python functions named ``name`` on this
    thread meanwhile (the event loop's other tasks included: an in-process server's handlers)."""
    calls = 0

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call" and frame.f_code.co_name == name:
            calls += 1

    sys.setprofile(count)
    try:
        result = await awaitable
    finally:
        sys.setprofile(None)
    return result, calls
