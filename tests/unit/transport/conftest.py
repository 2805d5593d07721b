"""Run every async transport test on asyncio's own event loop and on uvloop's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest

from orbitmq.transport.runner import new_event_loop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    return {"asyncio": asyncio.new_event_loop, "uvloop": new_event_loop}
