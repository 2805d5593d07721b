"""Open ConsumeQueue files: a bounded LRU of descriptors, and the write-out's create-or-write.

Paths are plain strings here: this sits on the write-out path of every queue, where
pathlib's object churn would cost more than the system calls.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict


def make_queue_directory(directory: str) -> None:
    """Create a queue's directory (and its topic's) if missing: one mkdir in the common case."""
    try:
        os.mkdir(directory)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(directory, exist_ok=True)


class FileHandles:
    """An LRU of open ConsumeQueue file descriptors; every use happens under its lock.

    Paths are plain strings here: this sits on the write-out path of every queue, where
    pathlib's object churn would cost more than the system calls.
    """

    def __init__(self, max_open: int) -> None:
        self._max_open = max_open
        self._fds: OrderedDict[str, int] = OrderedDict()
        self.lock = threading.Lock()

    def _fd(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return fd
        fd = os.open(path, os.O_RDWR)
        self._fds[path] = fd
        if len(self._fds) > self._max_open:
            _, oldest = self._fds.popitem(last=False)
            os.close(oldest)
        return fd

    def pread(self, path: str, size_bytes: int, file_position: int) -> bytes:
        """Bytes of an existing file (b"" when the file does not exist)."""
        with self.lock:
            try:
                return os.pread(self._fd(path), size_bytes, file_position)
            except FileNotFoundError:
                return b""

    def pwrite(self, path: str, file_bytes: int, data: bytes, file_position: int, create: bool) -> None:
        """Write into a file; with ``create``, first create it sparse at ``file_bytes``.

        The caller passes ``create`` until it knows the file exists at full size, and makes
        sure the directory exists. A file the LRU does not hold is opened just for this
        write and closed again, so the write-out of many queues neither evicts the
        readers' descriptors nor holds the lock across its system calls.
        """
        if not create:
            with self.lock:
                fd = self._fds.get(path)
                if fd is not None:
                    os.pwrite(fd, data, file_position)
                    return
            fd = os.open(path, os.O_RDWR)
        else:
            # O_CREAT also opens a file that exists (say, from before a restart): it is only
            # extended, never cut, so a torn short file reaches full size and a full one stays.
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if os.fstat(fd).st_size < file_bytes:
                    os.ftruncate(fd, file_bytes)
            except BaseException:
                os.close(fd)
                raise
        try:
            os.pwrite(fd, data, file_position)
        finally:
            os.close(fd)

    def forget(self, path: str) -> None:
        """Close ``path``'s descriptor if open (before the file is deleted or cut)."""
        with self.lock:
            fd = self._fds.pop(path, None)
            if fd is not None:
                os.close(fd)

    @property
    def open_count(self) -> int:
        return len(self._fds)

    def close_all(self) -> None:
        with self.lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
