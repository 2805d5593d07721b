"""Where the OrbitMQ server's time goes during a run: py-spy (the ``profile`` extra) records
the server process without stopping it (``--nonblocking``), and the collapsed stacks it writes
are summed by function, both where the time is spent (self) and under what (inclusive)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

__all__ = ["ServerProfile"]

TOP = 15


class ServerProfile:
    """py-spy recording process ``pid`` into ``path`` from construction to :meth:`stop`."""

    def __init__(self, pid: int, path: Path, rate_hz: int = 50) -> None:
        self.path = path
        binary = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        self.proc: subprocess.Popen[bytes] | None = None
        if not Path(binary).exists():
            print("profile: py-spy is not installed (pip install -e '.[profile]'); no profile", flush=True)
            return
        self.proc = subprocess.Popen(
            [
                binary,
                "record",
                "--nonblocking",
                "-p",
                str(pid),
                "-r",
                str(rate_hz),
                "-f",
                "raw",
                "-o",
                str(path),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def summary(self) -> str:
        """The top functions by self and by inclusive samples, as text."""
        if not self.path.exists():
            return "profile: no samples"
        own: Counter[str] = Counter()
        inclusive: Counter[str] = Counter()
        total = 0
        for line in self.path.read_text(errors="replace").splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = [frame.split(" (")[0] + _where(frame) for frame in stack.split(";")]
            total += count
            own[frames[-1]] += count
            for frame in set(frames):
                inclusive[frame] += count
        if not total:
            return "profile: no samples"
        lines = [f"OrbitMQ server profile ({total:,} samples, {self.path}): self time"]
        lines += [f"  {count / total:6.1%}  {name}" for name, count in own.most_common(TOP)]
        lines.append("inclusive (the function and what it calls):")
        skip = (
            "<module>",
            "run (asyncio",
            "run_forever",
            "_run_once",
            "_run (",
            "main (",
            "run_until_complete",
        )
        top = [(name, count) for name, count in inclusive.most_common(TOP * 4) if not name.startswith(skip)]
        lines += [f"  {count / total:6.1%}  {name}" for name, count in top[:TOP]]
        return "\n".join(lines)


def _where(frame: str) -> str:
    """`` (module.py)`` of a py-spy frame ``name (path/module.py:line)``."""
    if " (" not in frame:
        return ""
    location = frame.split(" (", 1)[1].rstrip(")")
    return f" ({Path(location.split(':')[0]).name})"
