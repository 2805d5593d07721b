"""How benchmarks print: percentiles only where the samples can carry them, progress lines that
stay readable in a log, and a verdict beside each target.

A percentile p needs at least ``1 / (1 - p)`` samples to mean anything (p50: 2, p99: 100,
p99.9: 1,000); with fewer it is printed as ``n/a`` and the count is given, so a window with one
sample never shows a "p99.9" that is that sample.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.live import Live
from rich.text import Text

__all__ = ["ProgressLine", "percentile", "percentiles_text", "verdict"]


def _min_samples(fraction: float) -> int:
    return math.ceil(1 / (1 - fraction) - 1e-9)


def _label(fraction: float) -> str:
    return "p" + f"{fraction * 100:g}"


def percentile(sorted_values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of ``sorted_values`` (ascending); None with too few samples."""
    count = len(sorted_values)
    if count < _min_samples(fraction):
        return None
    return sorted_values[min(count - 1, max(0, math.ceil(fraction * count) - 1))]


def percentiles_text(
    sorted_values: Sequence[float], fractions: Sequence[float], unit: str = "ms", decimals: int = 3
) -> str:
    """``"p50 0.310 ms  p99 0.840 ms  p99.9 n/a (120 samples)"`` over ``sorted_values`` (ascending).

    A percentile whose minimum sample count is not reached reads ``n/a``; the line then ends
    with the sample count.
    """
    count = len(sorted_values)
    parts = []
    for fraction in fractions:
        value = percentile(sorted_values, fraction)
        parts.append(f"{_label(fraction)} " + ("n/a" if value is None else f"{value:,.{decimals}f} {unit}"))
    text = "  ".join(parts)
    if any(count < _min_samples(fraction) for fraction in fractions):
        text += f" ({count} sample{'s' if count != 1 else ''})"
    return text


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


class ProgressLine:
    """Periodic progress: one live line redrawn by rich on a terminal, one line each in a log or a pipe.

    On a terminal, whatever else is printed meanwhile (a failure line) appears above the live
    line; :meth:`end` leaves its last state on screen and gives the cursor back.
    """

    def __init__(self) -> None:
        self._console = Console(file=sys.stdout)
        self._live: Live | None = None

    def show(self, text: str) -> None:
        if not self._console.is_terminal:
            print(text, flush=True)
            return
        if self._live is None:
            self._live = Live(Text(text), console=self._console, auto_refresh=False)
            self._live.start()
        self._live.update(Text(text), refresh=True)

    def end(self) -> None:
        """Stop redrawing, so the next output starts on its own line."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()
