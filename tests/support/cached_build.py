"""Build a client's environment once under the git-ignored ``.cache/``, whichever test asks first.

The 5.x SDK's venv and ali-ons's ``node_modules`` are made by a few commands that take a
while; pytest-xdist workers may ask for them at the same moment, so the first one builds under
an exclusive file lock and marks the directory complete, and the others wait and reuse it.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

BUILD_TIMEOUT_S = 600


def build_once(directory: Path, what: str, steps: Callable[[], Sequence[Sequence[str]]]) -> None:
    """Make ``directory`` with the commands ``steps()`` returns (run in it), unless already made.

    Raises:
        RuntimeError: a step failed (the message names ``what`` and has the step's output).
    """
    marker = directory / ".complete"
    if marker.exists():
        return
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f"{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be building it right now
        if marker.exists():
            return
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        for step in steps():
            done = subprocess.run(step, cwd=directory, capture_output=True, timeout=BUILD_TIMEOUT_S)
            if done.returncode != 0:
                raise RuntimeError(
                    f"building {what} failed at {list(step)}:\n"
                    f"{done.stdout.decode(errors='replace')[-2000:]}{done.stderr.decode(errors='replace')[-2000:]}"
                )
        marker.write_text(f"{what}\n")
