"""The CommitLog: every topic's records appended to one log of fixed-size mapped segments.

Theory of operation. Segments live in ``commitlog/`` and are named by their first
commit-log offset (20 digits). A record (remoting-protocol §3.1) never spans segments:
when a record plus the 8-byte blank header does not fit the tail of the last segment,
the tail becomes one end-of-file blank record (TOTALSIZE = bytes left, MAGICCODE =
0xCBD43194) and the record goes to a new segment. Hence every segment has room for a
blank at its end, and a scanner can always tell "rest of segment unused" from data.

The writer (the store, holding its put lock) asks :meth:`CommitLog.reserve` for room,
packs records straight into the mapping, then publishes them with :meth:`commit`.
Readers look only below ``wrote_position``, so they never see a half-copied record.
The flush thread calls :meth:`flush`, which syncs the ranges written since the last
flush; ``flushed_offset`` only moves forward.

A full disk. :meth:`CommitLog.reserve` gives the records (and the blank that may follow
them) their disk blocks before anything is copied (``MappedFile.allocate_to``), so ENOSPC
raises :class:`~orbitmq.store._fs.DiskFullError` there and the put is refused; a page
without its block is never written, which would kill the process with SIGBUS.

Warming. The first write to each page of a fresh segment traps into the kernel, which
allocates the page: on a virtual machine that costs more than copying the record. When
``warm_window_bytes`` is set, a :class:`CommitLogWarmer` thread keeps that many bytes past
the write position faulted in ahead of time, in one madvise per chunk with the GIL
released, so the put path, holding the store lock, only copies. It is RocketMQ's
``warmMapedFileEnable`` done a window at a time rather than a whole segment at creation.
The warmer (``commit_log_warmer``) and the flush thread (``commit_log_flush``) have modules
of their own.

This module also checks records read back from disk (:func:`check_record`), for crash
recovery and the offline verifier; a record fails unless its magic code, sizes, body CRC
and PHYSICALOFFSET (equal to its own position) all agree.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from enum import Enum
from pathlib import Path

from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageExt, SysFlag
from orbitmq.protocol.message_codec import (
    BLANK_MAGIC_CODE,
    BLANK_RECORD_MIN_BYTES,
    BODYCRC_POSITION,
    MESSAGE_MAGIC_CODE,
    PHYSICALOFFSET_POSITION,
    STORED_FIXED_BYTES_IPV4,
    STORETIMESTAMP_POSITION,
    SYSFLAG_POSITION,
    body_crc32,
    body_length_position,
    decode_stored_message,
    pack_blank_into,
)
from orbitmq.store._fs import failpoints, list_segments

# The flush thread and the warmer live in their own modules; importers may keep finding them here.
from orbitmq.store.commit_log_flush import CommitLogFlusher as CommitLogFlusher
from orbitmq.store.commit_log_flush import FlushFuture as FlushFuture
from orbitmq.store.commit_log_warmer import CommitLogWarmer as CommitLogWarmer
from orbitmq.store.mapped_file import NEVER, MappedFile, MappedFileQueue

_log = logging.getLogger(__name__)

_SIZE_MAGIC = struct.Struct(">ii")
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_IPV6_EXTRA_BYTES = 12
# TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG: the
# fields a skim checks, in one unpack.
_SKIM_HEAD = struct.Struct(">iiiiiqqi")
_SKIM_SIZE_MIN = STORED_FIXED_BYTES_IPV4 + 3
RAW_HEAD_BYTES = 4
"""TOTALSIZE: the bytes a raw append copies last (see :meth:`CommitLog.append_raw`)."""
_HOSTS_V6 = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6


class RecordCheck(Enum):
    """What :func:`check_record` found at a position."""

    MESSAGE = "MESSAGE"  # a valid record
    BLANK = "BLANK"  # the end-of-file blank: continue at the next segment
    END = "END"  # zeros: the end of written data
    CORRUPT = "CORRUPT"  # anything else: a torn or damaged record


def check_record(
    buffer: mmap.mmap | memoryview | bytes,
    file_position: int,
    segment_start_offset: int,
    segment_bytes: int,
    verify_crc: bool = True,
) -> tuple[RecordCheck, int, MessageExt | None]:
    """Check the record at ``file_position`` of a segment.

    Returns (what was found, its size in bytes, the decoded message without its body for
    MESSAGE). Never raises for bad bytes: damage is reported as CORRUPT.
    """
    remaining = segment_bytes - file_position
    if remaining < BLANK_RECORD_MIN_BYTES:
        return RecordCheck.CORRUPT, 0, None
    total_size, magic = _SIZE_MAGIC.unpack_from(buffer, file_position)
    if total_size == 0 and magic == 0:
        return RecordCheck.END, 0, None
    if magic == BLANK_MAGIC_CODE:
        if total_size == remaining:
            return RecordCheck.BLANK, total_size, None
        return RecordCheck.CORRUPT, 0, None
    if magic != MESSAGE_MAGIC_CODE or not STORED_FIXED_BYTES_IPV4 + 3 <= total_size <= remaining:
        return RecordCheck.CORRUPT, 0, None
    view = memoryview(buffer)[file_position : file_position + total_size]
    try:
        message, _ = decode_stored_message(view, 0, decode_body=False)
        if message.commit_log_offset != segment_start_offset + file_position:
            return RecordCheck.CORRUPT, 0, None
        if verify_crc:
            length_position = body_length_position(message.sys_flag)
            (body_len,) = _INT.unpack_from(view, length_position)
            body_start = length_position + 4
            if body_crc32(view[body_start : body_start + body_len]) != message.body_crc:
                return RecordCheck.CORRUPT, 0, None
    except RemoteProtocolError:
        return RecordCheck.CORRUPT, 0, None
    finally:
        view.release()
    return RecordCheck.MESSAGE, total_size, message


def check_record_header(
    buffer: mmap.mmap | memoryview | bytes,
    file_position: int,
    segment_start_offset: int,
    segment_bytes: int,
    verify_crc: bool = False,
) -> tuple[RecordCheck, int]:
    """A cheap check for skipping records: sizes, magic code, PHYSICALOFFSET, optionally the body CRC.

    Nothing is decoded, so a damaged topic or property string is not noticed here.
    """
    remaining = segment_bytes - file_position
    if remaining < BLANK_RECORD_MIN_BYTES:
        return RecordCheck.CORRUPT, 0
    total_size, magic = _SIZE_MAGIC.unpack_from(buffer, file_position)
    if total_size == 0 and magic == 0:
        return RecordCheck.END, 0
    if magic == BLANK_MAGIC_CODE:
        return (RecordCheck.BLANK, total_size) if total_size == remaining else (RecordCheck.CORRUPT, 0)
    if magic != MESSAGE_MAGIC_CODE or not STORED_FIXED_BYTES_IPV4 + 3 <= total_size <= remaining:
        return RecordCheck.CORRUPT, 0
    (physical_offset,) = _LONG.unpack_from(buffer, file_position + PHYSICALOFFSET_POSITION)
    if physical_offset != segment_start_offset + file_position:
        return RecordCheck.CORRUPT, 0
    if verify_crc and not _body_crc_matches(buffer, file_position, total_size):
        return RecordCheck.CORRUPT, 0
    return RecordCheck.MESSAGE, total_size


def skim_records(
    buffer: mmap.mmap,
    file_position: int,
    stop_position: int,
    segment_start_offset: int,
    segment_bytes: int,
    verify_crc: bool,
) -> int:
    """Skip the valid message records from ``file_position``; return where the skim stopped.

    The checks of :func:`check_record_header` (and the body CRC when ``verify_crc``), run in
    one loop: a clean open skims the newest segment's records, millions of them for small
    messages. It stops at ``stop_position`` or at the first record that is not a valid
    message (a blank, zeros, damage), which the caller then examines one by one.
    """
    unpack_head = _SKIM_HEAD.unpack_from
    unpack_int = _INT.unpack_from
    crc32 = zlib.crc32
    head_bytes = _SKIM_HEAD.size
    ipv4_length_position = body_length_position(0)
    with memoryview(buffer) as view:
        while file_position < stop_position and segment_bytes - file_position >= head_bytes:
            total_size, magic, body_crc, _, _, _, physical_offset, sys_flag = unpack_head(
                buffer, file_position
            )
            if (
                magic != MESSAGE_MAGIC_CODE
                or not _SKIM_SIZE_MIN <= total_size <= segment_bytes - file_position
                or physical_offset != segment_start_offset + file_position
            ):
                break
            if verify_crc:
                length_position = file_position + (
                    body_length_position(sys_flag) if sys_flag & _HOSTS_V6 else ipv4_length_position
                )
                (body_len,) = unpack_int(buffer, length_position)
                body_start = length_position + 4
                if body_len < 0 or body_start + body_len > file_position + total_size:
                    break
                if crc32(view[body_start : body_start + body_len]) & 0x7FFFFFFF != body_crc:
                    break
            file_position += total_size
    return file_position


def _body_crc_matches(buffer: mmap.mmap | memoryview | bytes, file_position: int, total_size: int) -> bool:
    (sys_flag,) = _INT.unpack_from(buffer, file_position + SYSFLAG_POSITION)
    length_position = file_position + body_length_position(sys_flag)
    (body_crc,) = _INT.unpack_from(buffer, file_position + BODYCRC_POSITION)
    (body_len,) = _INT.unpack_from(buffer, length_position)
    body_start = length_position + 4
    if body_len < 0 or body_start + body_len > file_position + total_size:
        return False
    with memoryview(buffer) as view:
        return bool(body_crc32(view[body_start : body_start + body_len]) == body_crc)


class CommitLog:
    """The segments of the commit log and the append/read/flush operations on them."""

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.segments = MappedFileQueue(directory, segment_bytes)
        self.segment_bytes = segment_bytes
        self._flushed_offset = 0
        # Set by a CommitLogWarmer: called when a write reaches a segment's warm_mark.
        self.wake_warmer: Callable[[], None] | None = None

    def load(self) -> None:
        """Map the existing segments; recovery then sets the real end with :meth:`truncate_after`."""
        self.segments.load()

    @property
    def min_offset(self) -> int:
        return self.segments.min_offset

    @property
    def max_offset(self) -> int:
        """The offset just past the last published record."""
        return self.segments.max_offset

    @property
    def flushed_offset(self) -> int:
        return self._flushed_offset

    def set_flushed_offset(self, commit_log_offset: int) -> None:
        """Recovery: everything below ``commit_log_offset`` is known to be on disk."""
        self._flushed_offset = commit_log_offset

    # -- writing ------------------------------------------------------------------------------

    def reserve(self, record_bytes: int) -> MappedFile:
        """The segment whose tail can take ``record_bytes`` more (rolling over if needed).

        The caller checked that ``record_bytes + 8 <= segment_bytes`` and holds the put lock.
        The returned segment has disk blocks for the records and the blank that may follow
        them; a segment rolled over is closed by its blank only once the next one has them.

        Raises:
            DiskFullError: no room on the disk: nothing was written, the put is refused.
        """
        last = self.segments.last()
        if last is None:
            return self._new_segment(0, record_bytes + BLANK_RECORD_MIN_BYTES)
        remaining = last.remaining_bytes
        if record_bytes + BLANK_RECORD_MIN_BYTES <= remaining:
            last.allocate_to(last.wrote_position + record_bytes + BLANK_RECORD_MIN_BYTES)
            return last
        if remaining >= BLANK_RECORD_MIN_BYTES:
            last.allocate_to(last.wrote_position + BLANK_RECORD_MIN_BYTES)
        segment = self._new_segment(last.end_offset, record_bytes + BLANK_RECORD_MIN_BYTES)
        failpoints.hit("commit_log.before_blank")
        if remaining >= BLANK_RECORD_MIN_BYTES:
            pack_blank_into(last.buffer, last.wrote_position, remaining)
        last.wrote_position = last.size_bytes
        return segment

    def _new_segment(self, start_offset: int, allocate_bytes: int) -> MappedFile:
        """Create the segment at ``start_offset`` with blocks for its first ``allocate_bytes``.

        Raises:
            DiskFullError: no room for them (the new file is removed again).
        """
        segment = self.segments.create(start_offset)
        try:
            segment.allocate_to(allocate_bytes)
        except OSError:
            self.segments.files.pop()
            segment.delete()
            raise
        if self.wake_warmer is not None:
            segment.warm_mark = 0  # its first write wakes the warmer
        return segment

    def commit(self, segment: MappedFile, file_position_end: int) -> None:
        """Publish the records packed below ``file_position_end`` to readers and the flusher."""
        failpoints.hit("commit_log.after_write")
        segment.wrote_position = file_position_end
        if file_position_end >= segment.warm_mark:
            self._wake_warmer(segment)

    def _wake_warmer(self, segment: MappedFile) -> None:
        segment.warm_mark = NEVER  # until the warmer sets the next one
        wake = self.wake_warmer
        if wake is not None:
            wake()

    def append_raw(self, commit_log_offset: int, data: bytes | memoryview) -> bool:
        """Append replicated bytes at exactly the current end (they may cross segment ends).

        Returns False when ``commit_log_offset`` is not the end of the log. The first
        :data:`RAW_HEAD_BYTES` bytes are copied last: when ``data`` starts at a record, as the
        store's whole-record appends do, a process killed during the copy leaves a zero
        TOTALSIZE under a written MAGICCODE there, which recovery reads as a torn record and
        cuts, together with everything after it. So no record whose tail was never copied
        can pass recovery's checks (a zero-filled topic or property string would).
        """
        if not self.segments.files:
            if commit_log_offset % self.segment_bytes:
                return False
            self._new_segment(commit_log_offset, 0)
            self._flushed_offset = commit_log_offset
        if commit_log_offset != self.max_offset:
            return False
        view = memoryview(data)
        pieces = self._allocate_raw(len(view))
        head_segment: MappedFile | None = None
        head_position = head_bytes = 0
        position = 0
        for last, count in pieces:
            start = last.wrote_position
            if head_segment is None:
                head_segment, head_position, head_bytes = last, start, min(RAW_HEAD_BYTES, count)
                last.buffer[start + head_bytes : start + count] = view[head_bytes:count]
            else:
                last.buffer[start : start + count] = view[position : position + count]
            # Readers take the store lock the appender holds, so none sees the head missing.
            last.wrote_position = start + count
            if start + count >= last.warm_mark:
                self._wake_warmer(last)
            position += count
        if head_segment is not None:
            failpoints.hit("commit_log.before_raw_head")
            head_segment.buffer[head_position : head_position + head_bytes] = view[:head_bytes]
        return True

    def _allocate_raw(self, size_bytes: int) -> list[tuple[MappedFile, int]]:
        """Blocks for ``size_bytes`` appended at the end, segments created as needed: (segment, bytes).

        Everything is allocated before a byte is copied, so a full disk appends nothing.

        Raises:
            DiskFullError: no room (segments created here are removed again).
        """
        pieces: list[tuple[MappedFile, int]] = []
        created: list[MappedFile] = []
        last = self.segments.files[-1]
        start = last.wrote_position
        left = size_bytes
        try:
            while left > 0:
                if start == last.size_bytes:
                    last = self._new_segment(last.end_offset, 0)
                    created.append(last)
                    start = 0
                count = min(last.size_bytes - start, left)
                last.allocate_to(start + count)
                pieces.append((last, count))
                left -= count
                start += count
        except OSError:
            for segment in reversed(created):
                self.segments.files.remove(segment)
                segment.delete()
            raise
        return pieces

    # -- reading ------------------------------------------------------------------------------

    def read(self, commit_log_offset: int, size_bytes: int) -> bytes | None:
        """The ``size_bytes`` at ``commit_log_offset``, or None when they are not all published."""
        segment = self.segments.find(commit_log_offset)
        if segment is None:
            return None
        file_position = commit_log_offset - segment.start_offset
        end = file_position + size_bytes
        if size_bytes <= 0 or end > segment.wrote_position:
            return None
        return segment.buffer[file_position:end]

    def published_segment(self, commit_log_offset: int) -> tuple[mmap.mmap, int, int] | None:
        """The segment holding ``commit_log_offset``: its mapping, first offset and published bytes.

        None when no segment holds it. A read of ``size`` bytes at an offset ``o`` of that
        segment succeeds exactly when ``0 < size`` and ``o + size`` is at most the first
        offset plus the published bytes, and answers that slice of the mapping: a reader can
        look at many records in place (under the store lock) before copying any.
        """
        segment = self.segments.find(commit_log_offset)
        if segment is None:
            return None
        return segment.buffer, segment.start_offset, segment.wrote_position

    def read_record(self, commit_log_offset: int) -> bytes | None:
        """The whole message record at ``commit_log_offset`` (its size read from TOTALSIZE).

        None unless a record starts there: its magic code, size and PHYSICALOFFSET (which the
        store wrote as the record's own offset) must all agree, so an offset pointing into a
        record's body does not read the bytes there as a record.
        """
        head = self.read(commit_log_offset, PHYSICALOFFSET_POSITION + 8)
        if head is None:
            return None
        total_size, magic = _SIZE_MAGIC.unpack_from(head)
        if magic != MESSAGE_MAGIC_CODE or total_size < STORED_FIXED_BYTES_IPV4 + 3:
            return None
        if _LONG.unpack_from(head, PHYSICALOFFSET_POSITION)[0] != commit_log_offset:
            return None
        return self.read(commit_log_offset, total_size)

    def read_long(self, commit_log_offset: int) -> int | None:
        """The 8-byte big-endian integer at ``commit_log_offset`` (e.g. a STORETIMESTAMP)."""
        segment = self.segments.find(commit_log_offset)
        if segment is None:
            return None
        file_position = commit_log_offset - segment.start_offset
        if file_position + 8 > segment.wrote_position:
            return None
        value: int = _LONG.unpack_from(segment.buffer, file_position)[0]
        return value

    def store_timestamp_at(self, commit_log_offset: int) -> int:
        """STORETIMESTAMP of the record at ``commit_log_offset`` (-1 when it cannot be read)."""
        head = self.read(commit_log_offset, STORETIMESTAMP_POSITION + _IPV6_EXTRA_BYTES + 8)
        if head is None:
            return -1
        (sys_flag,) = _INT.unpack_from(head, SYSFLAG_POSITION)
        # An IPv6 born host widens BORNHOST by 12 bytes and shifts STORETIMESTAMP with it.
        position = STORETIMESTAMP_POSITION + (_IPV6_EXTRA_BYTES if sys_flag & SysFlag.BORNHOST_V6 else 0)
        timestamp: int = _LONG.unpack_from(head, position)[0]
        return timestamp

    def read_raw(self, commit_log_offset: int, size_max: int) -> bytes:
        """Published bytes from ``commit_log_offset``, at most ``size_max``, within one segment."""
        segment = self.segments.find(commit_log_offset)
        if segment is None:
            return b""
        return segment.read(commit_log_offset - segment.start_offset, size_max)

    # -- durability and truncation -------------------------------------------------------------

    def flush(self) -> int:
        """Sync every segment written since the last flush; return the flushed offset."""
        target = self.max_offset
        if target <= self._flushed_offset:
            return self._flushed_offset
        for segment in list(self.segments.files):
            if segment.end_offset <= self._flushed_offset or segment.start_offset >= target:
                continue
            failpoints.hit("commit_log.before_fsync")
            try:
                segment.flush()
            except (OSError, ValueError):
                # Retention closed this (old, already flushed) segment meanwhile.
                continue
        self._flushed_offset = max(self._flushed_offset, target)
        return self._flushed_offset

    def truncate_after(self, commit_log_offset: int) -> None:
        """Make ``commit_log_offset`` the end of the log, zeroing anything after it."""
        self.segments.truncate_after(commit_log_offset)
        self._flushed_offset = min(self._flushed_offset, commit_log_offset)

    def close(self) -> None:
        self.segments.close()


def iterate_commit_log(
    store_path: Path, segment_bytes: int, verify_crc: bool = True
) -> Iterator[tuple[int, int, MessageExt]]:
    """Yield (commit-log offset, record size, message without body) for each valid record.

    Reads ``<store_path>/commitlog`` read-only and stops at the end of written data or at
    the first record that fails its checks (everything after it is not trusted).
    """
    for start_offset, path in list_segments(Path(store_path) / "commitlog"):
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size != segment_bytes or size == 0:
                return
            with mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) as buffer:
                file_position = 0
                while file_position < size:
                    found, record_size, message = check_record(
                        buffer, file_position, start_offset, size, verify_crc
                    )
                    if found is RecordCheck.BLANK:
                        break
                    if found is not RecordCheck.MESSAGE or message is None:
                        return
                    yield start_offset + file_position, record_size, message
                    file_position += record_size
