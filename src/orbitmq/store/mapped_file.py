"""Memory-mapped, fixed-size segment files and the ordered queue of them.

A :class:`MappedFile` is one segment: a sparse file of ``size_bytes`` named by the
offset of its first byte, mapped read-write with MAP_SHARED. Writers copy into the
mapping and then advance ``wrote_position``; a reader never looks past it.

Blocks before writes. A page of the mapping is written only once the file has blocks
behind it: :meth:`MappedFile.allocate_to` allocates ahead of the write position (in
``ALLOCATE_CHUNK_BYTES`` steps) and turns a full disk into
:class:`~orbitmq.store._fs.DiskFullError` before anything is copied. A write fault on a
page without a block would otherwise kill the process with SIGBUS; on tmpfs even a read
fault on a hole allocates, so a reader of a loaded segment stays below
``allocated_position`` too (set from the file's first hole when the segment is loaded).

Durability is ``msync(MS_SYNC)`` of the range written since the last flush, which writes
back those pages only and commits the metadata they need, as ``fdatasync`` does. Only the
range, because pages ahead of the write position may have been faulted in early
(:meth:`MappedFile.populate`, see ``CommitLogWarmer``): they hold zeros, and writing them
back now would double the bytes a flush writes. Both calls go through ctypes with the GIL
released (``mmap.flush`` and ``mmap.madvise`` hold it), using the mapping's address, which
the segment keeps pinned while it is mapped; :meth:`MappedFile.close` waits for a call in
progress to end before it unmaps. Where those calls are not available (not Linux) a flush
is ``os.fdatasync`` of the file and nothing is faulted in early.

A :class:`MappedFileQueue` is the ordered list of segments of one log: segment ``i``
starts at ``first_start + i * size_bytes``, so finding the segment of an offset is one
division. Only the last segment is ever written.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import threading
from pathlib import Path

from orbitmq.errors import StoreError
from orbitmq.store._fs import (
    create_sized_file,
    first_hole,
    fsync_directory,
    list_segments,
    mapping_calls_available,
    populate_mapping,
    reserve_blocks,
    segment_name,
    sync_mapping_range,
)

_PAGE_MASK = ~(mmap.PAGESIZE - 1)
# warm_mark of a segment nobody warms: no write position ever reaches it.
NEVER = sys.maxsize
# Blocks are allocated this far ahead of a write at a time (one fallocate per chunk).
ALLOCATE_CHUNK_BYTES = 1 << 20


class MappedFile:
    """One mapped segment. ``*_position`` values are file offsets inside this segment."""

    __slots__ = (
        "path",
        "start_offset",
        "size_bytes",
        "buffer",
        "wrote_position",
        "flushed_position",
        "populated_position",
        "allocated_position",
        "warm_mark",
        "_fd",
        "_pin",
        "_address",
        "_users",
        "_users_changed",
    )

    def __init__(self, path: Path, start_offset: int, size_bytes: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self.size_bytes = size_bytes
        create_sized_file(path, size_bytes)
        self._fd = os.open(path, os.O_RDWR)
        # Calls using the mapping's address now (flush, populate); close() waits for them.
        self._users = 0
        self._users_changed = threading.Condition(threading.Lock())
        self._pin: ctypes.c_char | None = None
        self._address = 0
        try:
            self._map()
        except BaseException:
            os.close(self._fd)
            raise
        # A fresh segment is empty; load/recovery moves these to the real end.
        self.wrote_position = 0
        self.flushed_position = 0
        # Faulted in up to here (populate); a write reaching warm_mark wakes the warmer.
        self.populated_position = 0
        # Every byte below it has its disk block (see allocate_to); a loaded segment sets it.
        self.allocated_position = 0
        self.warm_mark = NEVER

    def _map(self) -> None:
        self.buffer = mmap.mmap(self._fd, self.size_bytes, access=mmap.ACCESS_WRITE)
        if mapping_calls_available():
            # The pin is a buffer export: while it lives the mapping cannot be closed.
            self._pin = ctypes.c_char.from_buffer(self.buffer)
            self._address = ctypes.addressof(self._pin)

    def _unmap(self) -> None:
        """Drop the mapping once no flush or populate call is using its address."""
        with self._users_changed:
            while self._users:
                self._users_changed.wait()
            self._pin = None
            self._address = 0
            self.buffer.close()

    def _acquire_address(self) -> int:
        """The mapping's address, kept mapped until :meth:`_release_address` (0 when unmapped)."""
        with self._users_changed:
            if self._address:
                self._users += 1
            return self._address

    def _release_address(self) -> None:
        with self._users_changed:
            self._users -= 1
            if not self._users:
                self._users_changed.notify_all()

    @property
    def end_offset(self) -> int:
        """The commit-log offset just past this segment."""
        return self.start_offset + self.size_bytes

    @property
    def remaining_bytes(self) -> int:
        return self.size_bytes - self.wrote_position

    def flush(self) -> int:
        """Make what was written so far durable; return the flushed file position.

        Raises:
            OSError: the sync failed.
            ValueError: the segment is closed.
        """
        target = self.wrote_position
        flushed = self.flushed_position
        if target <= flushed:
            return flushed
        if self._pin is None:
            if self._fd < 0:
                raise ValueError(f"segment {self.path} is closed")
            os.fdatasync(self._fd)
        else:
            address = self._acquire_address()
            if not address:
                raise ValueError(f"segment {self.path} is closed")
            try:
                start = flushed & _PAGE_MASK
                sync_mapping_range(address + start, target - start)
            finally:
                self._release_address()
        self.flushed_position = target
        return target

    def find_allocated_end(self) -> None:
        """Set ``allocated_position`` from the file: its first hole (a segment just loaded).

        Data lies before it, so recovery reads no further (see the module docstring).
        """
        self.allocated_position = first_hole(self._fd, self.size_bytes)

    def allocate_to(self, file_position_end: int) -> None:
        """Make sure every byte below ``file_position_end`` has its disk block before it is written.

        Allocates up to a chunk ahead (fewer calls); when the chunk does not fit, exactly what
        was asked. Safe to call from two threads (the writer, the warmer): each one only ever
        raises ``allocated_position`` to a point it allocated itself.

        Raises:
            DiskFullError: the disk has no room for the range: nothing was written.
            ValueError: the segment is closed.
        """
        start = self.allocated_position
        if file_position_end <= start:
            return
        if self._fd < 0:
            raise ValueError(f"segment {self.path} is closed")
        end = min(self.size_bytes, -(-file_position_end // ALLOCATE_CHUNK_BYTES) * ALLOCATE_CHUNK_BYTES)
        what = f"commit-log segment {self.path.name}"
        try:
            reserve_blocks(self._fd, start, end - start, what)
        except OSError:
            if end == file_position_end:
                raise
            end = file_position_end
            reserve_blocks(self._fd, start, end - start, what)
        if end > self.allocated_position:
            self.allocated_position = end

    def populate(self, file_position: int, size_bytes: int) -> bool:
        """Fault ``size_bytes`` from ``file_position`` (page-aligned) in, writable, without the GIL.

        The range's disk blocks are allocated first (:meth:`allocate_to`), so neither this nor
        a later write allocates them page by page, and a full disk is an error here, never a
        fault. Returns False when the pages cannot be faulted in here (no mapping calls, a
        kernel before 5.14, or the segment is closed); they then fault in on first write as
        usual.

        Raises:
            DiskFullError: no room for the range's blocks.
            OSError: the kernel refused for another reason.
        """
        if self._pin is None:
            return False
        address = self._acquire_address()
        if not address:
            return False
        try:
            self.allocate_to(file_position + size_bytes)
            return populate_mapping(address + file_position, size_bytes)
        finally:
            self._release_address()

    def read(self, file_position: int, size_bytes: int) -> bytes:
        """A copy of ``size_bytes`` from ``file_position`` (clipped to what was written)."""
        end = min(file_position + size_bytes, self.wrote_position)
        if file_position < 0 or end <= file_position:
            return b""
        return self.buffer[file_position:end]

    def read_file(self, file_position: int, size_bytes: int) -> bytes:
        """``size_bytes`` from ``file_position`` read from the file, not the mapping (pread).

        For bytes past ``allocated_position`` of a loaded segment: a read never faults, and
        a hole reads as zeros without allocating (on tmpfs a read fault on a hole does).
        """
        if self._fd < 0:
            raise ValueError(f"segment {self.path} is closed")
        return os.pread(self._fd, size_bytes, file_position)

    def zero_from(self, file_position: int) -> None:
        """Discard everything from ``file_position`` on (a torn tail), durably.

        The file is cut and re-extended, which zeroes the tail without writing it; the
        mapping is dropped around the cut so that no access can fault on a short file.
        """
        self._unmap()
        os.ftruncate(self._fd, file_position)
        os.ftruncate(self._fd, self.size_bytes)
        os.fsync(self._fd)
        self._map()
        self.wrote_position = min(self.wrote_position, file_position)
        self.flushed_position = min(self.flushed_position, file_position)
        self.populated_position = min(self.populated_position, file_position & _PAGE_MASK)
        self.allocated_position = min(self.allocated_position, file_position)

    def modified_time_ms(self) -> int:
        return int(os.fstat(self._fd).st_mtime * 1000)

    def close(self) -> None:
        """Unmap and close (idempotent). Data already copied stays in the page cache."""
        if self._fd < 0:
            return
        self._unmap()
        os.close(self._fd)
        self._fd = -1

    def delete(self) -> None:
        """Close and remove the file."""
        self.close()
        self.path.unlink(missing_ok=True)


class MappedFileQueue:
    """The ordered segments of one log in ``directory``."""

    def __init__(self, directory: Path, size_bytes: int) -> None:
        self.directory = directory
        self.size_bytes = size_bytes
        self.files: list[MappedFile] = []

    def load(self) -> None:
        """Map every existing segment, with all positions at the segment end (recovery fixes them).

        Raises:
            StoreError: a segment has the wrong size or the segments are not contiguous.
        """
        expected_start: int | None = None
        segments = list_segments(self.directory)
        for start, path in segments:
            actual_bytes = path.stat().st_size
            if actual_bytes < self.size_bytes and path == segments[-1][1]:
                # A crash while the newest segment was being created: MappedFile extends it.
                actual_bytes = self.size_bytes
            if actual_bytes != self.size_bytes:
                raise StoreError(
                    f"segment {path} is {actual_bytes} bytes, expected {self.size_bytes} "
                    "(was the segment size changed?)"
                )
            if expected_start is not None and start != expected_start:
                raise StoreError(
                    f"segment {path} does not follow the previous one (expected {expected_start})"
                )
            mapped = MappedFile(path, start, self.size_bytes)
            mapped.wrote_position = mapped.flushed_position = self.size_bytes
            mapped.find_allocated_end()
            self.files.append(mapped)
            expected_start = start + self.size_bytes

    @property
    def min_offset(self) -> int:
        return self.files[0].start_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """The offset just past the last written byte."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.start_offset + last.wrote_position

    @property
    def flushed_offset(self) -> int:
        if not self.files:
            return 0
        for mapped in reversed(self.files):
            if mapped.flushed_position > 0 or mapped is self.files[0]:
                return mapped.start_offset + mapped.flushed_position
        return 0  # pragma: no cover - the loop always returns at the first file

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def create(self, start_offset: int) -> MappedFile:
        """Create and append the segment starting at ``start_offset``."""
        mapped = MappedFile(self.directory / segment_name(start_offset), start_offset, self.size_bytes)
        fsync_directory(self.directory)
        self.files.append(mapped)
        return mapped

    def find(self, commit_log_offset: int) -> MappedFile | None:
        """The segment holding ``commit_log_offset``, or None when no segment does."""
        files = self.files
        if not files:
            return None
        index = (commit_log_offset - files[0].start_offset) // self.size_bytes
        if 0 <= index < len(files):
            return files[index]
        return None

    def truncate_after(self, commit_log_offset: int) -> None:
        """Drop everything at and after ``commit_log_offset`` (later segments are deleted)."""
        while self.files and self.files[-1].start_offset > commit_log_offset:
            self.files.pop().delete()
        if self.files and self.files[-1].start_offset == commit_log_offset and len(self.files) > 1:
            # An empty last segment would only hold zeros; keep the log ending in a used one.
            self.files.pop().delete()
        last = self.last()
        if last is not None:
            file_position = commit_log_offset - last.start_offset
            if file_position < last.size_bytes:
                last.zero_from(file_position)
            last.wrote_position = last.flushed_position = file_position
        fsync_directory(self.directory)

    def reset_to(self, commit_log_offset: int) -> None:
        """Start an empty log at ``commit_log_offset`` (a slave joining mid-stream).

        Raises:
            StoreError: the log is not empty, or the offset is not a segment boundary.
        """
        if self.files:
            raise StoreError(f"cannot reset a non-empty commit log to offset {commit_log_offset}")
        if commit_log_offset % self.size_bytes:
            raise StoreError(f"commit-log offset {commit_log_offset} is not a segment boundary")
        self.create(commit_log_offset)

    def close(self) -> None:
        for mapped in self.files:
            mapped.close()
