"""Work in steps: the event loop runs other tasks between slices, and waiting calls run off it.

Method: counted, not timed. With a slice of 0 s every step is a slice of its own, so a task
that counts its turns must get one between any two steps; ``off_loop`` calls must run on
another thread under ``run_sliced`` and in place under ``run_steps``.
"""

from __future__ import annotations

import asyncio
import threading

from orbitmq.metrics.steps import Steps, off_loop, run_sliced, run_steps

STEPS = 50


def _work(threads: list[str]) -> Steps[int]:
    total = 0
    for value in range(STEPS):
        total += value
        yield None
    name = yield from off_loop(lambda: threading.current_thread().name)
    threads.append(name)
    return total


async def test_steps_run_sliced_lets_the_loop_serve_between_slices_and_waits_off_it() -> None:
    turns = 0
    done = asyncio.Event()

    async def other_task() -> None:
        nonlocal turns
        while not done.is_set():
            turns += 1
            await asyncio.sleep(0)

    threads: list[str] = []
    task = asyncio.create_task(other_task())
    await asyncio.sleep(0)
    try:
        assert await run_sliced(_work(threads), slice_s=0.0) == sum(range(STEPS))
    finally:
        done.set()
        await task
    assert turns >= STEPS
    assert threads and threads[0] != threading.current_thread().name


def test_steps_run_steps_runs_everything_in_place() -> None:
    threads: list[str] = []
    assert run_steps(_work(threads)) == sum(range(STEPS))
    assert threads == [threading.current_thread().name]
