"""The last hour of produce/consume TPS and total lag, sampled by the dashboard itself.

Pure: :class:`History` keeps points in time order and drops those older than its span. The
dashboard's sampler task adds one point every ``sample_interval_s``; the cluster page draws
them with uPlot (``static/app.js``) from :meth:`History.series`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

HOUR_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class Point:
    at_ms: int
    produce_tps: float
    consume_tps: float
    lag_messages: int


class History:
    """Points of the last ``span_ms``, oldest first."""

    def __init__(self, span_ms: int = HOUR_MS) -> None:
        self.span_ms = span_ms
        self._points: deque[Point] = deque()

    def add(self, point: Point) -> None:
        self._points.append(point)
        while self._points and self._points[0].at_ms < point.at_ms - self.span_ms:
            self._points.popleft()

    def points(self) -> list[Point]:
        return list(self._points)

    def series(self) -> dict[str, list[float]]:
        """Columns for uPlot: seconds since the epoch, then one column per figure."""
        points = self._points
        return {
            "time_s": [point.at_ms / 1000 for point in points],
            "produce_tps": [point.produce_tps for point in points],
            "consume_tps": [point.consume_tps for point in points],
            "lag_messages": [float(point.lag_messages) for point in points],
        }
