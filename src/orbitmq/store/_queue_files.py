"""Open ConsumeQueue files: a bounded LRU of descriptors, and the write-out's file operations.

Paths are plain strings here: this sits on the write-out path of every queue, where
pathlib's object churn would cost more than the system calls. Every function here may run
on several write-out threads at once (one queue on one thread at a time): ``os`` calls
release the GIL, which is what lets those threads overlap their system calls.
"""

from __future__ import annotations

import errno
import os
import struct
import threading
from collections import OrderedDict

# One ConsumeQueue entry: commit-log offset, size, tags code (layout in ``consume_queue``).
ENTRY = struct.Struct(">qiq")
ENTRY_BYTES = ENTRY.size


class WriteLog:
    """What one write-out thread changed on disk, for the sync that follows.

    ``paths``: files written (a file may appear more than once). ``directories``:
    directories that gained an entry (a new queue directory or file), which a per-file
    sync must also make durable.
    """

    __slots__ = ("paths", "directories")

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.directories: list[str] = []


def make_queue_directory(directory: str, log: WriteLog) -> None:
    """Create a queue's directory (and its topic's) if missing: one mkdir in the common case.

    Notes in ``log`` each directory that gained an entry: the topic directory for a new
    queue directory, and the consume-queue root too for a new topic directory.
    """
    try:
        os.mkdir(directory)
    except FileExistsError:
        return
    except FileNotFoundError:
        topic_directory = os.path.dirname(directory)
        # Another write-out thread may create the topic directory at the same moment.
        os.makedirs(directory, exist_ok=True)
        log.directories.append(os.path.dirname(topic_directory))
    log.directories.append(os.path.dirname(directory))


def _pwrite_all(fd: int, data: bytes | bytearray, file_position: int) -> None:
    """pwrite every byte (a short write is retried, so that a full disk raises ENOSPC)."""
    written = os.pwrite(fd, data, file_position)
    while written < len(data):
        more = os.pwrite(fd, data[written:], file_position + written)
        if not more:
            raise OSError(errno.ENOSPC, f"no byte written at file position {file_position + written}")
        written += more


def create_and_write(path: str, file_bytes: int, data: bytes | bytearray, file_position: int) -> bool:
    """Write into ``path``, first creating it sparse at ``file_bytes``; True when it was new.

    A file that already exists (say, from before a restart) is only extended, never cut,
    so a torn short file reaches full size and a full one stays as it is. A new file needs
    no size check: O_EXCL says it is empty.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        created = True
    except FileExistsError:
        fd = os.open(path, os.O_RDWR)
        created = False
    try:
        if created or os.fstat(fd).st_size < file_bytes:
            os.ftruncate(fd, file_bytes)
        _pwrite_all(fd, data, file_position)
    finally:
        os.close(fd)
    return created


class FileHandles:
    """An LRU of open ConsumeQueue file descriptors; every use happens under its lock.

    At most ``max_open`` descriptors are held (``open_count``); the write-out opens others
    only for the duration of one write, one per write-out thread.
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

    def data_end(self, path: str, file_position: int) -> int:
        """Where the first hole at or after ``file_position`` begins (SEEK_HOLE).

        Files are created sparse and written from the front, so no entry lies past it. A
        filesystem without holes answers the file's size; a missing file answers 0.
        """
        with self.lock:
            try:
                return os.lseek(self._fd(path), file_position, os.SEEK_HOLE)
            except FileNotFoundError:
                return 0
            except OSError:
                return os.fstat(self._fd(path)).st_size

    def write(self, path: str, data: bytes | bytearray, file_position: int) -> None:
        """Write into an existing file of full size.

        Through the LRU's descriptor when it holds one; otherwise the file is opened just
        for this write and closed again, so that the write-out of many queues neither
        evicts the readers' descriptors nor holds the lock across its system calls.
        """
        with self.lock:
            fd = self._fds.get(path)
            if fd is not None:
                _pwrite_all(fd, data, file_position)
                return
        fd = os.open(path, os.O_RDWR)
        try:
            _pwrite_all(fd, data, file_position)
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
