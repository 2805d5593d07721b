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

Warming. The first write to each page of a fresh segment traps into the kernel, which
allocates the page: on a virtual machine that costs more than copying the record. When
``warm_window_bytes`` is set, a :class:`CommitLogWarmer` thread keeps that many bytes past
the write position faulted in ahead of time, in one madvise per chunk with the GIL
released, so the put path, holding the store lock, only copies. It is RocketMQ's
``warmMapedFileEnable`` done a window at a time rather than a whole segment at creation.

This module also checks records read back from disk (:func:`check_record`), for crash
recovery and the offline verifier; a record fails unless its magic code, sizes, body CRC
and PHYSICALOFFSET (equal to its own position) all agree.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future
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
from orbitmq.store._fs import DiskFullError, failpoints, list_segments
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


class FlushFuture(Future[bool]):
    """The future of a flush group, whose blocking :meth:`result` scales to many waiting threads.

    ``Future.result`` sleeps on the future's one shared Condition, so when a group commit
    resolves the future that 64 threads wait on, every woken thread must re-take that lock in
    turn before it can return: a convoy that costs more than the fsync it waited for. Here
    each waiting thread sleeps on a lock of its own, released by the resolution, and finds the
    result already final when it wakes. Callbacks and ``asyncio.wrap_future`` work as for any
    Future.
    """

    def __init__(self) -> None:
        super().__init__()
        self._sleepers: list[threading.Lock] = []
        self._sleepers_lock = threading.Lock()

    def result(self, timeout: float | None = None) -> bool:
        if not self.done():
            sleeper = threading.Lock()
            sleeper.acquire()
            with self._sleepers_lock:
                # Checked again under the lock: a resolution that already woke the sleepers
                # must not leave this one waiting.
                sleeping = not self.done()
                if sleeping:
                    self._sleepers.append(sleeper)
            if sleeping:
                sleeper.acquire(timeout=-1 if timeout is None else timeout)
        return super().result(timeout=0)

    def set_result(self, result: bool) -> None:
        super().set_result(result)
        self._wake_sleepers()

    def set_exception(self, exception: BaseException | None) -> None:
        super().set_exception(exception)
        self._wake_sleepers()

    def _wake_sleepers(self) -> None:
        with self._sleepers_lock:
            sleepers, self._sleepers = self._sleepers, []
        for sleeper in sleepers:
            sleeper.release()


class _FlushGroup:
    """Puts waiting for one flush: the highest end offset among them, the first's deadline."""

    __slots__ = ("deadline", "end_offset", "future", "woken")

    def __init__(self, end_offset: int, deadline: float, future: Future[bool]) -> None:
        self.end_offset = end_offset
        self.deadline = deadline
        self.future = future
        self.woken = False  # the thread was told about this group


