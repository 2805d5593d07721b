"""Copy a live store directory as a crash would leave it.

A running broker or store keeps writing while the copy is taken: checkpoints and metadata are
written to ``<name>.tmp`` and renamed over ``<name>``, so a file listed at the start of a copy may
be gone when its turn comes. A power cut at that moment would leave either the temporary file or
the renamed one, both states recovery must accept; the copy keeps whatever still exists and skips
what vanished, instead of failing the way ``shutil.copytree`` does.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def _copy_if_present(source: str, target: str) -> str:
    try:
        return str(shutil.copy2(source, target))
    except FileNotFoundError:
        # Renamed or deleted by the running store between the listing and the copy.
        return target


def copy_as_crashed(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` (which must not exist), skipping files that vanish mid-copy."""
    shutil.copytree(source, target, copy_function=_copy_if_present)
