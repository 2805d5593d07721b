"""One process per store directory: an exclusive lock on ``<store root>/lock``.

RocketMQ's broker locks the file ``lock`` in its store root and refuses to start when another
process holds it ("Lock failed, MQ already started"). Two processes writing one store would each
recover it, each append to the same CommitLog, and the one stopping first would remove the abort
marker of the one still running, so a later crash would pass for a clean stop.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on the file, held for as long as the file stays open:
the kernel drops it when the process ends, however it ends, so a crashed holder never leaves a
stale lock behind. The holder writes its PID into the file, so the refusal can name it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from orbitmq.errors import StoreLockedError

__all__ = ["LOCK_FILE_NAME", "StoreDirLock", "lock_store_dir"]

LOCK_FILE_NAME = "lock"


class StoreDirLock:
    """The held lock of one directory; :meth:`release` (or process exit) lets the next one in."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor of the open file drops the flock


def lock_store_dir(directory: Path | str, what: str = "store") -> StoreDirLock:
    """Lock ``directory`` (created if missing) for this process, or refuse.

    Raises:
        StoreLockedError: another process holds it; the message names the directory and its PID.
        OSError: the directory or its lock file cannot be created.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_FILE_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder_pid(fd)
        os.close(fd)
        by = f"process {holder}" if holder else "another process"
        raise StoreLockedError(
            f"the {what} directory {root.resolve()} is in use by {by}: one server per directory "
            "(stop that one, or give this one another directory)",
            directory=str(root.resolve()),
            pid=holder,
        ) from None
    except BaseException:
        os.close(fd)
        raise
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # the lock holds without the PID; a refusal then says "another process"
    return StoreDirLock(root, fd)


def _holder_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
