"""TimerLog: the append-only log of pending timers, one fixed-size record per timed message.

Each record says where a timed message sits in the CommitLog and when it is due, and links to
the previous record of the same time-wheel slot, so a slot's timers form a singly linked list
from the newest record backwards (the wheel, ``store.timer_wheel``, holds each list's head).
Records are never rewritten; a timer is "done" once the wheel's dequeue time has passed it.

Record layout (big-endian, 32 bytes):

| offset | size | field |
| --- | --- | --- |
| 0 | 8 | commit_log_offset (long): the timed message's record in the CommitLog |
| 8 | 4 | size (int): that record's TOTALSIZE |
| 12 | 8 | due_ms (long): delivery time, ms since the epoch |
| 20 | 8 | prev_log_position (long): previous record of the same slot, -1 at the end of the list |
| 28 | 4 | magic (int): 0x54494D52 ("TIMR"); anything else is not a record |

A log position is the byte position of a record in the whole log. The log is split into
segment files named by the 20-digit position of their first byte (as the CommitLog is), so
segments whose timers are all past can be deleted. New records are buffered in memory and
written to their segment by :meth:`TimerLog.write_out`; :meth:`TimerLog.sync` makes them
durable. Reads see buffered records too.

Not thread-safe: one owner (the broker's timer service) appends and reads; only
:meth:`TimerLog.sync` may run on another thread, concurrently with appends.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from orbitmq.errors import CorruptRecordError

RECORD = struct.Struct(">qiqqi")
RECORD_BYTES = RECORD.size
RECORD_MAGIC = 0x54494D52
NO_POSITION = -1


@dataclass(frozen=True, slots=True)
class TimerRecord:
    """One pending timer."""

    log_position: int
    commit_log_offset: int
    size: int
    due_ms: int
    prev_log_position: int


class TimerLog:
    """Segmented append-only timer log under one directory."""

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        if segment_bytes < RECORD_BYTES or segment_bytes % RECORD_BYTES:
            raise ValueError(f"timer log segment size {segment_bytes} is not a multiple of {RECORD_BYTES}")
        self.directory = directory
        self.segment_bytes = segment_bytes
        self._fds: dict[int, int] = {}  # segment start -> open descriptor
        self._written = 0  # log bytes already in segment files
        self._pending = bytearray()  # appended, not yet written out
        self.min_position = 0  # first byte of the oldest segment kept
        # Latest due time per segment: a segment may go once its latest timer is past.
        self.segment_due_max_ms: dict[int, int] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    def load(self) -> None:
        """Open the segments on disk; a torn tail (partial record) is cut off."""
        self.directory.mkdir(parents=True, exist_ok=True)
        starts = sorted(int(path.name) for path in self.directory.iterdir() if path.name.isdigit())
        for start in starts:
            self._open_segment(start)
        if starts:
            last = starts[-1]
            length = os.fstat(self._fds[last]).st_size
            length -= length % RECORD_BYTES
            os.ftruncate(self._fds[last], length)
            self._written = last + length
            self.min_position = starts[0]
        else:
            self._written = self.min_position = 0

    def close(self) -> None:
        self.write_out()
        for fd in self._fds.values():
            os.fsync(fd)
            os.close(fd)
        self._fds.clear()

    def destroy(self) -> None:
        """Delete every segment and start empty at position 0."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        if self.directory.is_dir():
            for path in self.directory.iterdir():
                if path.name.isdigit():
                    path.unlink()
        self._pending.clear()
        self._written = self.min_position = 0
        self.segment_due_max_ms.clear()

    @property
    def end_position(self) -> int:
        """Position the next record will get."""
        return self._written + len(self._pending)

    @property
    def written_position(self) -> int:
        """Bytes already handed to the segment files (durable after the next :meth:`sync`)."""
        return self._written

    # -- records ------------------------------------------------------------------------------

    def append(self, commit_log_offset: int, size: int, due_ms: int, prev_log_position: int) -> int:
        """Add one record; returns its log position."""
        position = self.end_position
        self._pending += RECORD.pack(commit_log_offset, size, due_ms, prev_log_position, RECORD_MAGIC)
        start = position - position % self.segment_bytes
        if due_ms > self.segment_due_max_ms.get(start, -1):
            self.segment_due_max_ms[start] = due_ms
        return position

    def read(self, log_position: int) -> TimerRecord:
        """The record at ``log_position``.

        Raises:
            CorruptRecordError: no valid record there (outside the log or bad magic).
        """
        if log_position < self.min_position or log_position + RECORD_BYTES > self.end_position:
            raise CorruptRecordError(
                f"timer log position {log_position} is outside [{self.min_position}, {self.end_position})"
            )
        if log_position >= self._written:
            start = log_position - self._written
            data = bytes(self._pending[start : start + RECORD_BYTES])
        else:
            segment = log_position - log_position % self.segment_bytes
            data = os.pread(self._fds[segment], RECORD_BYTES, log_position - segment)
        return self._decode(log_position, data)

    def scan(self, start_position: int, end_position: int) -> list[TimerRecord]:
        """Every record in ``[start_position, end_position)`` of the written part, in log order."""
        records: list[TimerRecord] = []
        position = max(start_position, self.min_position)
        end_position = min(end_position, self._written)
        while position < end_position:
            segment = position - position % self.segment_bytes
            chunk_end = min(end_position, segment + self.segment_bytes)
            data = os.pread(self._fds[segment], chunk_end - position, position - segment)
            for index in range(len(data) // RECORD_BYTES):
                records.append(self._decode(position + index * RECORD_BYTES, data, index * RECORD_BYTES))
            position = chunk_end
        return records

    @staticmethod
    def _decode(log_position: int, data: bytes, at: int = 0) -> TimerRecord:
        if len(data) < at + RECORD_BYTES:
            raise CorruptRecordError(f"timer log record at position {log_position} is truncated")
        commit_log_offset, size, due_ms, prev, magic = RECORD.unpack_from(data, at)
        if magic != RECORD_MAGIC:
            raise CorruptRecordError(f"timer log record at position {log_position} has bad magic {magic:#x}")
        return TimerRecord(log_position, commit_log_offset, size, due_ms, prev)

    # -- durability and retention -------------------------------------------------------------

    def write_out(self) -> None:
        """Hand the buffered records to their segment files (no fsync)."""
        data = memoryview(bytes(self._pending))
        self._pending.clear()
        written = 0
        while written < len(data):
            position = self._written
            segment = position - position % self.segment_bytes
            fd = self._fds.get(segment)
            if fd is None:
                fd = self._open_segment(segment)
            room = segment + self.segment_bytes - position
            chunk = data[written : written + room]
            os.pwrite(fd, chunk, position - segment)
            written += len(chunk)
            self._written += len(chunk)

    def sync(self) -> None:
        """fsync every segment file (may run on another thread)."""
        for fd in list(self._fds.values()):
            try:
                os.fsync(fd)
            except OSError as exc:
                if exc.errno != 9:  # EBADF: the segment was deleted meanwhile
                    raise

    def delete_segments_due_before(self, due_ms: int) -> int:
        """Delete whole segments (never the one being written) whose timers are all before ``due_ms``."""
        current = self.end_position - self.end_position % self.segment_bytes
        deleted = 0
        for start in sorted(self._fds):
            if start >= current or start >= self._written:
                break
            due_max = self.segment_due_max_ms.get(start)
            if due_max is None or due_max >= due_ms:
                break
            os.close(self._fds.pop(start))
            (self.directory / f"{start:020d}").unlink(missing_ok=True)
            self.segment_due_max_ms.pop(start, None)
            deleted += 1
        self.min_position = min(self._fds) if self._fds else self._written
        return deleted

    def rebuild_due_max(self) -> None:
        """Recompute the latest due time of every segment by reading it (after a load)."""
        self.segment_due_max_ms.clear()
        for start in sorted(self._fds):
            for record in self.scan(start, start + self.segment_bytes):
                if record.due_ms > self.segment_due_max_ms.get(start, -1):
                    self.segment_due_max_ms[start] = record.due_ms

    def _open_segment(self, start: int) -> int:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / f"{start:020d}", os.O_RDWR | os.O_CREAT, 0o644)
        self._fds[start] = fd
        return fd
