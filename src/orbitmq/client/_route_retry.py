"""A consumer's next look for a subscribed topic that has no route yet.

A topic created moments before a consumer starts is known to its broker but not yet to the
name server (the broker tells it at its next registration, usually within milliseconds, but
later on a busy machine). A rebalance that finds no route would otherwise wait for the next
rebalance interval (20 s by default, as in RocketMQ). Instead the consumer looks again after
1 s, doubling the wait up to the rebalance interval while the topic stays absent, so a topic
that never appears costs a name server one query per interval, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["RouteRetry"]

FIRST_RETRY_S = 1.0


class RouteRetry:
    """Schedules ``wake`` (a rebalance) while some subscribed topic has no route."""

    def __init__(self, wake: Callable[[], None], ceiling_s: float) -> None:
        self._wake = wake
        self._ceiling_s = max(ceiling_s, FIRST_RETRY_S)
        self._delay_s = FIRST_RETRY_S
        self._pending: asyncio.TimerHandle | None = None

    def missing(self) -> None:
        """A rebalance found a subscribed topic without a route: look again soon."""
        if self._pending is not None:
            return
        self._pending = asyncio.get_running_loop().call_later(self._delay_s, self._fire)
        self._delay_s = min(self._delay_s * 2, self._ceiling_s)

    def found(self) -> None:
        """Every subscribed topic had a route: the next absence starts at the first delay again."""
        self._delay_s = FIRST_RETRY_S

    def cancel(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None

    def _fire(self) -> None:
        self._pending = None
        self._wake()
