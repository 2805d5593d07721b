"""The consumer drivers in processes of their own (the Java and Go lines of ``bench consume
--compare-defaults``): each is built once per content into ``.cache/<builds>/<digest>/``, and
reports one JSON line with its count, its clock's readings and its CPU."""

from __future__ import annotations

import fcntl
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DriverResult", "built_once"]


@dataclass(slots=True)
class DriverResult:
    """The driver's figures (``time.monotonic()`` seconds), or why there are none (``skipped``)."""

    count: int = 0
    started: float = 0.0
    first: float = 0.0
    last: float = 0.0
    cpu_s: float = 0.0
    skipped: str = ""

    @classmethod
    def from_json_line(cls, line: str) -> DriverResult:
        figures = json.loads(line)
        return cls(
            count=int(figures["count"]),
            started=float(figures["started"]),
            first=float(figures["first"]),
            last=float(figures["last"]),
            cpu_s=float(figures["cpu_s"]),
        )


def built_once(builds: Path, digest: str, build: Callable[[Path], None]) -> Path:
    """``builds/digest``, made by ``build(directory)`` on first use.

    Under a file lock (two benchmarks may start at once); a build that raises leaves no
    ``.complete`` marker, so the next run builds again.
    """
    directory = builds / digest
    marker = directory / ".complete"
    if marker.exists():
        return directory
    builds.mkdir(parents=True, exist_ok=True)
    with open(builds / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            build(directory)
            marker.touch()
    return directory
