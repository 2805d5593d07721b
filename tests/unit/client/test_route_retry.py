"""RouteRetry: looks again after 1 s, doubling up to the rebalance interval, reset once routed."""

from __future__ import annotations

import asyncio

from orbitmq.client import _route_retry
from orbitmq.client._route_retry import RouteRetry


async def test_route_retry_doubles_to_its_ceiling_and_resets() -> None:
    loop = asyncio.get_running_loop()
    delays: list[float] = []
    real_call_later = loop.call_later

    def recording(delay: float, callback: object, *args: object) -> asyncio.TimerHandle:
        delays.append(delay)
        return real_call_later(0, callback, *args)  # type: ignore[arg-type]

    loop.call_later = recording  # type: ignore[method-assign,assignment]
    woken = asyncio.Event()
    retry = RouteRetry(woken.set, ceiling_s=5.0)
    try:
        for _ in range(5):
            woken.clear()
            retry.missing()
            retry.missing()  # one look pending at a time
            for _ in range(100):  # asyncio.sleep(0) schedules no timer of its own
                if woken.is_set():
                    break
                await asyncio.sleep(0)
            assert woken.is_set()
        retry.found()
        retry.missing()
        retry.cancel()
        woken.clear()
        for _ in range(20):
            await asyncio.sleep(0)
        assert not woken.is_set()  # cancelled before it fired
    finally:
        del loop.call_later
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0, 1.0]
    assert _route_retry.FIRST_RETRY_S == 1.0
