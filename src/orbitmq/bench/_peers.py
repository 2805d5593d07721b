"""What ``bench compare`` measures of one workload phase on either peer: messages, bytes, wall
time from the phase's start (client start-up included) and from its first message, and the CPU
seconds spent by the server process and by this client process meanwhile."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

__all__ = ["Phase", "process_cpu_s"]

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """CPU seconds of process ``pid`` so far: user + system, its own and its reaped children's
    (``/proc/<pid>/stat`` utime, stime, cutime, cstime); 0.0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return 0.0
    # The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    fields = text[text.rindex(b")") + 2 :].split()
    return sum(int(value) for value in fields[11:15]) / _TICKS_PER_S


@dataclass(slots=True)
class Phase:
    """One timed phase; :meth:`add` as messages go or arrive, :meth:`end` when it is over."""

    started: float
    server_cpu_before: float
    client_cpu_before: float
    count: int = 0
    bytes: int = 0
    first_at: float | None = None
    first_count: int = 0
    ended: float = 0.0
    server_cpu_s: float = 0.0
    client_cpu_s: float = 0.0

    @classmethod
    def begin(cls, server_cpu_s: float) -> Phase:
        return cls(time.perf_counter(), server_cpu_s, time.process_time())

    def add(self, count: int, size_bytes: int) -> None:
        if self.first_at is None and count:
            self.first_at = time.perf_counter()
            self.first_count = count
        self.count += count
        self.bytes += size_bytes

    def end(self, server_cpu_s: float) -> Phase:
        self.ended = time.perf_counter()
        self.server_cpu_s = server_cpu_s - self.server_cpu_before
        self.client_cpu_s = time.process_time() - self.client_cpu_before
        return self

    @property
    def seconds(self) -> float:
        return max(self.ended - self.started, 1e-9)

    @property
    def rate(self) -> float:
        """Messages/s over the whole phase, start-up included."""
        return self.count / self.seconds

    @property
    def steady_rate(self) -> float | None:
        """Messages/s after the first delivery: those that came after it, over the time since;
        None when every message came with the first."""
        if self.first_at is None or self.count == self.first_count:
            return None
        return (self.count - self.first_count) / max(self.ended - self.first_at, 1e-9)
