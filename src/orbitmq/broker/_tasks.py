"""The one way the broker's background services stop their asyncio tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task[None] | None]) -> None:
    """Cancel every task, then wait until each has finished (``None`` entries are skipped)."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    for task in running:
        try:
            await task
        except asyncio.CancelledError:
            pass
