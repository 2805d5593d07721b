"""The narrow file seam of the store: file creation, fsync, and named failpoints.

Failpoints let fault tests stop the store at a precise step ("crash" with os._exit, or
raise) without patching code. In production nothing is armed and ``failpoints.hit(name)``
costs one dict lookup on an empty dict. Names in use:

=============================  ===========================================================
commit_log.before_write        a put is about to copy its records into the mapped segment
commit_log.after_write         the records are in the mapping, not yet dispatched
commit_log.before_fsync        the flush thread is about to fsync a segment
commit_log.before_raw_head     a replicated append is copied but its first TOTALSIZE
dispatch.after_cq_write        a put's entries are in its ConsumeQueue, not yet indexed
consume_queue.before_write     the flush thread is about to write buffered entries to a file
checkpoint.before_write        the checkpoint file is about to be rewritten
index.after_entries            a run of index entries is written, no slot or header yet
index.after_slots              a run's slots point at its entries, the header not yet updated
=============================  ===========================================================
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

SEGMENT_NAME_DIGITS = 20


class Failpoints:
    """A registry of armed failpoints (thread-safe enough: arming happens in tests)."""

    def __init__(self) -> None:
        self._armed: dict[str, Callable[[], None]] = {}
        self._lock = threading.Lock()

    def arm(self, name: str, action: Callable[[], None]) -> None:
        """Run ``action`` every time ``name`` is hit (it may raise or call os._exit)."""
        with self._lock:
            self._armed = {**self._armed, name: action}

    def disarm(self, name: str | None = None) -> None:
        """Disarm one failpoint, or every failpoint when ``name`` is None."""
        with self._lock:
            if name is None:
                self._armed = {}
            else:
                self._armed = {key: value for key, value in self._armed.items() if key != name}

    def hit(self, name: str) -> None:
        """Mark that execution reached ``name``; does nothing unless armed."""
        # The dict is replaced, never mutated, so this read needs no lock.
        if self._armed:
            action = self._armed.get(name)
            if action is not None:
                action()


failpoints = Failpoints()


def crash_process() -> None:
    """A failpoint action that ends the process at once, like a kill -9 (no cleanup)."""
    os._exit(137)


def segment_name(start_offset: int) -> str:
    """A segment's file name: its first offset as 20 zero-padded digits."""
    return f"{start_offset:0{SEGMENT_NAME_DIGITS}d}"


def parse_segment_name(name: str) -> int | None:
    """The start offset a segment file name encodes, or None for any other file."""
    if len(name) != SEGMENT_NAME_DIGITS or not name.isdigit():
        return None
    return int(name)


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    """Segment files in ``directory`` as (start offset, path), sorted; [] when it is missing."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    segments = []
    for entry in entries:
        start = parse_segment_name(entry.name)
        if start is not None and entry.is_file():
            segments.append((start, Path(entry.path)))
    segments.sort()
    return segments


def create_sized_file(path: Path, size_bytes: int) -> None:
    """Create (or extend) a sparse file of ``size_bytes`` and make its name durable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size < size_bytes:
            os.ftruncate(fd, size_bytes)
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    """fsync a directory so that files created or removed in it survive a power loss."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_durably(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename, fsync dir)."""
    temp_path = path.with_name(path.name + ".tmp")
    fd = os.open(temp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        written = 0
        while written < len(data):
            # A short write (a full disk) must not replace the file with a cut copy.
            count = os.write(fd, data[written:])
            if not count:
                raise OSError(errno.ENOSPC, f"no byte of {path.name} written at {written}")
            written += count
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        temp_path.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(temp_path, path)
    fsync_directory(path.parent)


# -- mapping calls the mmap module lacks ----------------------------------------------------
# mmap.madvise and mmap.flush hold the GIL for the whole call; through ctypes (CDLL) the GIL
# is released, so a page population or a range sync on one thread leaves the others running.

MADV_POPULATE_WRITE = 23  # Linux 5.14+: fault pages in writable, as a write would, in one call
MS_SYNC = 4


def _load_libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("madvise", "msync"):
            function = getattr(libc, name)
            function.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
            function.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _load_libc()


def mapping_calls_available() -> bool:
    """Whether :func:`sync_mapping_range` and :func:`populate_mapping` can be used here."""
    return _LIBC is not None


def sync_mapping_range(address: int, length: int) -> None:
    """msync(MS_SYNC) ``length`` bytes of a shared mapping from ``address`` (page-aligned).

    Writes back the range's dirty pages only (fdatasync would write the whole file's),
    and commits the metadata they need, as fdatasync does.

    Raises:
        OSError: msync failed (an I/O error, or the range is not mapped).
    """
    assert _LIBC is not None
    if _LIBC.msync(address, length, MS_SYNC) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"msync of {length} bytes failed: {os.strerror(code)}")


def populate_mapping(address: int, length: int) -> bool:
    """Fault ``length`` bytes of a shared mapping in, writable (MADV_POPULATE_WRITE).

    Returns False when the kernel does not know the advice (before Linux 5.14).

    Raises:
        OSError: any other failure.
    """
    assert _LIBC is not None
    if _LIBC.madvise(address, length, MADV_POPULATE_WRITE) == 0:
        return True
    code = ctypes.get_errno()
    if code == errno.EINVAL:
        return False
    raise OSError(code, f"madvise(MADV_POPULATE_WRITE) of {length} bytes failed: {os.strerror(code)}")


class DiskFullError(OSError):
    """The file system has no block left for a write the store was about to make (ENOSPC).

    Raised before the write, never by it: the caller refuses the write and nothing changes.
    An OSError, so callers that handle I/O errors in general handle this one too.
    """

    def __init__(self, what: str) -> None:
        super().__init__(errno.ENOSPC, f"no space left on the store's disk for {what}")


_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def reserve_blocks(fd: int, offset: int, length: int, what: str = "a write") -> bool:
    """Give ``length`` bytes of the file from ``offset`` their disk blocks before they are written.

    A mapped file must never be written where no block stands behind the page: the write
    faults, the kernel finds no space, and the process dies of SIGBUS. So the store allocates
    (``posix_fallocate``, mode 0, inside the file's size) ahead of every write into a mapping,
    and a full disk turns into :class:`DiskFullError`, a refusal, at this call. Allocated
    ranges read as zeros and keep the file's size. Blocks already allocated cost nothing.

    Returns False where no allocation call exists here (not Linux or BSD): writes then
    allocate as they always did.

    Raises:
        DiskFullError: no space (ENOSPC, EDQUOT).
        OSError: any other failure of the call.
    """
    if length <= 0:
        return True
    allocate = getattr(os, "posix_fallocate", None)
    if allocate is None:
        return False
    try:
        allocate(fd, offset, length)
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise DiskFullError(what) from exc
        if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS):
            return False
        raise
    return True


def first_hole(fd: int, size_bytes: int) -> int:
    """Where the file's first hole begins (its size when it has none; 0 when unknown).

    Bytes before it have blocks: reading them through a mapping never allocates, which on
    tmpfs a read fault on a hole does (and dies of SIGBUS when the file system is full).
    """
    try:
        return min(os.lseek(fd, 0, os.SEEK_HOLE), size_bytes)
    except (OSError, AttributeError):
        return 0


def allocate_blocks(fd: int, offset: int, length: int) -> bool:
    """:func:`reserve_blocks` as a best effort: False instead of any error (a full disk too)."""
    try:
        return reserve_blocks(fd, offset, length)
    except OSError:
        return False
