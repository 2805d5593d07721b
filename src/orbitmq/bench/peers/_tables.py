"""How ``bench peers`` prints: one table per workload group, a column per system, and the
ratio OrbitMQ / peer on every row (above 1 is better for rates; for latencies, CPU and memory
below 1 is better, as each row's unit says)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Row", "Table", "ratio"]


def ratio(orbit: float | None, peer: float | None) -> float | None:
    return orbit / peer if orbit is not None and peer else None


def _value_text(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit in ("ms",):
        return f"{value:,.3f} ms"
    if unit in ("s", "CPU s"):
        return f"{value:,.1f} s"
    if unit == "MiB":
        return f"{value:,.0f} MiB"
    return f"{value:,.0f}"


@dataclass(slots=True)
class Row:
    label: str
    unit: str  # "msgs/s", "ms", "CPU s", "MiB"
    values: dict[str, float | None]
    note: str = ""


@dataclass(slots=True)
class Table:
    """``systems``: column names, OrbitMQ's first; ``peers``: the columns a ratio is printed against."""

    title: str
    systems: Sequence[str]
    peers: Sequence[str]
    rows: list[Row] = field(default_factory=list)

    def add(self, label: str, unit: str, values: dict[str, float | None], note: str = "") -> Row:
        row = Row(label, unit, values, note)
        self.rows.append(row)
        return row

    def render(self) -> str:
        orbit = self.systems[0]
        label_width = max([len(row.label) + len(row.unit) + 3 for row in self.rows] + [30])
        col = 17
        head = f"{'':<{label_width}}" + "".join(f"{name[: col - 1]:>{col}}" for name in self.systems)
        head += "".join(f"{'vs ' + peer[:10]:>{14}}" for peer in self.peers)
        lines = [f"\n{self.title}", head]
        for row in self.rows:
            line = f"{row.label + ' (' + row.unit + ')':<{label_width}}"
            line += "".join(f"{_value_text(row.values.get(name), row.unit):>{col}}" for name in self.systems)
            for peer in self.peers:
                value = ratio(row.values.get(orbit), row.values.get(peer))
                line += f"{'n/a' if value is None else f'{value:.2f}x':>14}"
            if row.note:
                line += f"  {row.note}"
            lines.append(line)
        return "\n".join(lines)
