"""How ``orbitmq admin`` prints: rich tables for people, ``--json`` for scripts.

Tables are drawn by rich without borders (columns two spaces apart, the header first), so the
output stays easy to read in a terminal and to cut with ``awk``; when stdout is not a terminal
nothing is wrapped or truncated. With ``--json`` every read command prints one JSON document
instead (keys in camelCase as RocketMQ's own JSON, timestamps as epoch ms), and nothing else on
stdout.
"""

from __future__ import annotations

import datetime
import io
import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

__all__ = ["Output", "format_ms"]

_WIDE = 10_000


def format_ms(timestamp_ms: int) -> str:
    """Local time with milliseconds, ``-`` for none (0 or negative)."""
    if timestamp_ms <= 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000).astimezone()
    return moment.isoformat(timespec="milliseconds")


def _print(renderable: object) -> None:
    """Render with rich and write to the current stdout, trailing spaces of each line removed."""
    # Made per print: tests and callers may swap sys.stdout between commands.
    terminal = sys.stdout.isatty()
    width = shutil.get_terminal_size().columns if terminal else _WIDE
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        highlight=False,
        soft_wrap=not terminal,
        emoji=False,
        force_terminal=terminal,
    )
    console.print(renderable)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))


def _default(value: Any) -> Any:
    if isinstance(value, set | frozenset | tuple):
        return sorted(value) if isinstance(value, set | frozenset) else list(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


class Output:
    """Prints one command's result as a table (or key/value lines), or as JSON with ``--json``."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def json(self, document: Any) -> None:
        """Print ``document`` as indented JSON (only with ``--json``)."""
        sys.stdout.write(orjson.dumps(document, default=_default, option=orjson.OPT_INDENT_2).decode() + "\n")

    def table(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[object]],
        *,
        document: Any = None,
        title: str | None = None,
    ) -> None:
        """A table; with ``--json`` the ``document`` (default: the rows as objects) instead."""
        if self.as_json:
            self.json(
                document if document is not None else [dict(zip(headers, row, strict=True)) for row in rows]
            )
            return
        self.print_table(headers, rows, title=title)

    @staticmethod
    def print_table(
        headers: Sequence[str], rows: Sequence[Sequence[object]], *, title: str | None = None
    ) -> None:
        if title:
            sys.stdout.write(title + "\n")
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", expand=False)
        for header in headers:
            table.add_column(header, overflow="fold", no_wrap=not sys.stdout.isatty())
        for row in rows:
            table.add_row(*("-" if cell is None else str(cell) for cell in row))
        _print(table)

    def key_values(
        self, values: Mapping[str, object], *, document: Any = None, separator: str = ": "
    ) -> None:
        """``key: value`` lines, sorted by key (``mqadmin brokerStatus`` style)."""
        if self.as_json:
            self.json(document if document is not None else dict(values))
            return
        width = max((len(key) for key in values), default=0)
        for key in sorted(values):
            sys.stdout.write(f"{key:<{width}}{separator}{values[key]}\n")

    def line(self, text: str) -> None:
        """A line of prose (never printed with ``--json``, where it would break the document)."""
        if not self.as_json:
            sys.stdout.write(text + "\n")