class CommitLogFlusher:
    """The flush thread: periodic fdatasync (ASYNC_FLUSH) or group commit (SYNC_FLUSH).

    Under SYNC_FLUSH puts join the open *flush group*: (highest end offset, deadline,
    future), the deadline and future being those of its first put. The thread takes every
    group waiting at that moment, runs one flush, which covers them all (group commit), and
    resolves each group's future True; a group still not covered by its deadline resolves
    False (FLUSH_DISK_TIMEOUT). Sharing one future per group makes a put's cost one lock
    round trip instead of a future, a wake-up and a resolution per put; the price is that a
    put joining a group late may time out up to one flush round (normally about a
    millisecond) before its own timeout would have passed. Under ASYNC_FLUSH the thread
    flushes every ``interval_ms`` and puts get no future.

    :meth:`flush_here` lets a caller that has nothing else to do flush in its own thread
    instead, when the thread is not flushing at that moment: the broker's event loop does
    so for a lone SYNC_FLUSH put, sparing the two thread hand-offs of the round trip. One
    lock keeps the two from flushing at once; the groups a caller's flush covers are
    resolved by it.
    """

    def __init__(self, commit_log: CommitLog, sync: bool, interval_ms: int, timeout_ms: int) -> None:
        self._commit_log = commit_log
        self._sync = sync
        self._interval_s = interval_ms / 1000
        self._timeout_s = timeout_ms / 1000
        # Puts take the plain lock (a C-level context manager); the thread waits on the condition.
        self._lock = threading.Lock()
        self._condition = threading.Condition(self._lock)
        self._flushing = threading.Lock()  # held by whoever runs a flush: the thread or flush_here
        self._requests: list[_FlushGroup] = []
        self._open_group: _FlushGroup | None = None  # the group new puts join (not yet taken)
        self._stopping = False
        self._stopped = False  # the thread has finished; requests resolve at once
        self._thread = threading.Thread(target=self._run, name="orbitmq-commit-log-flush", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request(self, end_offset: int, wake: bool = True) -> Future[bool]:
        """A future resolved once ``end_offset`` is flushed (True) or the timeout passes (False).

        Puts waiting for the same flush share one future (see the class docstring). With
        ``wake`` False the thread is not told yet: the caller will call :meth:`flush_here`
        or :meth:`wake` (until then the thread still looks every 10 ms).
        """
        with self._lock:
            group = self._open_group
            if group is not None:
                if end_offset > group.end_offset:
                    group.end_offset = end_offset
            else:
                future: Future[bool] = FlushFuture()
                if self._stopped:
                    # A put that raced with close(): the final flush already ran (or failed).
                    future.set_result(end_offset <= self._commit_log.flushed_offset)
                    return future
                # Running futures cannot be cancelled: one waiter giving up (asyncio.wrap_future
                # propagates a cancelled await) must not cancel the answer of the whole group.
                future.set_running_or_notify_cancel()
                group = self._open_group = _FlushGroup(end_offset, time.monotonic() + self._timeout_s, future)
                self._requests.append(group)
            if wake and not group.woken:
                group.woken = True
                self._condition.notify()
            return group.future

    def wake(self) -> None:
        """Tell the thread about every group waiting (see ``wake`` of :meth:`request`)."""
        with self._lock:
            self._wake_locked()

    def _wake_locked(self) -> None:
        if any(not group.woken for group in self._requests):
            for group in self._requests:
                group.woken = True
            self._condition.notify()

    def _run(self) -> None:
        while True:
            with self._condition:
                if not self._requests and not self._stopping:
                    self._condition.wait(self._interval_s if not self._sync else 0.01)
                stopping = self._stopping
                requests, self._requests = self._requests, []
                self._open_group = None
            with self._flushing:
                try:
                    flushed = self._commit_log.flush()
                except OSError:
                    _log.exception("commit log flush failed")
                    flushed = self._commit_log.flushed_offset
            if self._resolve(requests, flushed):
                # Some puts are still not covered (a failing disk): do not spin.
                time.sleep(0.001)
            if stopping:
                with self._condition:
                    self._stopped = True
                    late, self._requests = self._requests, []
                    self._open_group = None
                self._resolve(late, self._commit_log.flushed_offset)
                return

    def flush_here(self, end_offset: int) -> bool:
        """Flush in the calling thread, unless a flush is running; True once ``end_offset`` is durable.

        False when the thread (or another caller) is flushing at that moment, when the flush
        fails, or after :meth:`stop`: the caller then waits for its put's future as usual,
        which the thread resolves (and which reports a failing disk as a timeout). Groups the
        flush covers are resolved here, so no later put joins them: True, or False past their
        deadline, as the thread answers.
        """
        if self._stopped or not self._flushing.acquire(blocking=False):
            self.wake()
            return False
        try:
            flushed = self._commit_log.flush()
        except OSError:
            _log.exception("commit log flush failed")
            self.wake()
            return False
        finally:
            self._flushing.release()
        covered = []
        with self._lock:
            if self._requests:
                covered = [group for group in self._requests if group.end_offset <= flushed]
                if covered:
                    self._requests = [group for group in self._requests if group.end_offset > flushed]
                    if self._open_group is not None and self._open_group.end_offset <= flushed:
                        self._open_group = None
                self._wake_locked()  # groups this flush did not cover are the thread's
        now = time.monotonic()
        for group in covered:
            if not group.future.done():
                group.future.set_result(now < group.deadline)  # late is a timeout, as in _resolve
        return end_offset <= flushed

    def _resolve(self, requests: list[_FlushGroup], flushed: int) -> bool:
        now = time.monotonic()
        waiting = []
        for group in requests:
            if now >= group.deadline:
                # Answer as RocketMQ does: late is a timeout even if the flush then succeeded.
                group.future.set_result(False)
            elif group.end_offset <= flushed:
                group.future.set_result(True)
            elif self._stopping:
                group.future.set_result(False)
            else:
                waiting.append(group)
        if waiting:
            with self._condition:
                self._requests[:0] = waiting
        return bool(waiting)

    def stop(self) -> None:
        """Flush once more, resolve every waiting future and end the thread."""
        with self._condition:
            self._stopping = True
            self._condition.notify()
        if self._thread.is_alive():
            self._thread.join()


class CommitLogWarmer:
    """Keeps ``window_bytes`` past the log's write position faulted in (see the module docstring).

    The thread sleeps until a write reaches the last segment's ``warm_mark`` (half a window
    before the populated end), then populates up to a window past the write position, one
    ``chunk_bytes`` madvise at a time, each chunk's blocks allocated first (a full disk ends
    the round, and the next write past the mark starts another). Populated pages hold zeros until written; flushes
    sync only written ranges, so they are not written back early. A kernel without
    MADV_POPULATE_WRITE (before 5.14) ends the thread at its first attempt: writes then
    fault pages in themselves, as they do without a warmer.
    """

    def __init__(self, commit_log: CommitLog, window_bytes: int, chunk_bytes: int = 2 << 20) -> None:
        self._commit_log = commit_log
        self._window = max(window_bytes, mmap.PAGESIZE) & ~(mmap.PAGESIZE - 1)
        self._chunk = min(max(chunk_bytes, mmap.PAGESIZE) & ~(mmap.PAGESIZE - 1), self._window)
        self._wake = threading.Event()
        self._stopping = False
        self.populated_bytes = 0  # in all, for tests and metrics
        self.disk_full_rounds = 0  # rounds that stopped because the disk was full
        self._thread = threading.Thread(target=self._run, name="orbitmq-commit-log-warm", daemon=True)

    def start(self) -> None:
        """Attach to the log (new segments get a warm mark) and start the thread."""
        last = self._commit_log.segments.last()
        if last is not None:
            last.warm_mark = 0
        self._commit_log.wake_warmer = self._wake.set
        self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            segment = self._commit_log.segments.last()
            if segment is None:
                continue
            try:
                if not self._warm(segment):
                    _log.info("commit-log warming is not available here (MADV_POPULATE_WRITE)")
                    self._commit_log.wake_warmer = None
                    return
            except DiskFullError:
                # Nothing is faulted in without its blocks: the writer allocates what it
                # needs itself (and refuses puts while the disk is full); warm again later.
                segment.warm_mark = segment.wrote_position + self._window // 2
                self.disk_full_rounds += 1
            except OSError:
                _log.exception("commit-log warming of %s failed; it stops", segment.path)
                self._commit_log.wake_warmer = None
                return

    def _warm(self, segment: MappedFile) -> bool:
        """Populate up to a window past ``segment``'s write position; False when unsupported."""
        size = segment.size_bytes
        position = max(segment.populated_position, segment.wrote_position & ~(mmap.PAGESIZE - 1))
        segments = self._commit_log.segments
        while not self._stopping and segments.last() is segment:
            target = min(segment.wrote_position + self._window, size)
            if position >= target:
                break
            page = mmap.PAGESIZE
            step = min(self._chunk, (target - position + page - 1) // page * page, size - position)
            if not segment.populate(position, step):
                return segment.buffer.closed  # a segment closed meanwhile is no failure
            position += step
            segment.populated_position = position
            self.populated_bytes += step
        # Woken again once writes have used half of what is populated ahead of them.
        mark = position - self._window // 2
        if position < size:
            segment.warm_mark = max(mark, segment.wrote_position + 1)
            if segment.wrote_position >= segment.warm_mark:
                self._wake.set()  # the writer passed it while this was being set
        return True

    def stop(self) -> None:
        """End the thread (waits for the chunk in progress) and detach from the log."""
        self._commit_log.wake_warmer = None
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
