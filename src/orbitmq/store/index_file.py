"""One IndexFile: a memory-mapped hash table from message keys to commit-log offsets.

This module owns the on-disk layout of a single index file (remoting-protocol §6.3, RocketMQ's
``IndexFile``) and nothing else: it does not know file names, rolling, or which keys a message
carries (see ``index_service.py``). All integers are big-endian, as Java's ``ByteBuffer`` writes them.

::

    +--------------+------------------------------+----------------------------------------+
    | header (40)  | slot table (hash_slot_num*4) | entries (index_num*20), entry 0 unused |
    +--------------+------------------------------+----------------------------------------+

Header, 40 bytes:

    ========  ====  ======================================================================
    bytes     type  field
    ========  ====  ======================================================================
    0..7      long  begin_timestamp_ms: store time of the first entry (0 while empty)
    8..15     long  end_timestamp_ms: store time of the newest entry
    16..23    long  begin_commit_log_offset: commit-log offset of the first entry
    24..31    long  end_commit_log_offset: commit-log offset of the newest entry
    32..35    int   hash_slot_count: slots that hold a chain (informational)
    36..39    int   index_count: next entry number to write; starts at 1
    ========  ====  ======================================================================

Slot, 4 bytes at ``40 + (key_hash % hash_slot_num) * 4``: int, the entry number of the newest entry
in that bucket, 0 when the bucket is empty.

Entry, 20 bytes at ``40 + hash_slot_num * 4 + entry_number * 20``:

    ========  ====  ======================================================================
    bytes     type  field
    ========  ====  ======================================================================
    0..3      int   key_hash: abs(Java ``String.hashCode("<topic>#<key>")``), 0 for MIN_VALUE
    4..11     long  commit_log_offset of the message
    12..15    int   time_delta_s: whole seconds since begin_timestamp_ms (clamped to >= 0)
    16..19    int   prev_entry_number: the previous entry in the same bucket, 0 = end of chain
    ========  ====  ======================================================================

Theory of operation. Keys arrive in runs (:meth:`IndexFile.put_hashes`, one run per write-out of
the service's queue), and a run is written with array operations in three steps: all its entries
(past ``index_count``, so no reader or reload counts them yet), then the slots of the buckets it
touched, then the header with the new ``index_count``. A process kill at any point is recoverable:
before the slot writes nothing visible changed; between the slot writes and the header some slots
name entries the header does not count, and each such entry still holds its predecessor, so
:meth:`IndexFile.repair_slots` follows the chain back to the bucket's previous head. Readers treat
any slot or chain link that is not below ``index_count`` as the end of the chain, and chains must
strictly decrease, so a damaged file can return wrong offsets (the caller re-checks keys) but can
never loop. (Files written one entry at a time, entry then header then slot, may instead have lost
only the newest entry's slot write: :meth:`IndexFile.repair_tail` relinks it.)

Entries are appended in non-decreasing commit-log order (the service enforces it), so the entries at or
after a commit-log offset are always a suffix of the file; :meth:`IndexFile.truncate_after` relies on it.
"""

from __future__ import annotations

import array
import errno
import mmap
import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orbitmq.errors import CorruptRecordError
from orbitmq.store._fs import DiskFullError, failpoints, reserve_blocks

# The key hashes live with their vectorised form; importers may keep finding them here.
from orbitmq.store._key_hash import index_key_hash as index_key_hash
from orbitmq.store._key_hash import index_key_hashes as index_key_hashes

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

HEADER_SIZE_BYTES = 40
SLOT_SIZE_BYTES = 4
ENTRY_SIZE_BYTES = 20

# RocketMQ's defaults (maxHashSlotNum, maxIndexNum): a 420,000,040-byte sparse file.
DEFAULT_HASH_SLOT_NUM = 5_000_000
DEFAULT_INDEX_NUM = 20_000_000

_INT_MAX = 0x7FFFFFFF
# Entry blocks are allocated this far ahead of the writes at a time.
_ENTRY_ALLOCATE_BYTES = 256 << 10
_PAGE_BYTES = mmap.PAGESIZE
# An entry's stored time has whole-second granularity, so its real store time lies anywhere in
# [reconstructed, reconstructed + this]; queries widen by it so that nothing in range is missed.
_TIME_SLACK_MS = 999

_HEADER = struct.Struct(">qqqqii")
_SLOT = struct.Struct(">i")
_ENTRY = struct.Struct(">iqii")
_ZERO_ENTRY = bytes(ENTRY_SIZE_BYTES)
# One entry as a numpy record: packed, big-endian, the same 20 bytes as _ENTRY.
_ENTRY_FIELDS = [
    ("key_hash", ">i4"),
    ("commit_log_offset", ">i8"),
    ("time_delta_s", ">i4"),
    ("prev_entry_number", ">i4"),
]


@dataclass(frozen=True, slots=True)
class IndexHeader:
    """The 40-byte header of an index file."""

    begin_timestamp_ms: int = 0
    end_timestamp_ms: int = 0
    begin_commit_log_offset: int = 0
    end_commit_log_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One 20-byte entry of an index file."""

    key_hash: int
    commit_log_offset: int
    time_delta_s: int
    prev_entry_number: int


def encode_header(header: IndexHeader) -> bytes:
    """The 40 bytes of ``header``."""
    return _HEADER.pack(
        header.begin_timestamp_ms,
        header.end_timestamp_ms,
        header.begin_commit_log_offset,
        header.end_commit_log_offset,
        header.hash_slot_count,
        header.index_count,
    )


def decode_header(data: bytes) -> IndexHeader:
    """Parse a 40-byte header. Raises CorruptRecordError when ``data`` is not 40 bytes."""
    if len(data) != HEADER_SIZE_BYTES:
        raise CorruptRecordError(f"index header is {len(data)} bytes, expected {HEADER_SIZE_BYTES}")
    return IndexHeader(*_HEADER.unpack(data))


def encode_entry(entry: IndexEntry) -> bytes:
    """The 20 bytes of ``entry``."""
    return _ENTRY.pack(entry.key_hash, entry.commit_log_offset, entry.time_delta_s, entry.prev_entry_number)


def decode_entry(data: bytes) -> IndexEntry:
    """Parse a 20-byte entry. Raises CorruptRecordError when ``data`` is not 20 bytes."""
    if len(data) != ENTRY_SIZE_BYTES:
        raise CorruptRecordError(f"index entry is {len(data)} bytes, expected {ENTRY_SIZE_BYTES}")
    return IndexEntry(*_ENTRY.unpack(data))


def index_file_size_bytes(hash_slot_num: int, index_num: int) -> int:
    """The size of an index file with this geometry."""
    return HEADER_SIZE_BYTES + hash_slot_num * SLOT_SIZE_BYTES + index_num * ENTRY_SIZE_BYTES


class IndexFile:
    """One memory-mapped index file. Not thread-safe: :class:`IndexService` serialises access.

    Use :meth:`create` for a new file and :meth:`open` for an existing one.
    """

    def __init__(self, path: Path, fd: int, mapped: mmap.mmap, hash_slot_num: int, index_num: int) -> None:
        self.path = path
        self._fd = fd
        self._mapped = mapped
        self._hash_slot_num = hash_slot_num
        self._index_num = index_num
        self._entries_base = HEADER_SIZE_BYTES + hash_slot_num * SLOT_SIZE_BYTES
        self.dirty = False
        # The header is cached in attributes so that a put never has to read it back.
        header = IndexHeader(*_HEADER.unpack_from(mapped, 0))
        self.begin_timestamp_ms = header.begin_timestamp_ms
        self.end_timestamp_ms = header.end_timestamp_ms
        self.begin_commit_log_offset = header.begin_commit_log_offset
        self.end_commit_log_offset = header.end_commit_log_offset
        self.hash_slot_count = header.hash_slot_count
        self.index_count = header.index_count
        # Blocks behind the mapping (see create): pages of the header and slot table known to
        # have theirs, and the entries below this file position.
        self._slot_pages = bytearray(-(-self._entries_base // _PAGE_BYTES))
        self._entries_allocated_end = self._entry_position(max(self.index_count, 1))

    @classmethod
    def create(cls, path: Path, hash_slot_num: int, index_num: int) -> IndexFile:
        """Create a new, empty file at ``path`` (which must not exist).

        The file is sized with ``ftruncate``, so it is sparse: a default-size file takes no disk
        space until entries are written. No page of the mapping is written before it has its
        disk block, though: each run of keys first allocates the slot-table pages it touches
        and its entries (a chunk ahead), so a full disk is a DiskFullError, never SIGBUS.

        Raises:
            DiskFullError: no room for the header (the file is removed again).
        """
        size_bytes = index_file_size_bytes(hash_slot_num, index_num)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.ftruncate(fd, size_bytes)
            reserve_blocks(fd, 0, min(_PAGE_BYTES, size_bytes), f"index file {path.name}")
            mapped = mmap.mmap(fd, size_bytes)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        _HEADER.pack_into(mapped, 0, 0, 0, 0, 0, 0, 1)
        index_file = cls(path, fd, mapped, hash_slot_num, index_num)
        index_file._slot_pages[0] = 1
        index_file.dirty = True
        return index_file

    @classmethod
    def open(cls, path: Path, hash_slot_num: int, index_num: int) -> IndexFile:
        """Map an existing file. Raises CorruptRecordError when its size does not fit the geometry."""
        size_bytes = index_file_size_bytes(hash_slot_num, index_num)
        fd = os.open(path, os.O_RDWR)
        try:
            actual_size_bytes = os.fstat(fd).st_size
            if actual_size_bytes != size_bytes:
                raise CorruptRecordError(
                    f"index file {path} is {actual_size_bytes} bytes, expected {size_bytes} "
                    f"for {hash_slot_num} slots and {index_num} entries"
                )
            mapped = mmap.mmap(fd, size_bytes)
        except BaseException:
            os.close(fd)
            raise
        index_file = cls(path, fd, mapped, hash_slot_num, index_num)
        index_file._find_slot_pages()
        return index_file

    # -- state -------------------------------------------------------------------------------

    @property
    def entry_count(self) -> int:
        """The number of entries written (entry 0 is never used)."""
        return self.index_count - 1

    @property
    def is_full(self) -> bool:
        return self.index_count >= self._index_num

    @property
    def header(self) -> IndexHeader:
        return IndexHeader(
            self.begin_timestamp_ms,
            self.end_timestamp_ms,
            self.begin_commit_log_offset,
            self.end_commit_log_offset,
            self.hash_slot_count,
            self.index_count,
        )

    def entry(self, entry_number: int) -> IndexEntry:
        """Entry ``entry_number`` as stored (for checks and tests; any number below ``index_num``)."""
        if not 0 <= entry_number < self._index_num:
            raise IndexError(f"entry {entry_number} outside index file {self.path}")
        return IndexEntry(*_ENTRY.unpack_from(self._mapped, self._entry_position(entry_number)))

    def slot(self, key_hash: int) -> int:
        """The raw slot value of the bucket of ``key_hash``."""
        return self._slot_at(self._slot_position(key_hash))

    def _slot_at(self, slot_position: int) -> int:
        """The slot at ``slot_position``: 0 in a page without its disk block, never read there.

        Such a page is a hole, which reads as zeros; on tmpfs even a read fault on a hole
        allocates a page, and on a full file system that is SIGBUS.
        """
        if not self._slot_pages[slot_position // _PAGE_BYTES]:
            return 0
        return int(_SLOT.unpack_from(self._mapped, slot_position)[0])

    def time_matches(self, begin_timestamp_ms: int, end_timestamp_ms: int) -> bool:
        """Whether this file may hold entries stored within [begin, end] (False when empty)."""
        return (
            self.index_count > 1
            and self.begin_timestamp_ms <= end_timestamp_ms
            and self.end_timestamp_ms >= begin_timestamp_ms
        )

    # -- writes ------------------------------------------------------------------------------

    def put_key(self, key_hash: int, commit_log_offset: int, store_timestamp_ms: int) -> bool:
        """Append an entry for ``key_hash``. Returns False when the file is full.

        ``key_hash`` must come from :func:`index_key_hash` (non-negative).
        """
        import numpy as np

        written = self.put_hashes(
            np.array([key_hash], dtype=np.int64),
            np.array([commit_log_offset], dtype=np.int64),
            np.array([store_timestamp_ms], dtype=np.int64),
            0,
        )
        return written == 1

    def put_hashes(
        self,
        key_hashes: npt.NDArray[np.int64],
        commit_log_offsets: npt.NDArray[np.int64],
        store_timestamps_ms: npt.NDArray[np.int64],
        start: int,
    ) -> int:
        """Append an entry per key from position ``start`` of the three parallel arrays.

        Returns the position of the first key not written: the arrays' length unless the file
        filled up. Keys must be in non-decreasing commit-log order (the service sees to it).

        The whole run is written in three steps, in this order, as the module docstring says:
        the entries (past ``index_count``, so invisible), the slots, then the header.
        """
        import numpy as np

        count = min(len(key_hashes) - start, self._index_num - self.index_count)
        if count <= 0:
            return start
        stop = start + count
        hashes = key_hashes[start:stop]
        self._reserve_slot_pages(hashes % self._hash_slot_num)
        self._reserve_entries(self._entry_position(self.index_count + count))
        offsets = commit_log_offsets[start:stop]
        times_ms = store_timestamps_ms[start:stop]
        first_entry = self.index_count
        if first_entry == 1:
            self.begin_timestamp_ms = int(times_ms[0])
            self.begin_commit_log_offset = int(offsets[0])
        entry_numbers = np.arange(first_entry, first_entry + count, dtype=np.int64)
        buckets = hashes % self._hash_slot_num
        slot_table = self._slot_table()
        # Each entry links to the newest earlier entry of its bucket: inside this run when there is
        # one (found by a stable sort on the bucket), else whatever the slot held before the run.
        order = np.argsort(buckets, kind="stable")
        sorted_buckets = buckets[order]
        previous = slot_table[sorted_buckets].astype(np.int64)
        previous[(previous <= 0) | (previous >= first_entry)] = 0
        same_bucket = sorted_buckets[1:] == sorted_buckets[:-1]
        previous[1:][same_bucket] = entry_numbers[order[:-1]][same_bucket]
        prev_entry_numbers = np.empty(count, dtype=np.int64)
        prev_entry_numbers[order] = previous
        entries = np.empty(count, dtype=_ENTRY_FIELDS)
        entries["key_hash"] = hashes
        entries["commit_log_offset"] = offsets
        entries["time_delta_s"] = np.clip((times_ms - self.begin_timestamp_ms) // 1000, 0, _INT_MAX)
        entries["prev_entry_number"] = prev_entry_numbers
        entries_position = self._entry_position(first_entry)
        self._mapped[entries_position : entries_position + count * ENTRY_SIZE_BYTES] = entries.tobytes()
        failpoints.hit("index.after_entries")
        # The newest entry of each bucket touched becomes that bucket's slot.
        newest_of_bucket = np.ones(count, dtype=bool)
        newest_of_bucket[:-1] = ~same_bucket
        slot_table[sorted_buckets[newest_of_bucket]] = entry_numbers[order[newest_of_bucket]]
        del slot_table
        failpoints.hit("index.after_slots")
        self.hash_slot_count += int(np.count_nonzero(prev_entry_numbers == 0))
        self.index_count = first_entry + count
        self.end_timestamp_ms = int(times_ms[-1])
        self.end_commit_log_offset = int(offsets[-1])
        self._write_header()
        self.dirty = True
        return stop

    def _find_slot_pages(self) -> None:
        """Mark the header and slot-table pages that have their blocks (SEEK_DATA), for a file just opened."""
        fd, end = self._fd, self._entries_base
        position = 0
        while position < end:
            try:
                start = os.lseek(fd, position, os.SEEK_DATA)
                stop = min(os.lseek(fd, start, os.SEEK_HOLE), end)
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # no SEEK_DATA here: all of it counts as written
                    self._slot_pages[:] = b"\x01" * len(self._slot_pages)
                return
            if start >= end:
                return
            first, last = start // _PAGE_BYTES, -(-stop // _PAGE_BYTES)
            self._slot_pages[first:last] = b"\x01" * (last - first)
            position = stop

    def _read_slot_table(self) -> bytes:
        """A copy of the slot table read from the file (pread: a hole reads as zeros, never faults)."""
        size_bytes = self._hash_slot_num * SLOT_SIZE_BYTES
        data = os.pread(self._fd, size_bytes, HEADER_SIZE_BYTES)
        return data if len(data) == size_bytes else data + bytes(size_bytes - len(data))

    def _reserve_slot_pages(self, buckets: npt.NDArray[np.int64]) -> None:
        """Blocks for the header page and the slot-table pages of ``buckets`` (each page once).

        Raises:
            DiskFullError: no room for them: nothing was written.
        """
        import numpy as np

        known = np.frombuffer(self._slot_pages, dtype=np.uint8)
        pages = np.unique((HEADER_SIZE_BYTES + buckets * SLOT_SIZE_BYTES) // _PAGE_BYTES)
        pages = np.concatenate((np.zeros(1, dtype=pages.dtype), pages))
        new = pages[known[pages] == 0]
        if not new.size:
            return
        new = np.unique(new)
        for run in np.split(new, np.flatnonzero(np.diff(new) != 1) + 1):
            first, last = int(run[0]), int(run[-1])
            start, end = first * _PAGE_BYTES, min((last + 1) * _PAGE_BYTES, self._entries_base)
            reserve_blocks(self._fd, start, end - start, f"index file {self.path.name}")
            known[first : last + 1] = 1

    def _reserve_entries(self, file_position_end: int) -> None:
        """Blocks for the entries below ``file_position_end``, a chunk ahead when there is room.

        Raises:
            DiskFullError: no room for them: nothing was written.
        """
        start = self._entries_allocated_end
        if file_position_end <= start:
            return
        size_bytes = len(self._mapped)
        end = min(size_bytes, file_position_end + _ENTRY_ALLOCATE_BYTES)
        what = f"index file {self.path.name}"
        try:
            reserve_blocks(self._fd, start, end - start, what)
        except DiskFullError:
            end = file_position_end
            reserve_blocks(self._fd, start, end - start, what)
        self._entries_allocated_end = end

    def _slot_table(self) -> npt.NDArray[np.int32]:
        """A writable big-endian view of the slot table (release it before the file closes)."""
        import numpy as np

        return np.frombuffer(self._mapped, dtype=">i4", count=self._hash_slot_num, offset=HEADER_SIZE_BYTES)

    def truncate_after(self, commit_log_offset: int) -> int:
        """Remove the entries whose commit-log offset is >= ``commit_log_offset``; returns how many.

        RocketMQ has no such operation. Because entries are in non-decreasing commit-log order, the
        removed entries are a suffix; each one is unlinked newest first (its bucket's slot falls back
        to its predecessor) and zeroed, which leaves exactly the file a put sequence without them
        would have written, except that ``end_timestamp_ms`` is rebuilt from the last kept entry's
        seconds delta (rounded up, never later than before).
        """
        import numpy as np

        # Slots it rewrites were written before (they hold the entries it drops); the header
        # page may not have its block in a file from before blocks were allocated ahead.
        self._reserve_slot_pages(np.zeros(0, dtype=np.int64))
        mapped = self._mapped
        entry_number = self.index_count - 1
        while entry_number >= 1:
            entry_position = self._entry_position(entry_number)
            key_hash, entry_commit_log_offset, _, prev_entry_number = _ENTRY.unpack_from(
                mapped, entry_position
            )
            if entry_commit_log_offset < commit_log_offset:
                break
            slot_position = self._slot_position(key_hash)
            if self._slot_at(slot_position) == entry_number:
                _SLOT.pack_into(mapped, slot_position, prev_entry_number)
                if prev_entry_number == 0:
                    self.hash_slot_count -= 1
            mapped[entry_position : entry_position + ENTRY_SIZE_BYTES] = _ZERO_ENTRY
            entry_number -= 1
        removed = self.index_count - 1 - entry_number
        if removed:
            self._set_end_after_truncate(entry_number)
            self.dirty = True
        return removed

    def _set_end_after_truncate(self, last_entry_number: int) -> None:
        self.index_count = last_entry_number + 1
        if last_entry_number == 0:
            self.begin_timestamp_ms = self.end_timestamp_ms = 0
            self.begin_commit_log_offset = self.end_commit_log_offset = 0
            self.hash_slot_count = 0
        else:
            last = self.entry(last_entry_number)
            rebuilt_ms = self.begin_timestamp_ms + last.time_delta_s * 1000 + _TIME_SLACK_MS
            self.end_timestamp_ms = min(self.end_timestamp_ms, rebuilt_ms)
            self.end_commit_log_offset = last.commit_log_offset
        self._write_header()

    def _write_header(self) -> None:
        _HEADER.pack_into(
            self._mapped,
            0,
            self.begin_timestamp_ms,
            self.end_timestamp_ms,
            self.begin_commit_log_offset,
            self.end_commit_log_offset,
            self.hash_slot_count,
            self.index_count,
        )

    # -- reads -------------------------------------------------------------------------------

    def select_commit_log_offsets(
        self,
        key_hash: int,
        max_num: int,
        begin_timestamp_ms: int,
        end_timestamp_ms: int,
        found: list[int],
        seen: set[int],
    ) -> None:
        """Append to ``found`` (newest first, up to ``max_num`` in total) the offsets of ``key_hash``.

        An entry matches when its hash equals ``key_hash`` and its one-second time window
        [begin + delta_s*1000, ... + 999] overlaps [begin_timestamp_ms, end_timestamp_ms]; offsets
        already in ``seen`` are skipped, so a key listed twice for one message is returned once.
        """
        mapped = self._mapped
        index_count = self.index_count
        entry_number = self._slot_at(self._slot_position(key_hash))
        earliest_ms = begin_timestamp_ms - _TIME_SLACK_MS
        while 0 < entry_number < index_count and len(found) < max_num:
            entry_hash, commit_log_offset, time_delta_s, prev_entry_number = _ENTRY.unpack_from(
                mapped, self._entries_base + entry_number * ENTRY_SIZE_BYTES
            )
            entry_ms = self.begin_timestamp_ms + time_delta_s * 1000
            if (
                entry_hash == key_hash
                and earliest_ms <= entry_ms <= end_timestamp_ms
                and commit_log_offset not in seen
            ):
                seen.add(commit_log_offset)
                found.append(commit_log_offset)
            # A chain only ever points at older entries; anything else is damage, so stop.
            if prev_entry_number >= entry_number:
                break
            entry_number = prev_entry_number

    # -- consistency (used when loading after an unclean stop) -------------------------------

    def find_problem(self, check_slots: bool) -> str | None:
        """Describe the first inconsistency of the header and newest entry, or None if none.

        With ``check_slots`` the whole slot table is scanned too (about 0.2 s for 5,000,000 slots).
        """
        problem = self._header_problem() or self._tail_problem()
        if problem is None and check_slots:
            problem = self._slot_table_problem()
        return problem

    def _header_problem(self) -> str | None:
        if not 1 <= self.index_count <= self._index_num:
            return f"index_count {self.index_count} outside [1, {self._index_num}]"
        if not 0 <= self.hash_slot_count <= min(self._hash_slot_num, self.index_count - 1):
            return f"hash_slot_count {self.hash_slot_count} impossible for {self.entry_count} entries"
        if self.index_count > 1 and not 0 <= self.begin_commit_log_offset <= self.end_commit_log_offset:
            return (
                f"commit-log offsets begin {self.begin_commit_log_offset} "
                f"end {self.end_commit_log_offset} out of order"
            )
        return None

    def _tail_problem(self) -> str | None:
        if self.index_count <= 1:
            return None
        first = self.entry(1)
        last = self.entry(self.index_count - 1)
        if first.commit_log_offset != self.begin_commit_log_offset:
            return f"entry 1 has commit-log offset {first.commit_log_offset}, header says {self.begin_commit_log_offset}"
        if last.commit_log_offset != self.end_commit_log_offset:
            return (
                f"entry {self.index_count - 1} has commit-log offset {last.commit_log_offset}, "
                f"header says {self.end_commit_log_offset}"
            )
        if (
            last.key_hash < 0
            or last.time_delta_s < 0
            or not 0 <= last.prev_entry_number < self.index_count - 1
        ):
            return f"entry {self.index_count - 1} is malformed: {last}"
        slot_value = self.slot(last.key_hash)
        if slot_value not in (self.index_count - 1, last.prev_entry_number):
            return f"slot of entry {self.index_count - 1} holds {slot_value}"
        return None

    def _slot_table_problem(self) -> str | None:
        # One copy into an int array and C-level min/max: about 0.2 s for 5,000,000 slots.
        values = array.array("i", self._read_slot_table())
        if sys.byteorder == "little":
            values.byteswap()
        lowest, highest = min(values), max(values)
        if lowest < 0 or highest >= self.index_count:
            return (
                f"slot table holds entry numbers in [{lowest}, {highest}], index_count is {self.index_count}"
            )
        return None

    def repair_slots(self) -> int:
        """Point slots that name entries past ``index_count`` back down their chains; returns how many.

        A stop between a run's slot writes and its header write (see :meth:`put_hashes`) leaves
        slots naming entries the header does not count yet. Each such entry still holds its own
        predecessor, so following the chain down to the first counted entry restores the slot
        exactly as it was before the run. Call after an unclean stop, before :meth:`find_problem`.
        """
        import numpy as np

        if not 1 <= self.index_count <= self._index_num:
            return 0  # a damaged header: find_problem reports it
        copied = np.frombuffer(self._read_slot_table(), dtype=">i4")
        stale = np.flatnonzero(copied >= self.index_count)
        if not stale.size:
            return 0
        entries = np.frombuffer(
            self._mapped, dtype=_ENTRY_FIELDS, count=self._index_num, offset=self._entries_base
        )
        previous = entries["prev_entry_number"]
        values = copied[stale].astype(np.int64)
        while True:
            ahead = np.flatnonzero(values >= self.index_count)
            if not ahead.size:
                break
            current = values[ahead]
            valid = current < self._index_num
            following = np.zeros(ahead.size, dtype=np.int64)
            following[valid] = previous[current[valid]]
            # Chains only ever point at older entries: anything else ends the chain.
            following[(following >= current) | (following < 0)] = 0
            values[ahead] = following
        slot_table = self._slot_table()  # the stale slots were written: their pages have blocks
        slot_table[stale] = values
        del slot_table, entries, previous
        self.dirty = True
        return int(stale.size)

    def repair_tail(self) -> bool:
        """Relink the newest entry if a stop between the header and slot writes left it unlinked.

        Call only when :meth:`find_problem` returned None. Returns True when a slot was rewritten.
        """
        if self.index_count <= 1:
            return False
        last_entry_number = self.index_count - 1
        last = self.entry(last_entry_number)
        slot_position = self._slot_position(last.key_hash)
        if self._slot_at(slot_position) == last_entry_number:
            return False
        import numpy as np

        self._reserve_slot_pages(np.array([last.key_hash % self._hash_slot_num], dtype=np.int64))
        _SLOT.pack_into(self._mapped, slot_position, last_entry_number)
        self.dirty = True
        return True

    # -- lifecycle ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Write the mapped pages to disk (msync)."""
        if self.dirty:
            self._mapped.flush()
            self.dirty = False

    def close(self) -> None:
        """Flush and unmap. The object must not be used afterwards."""
        if not self._mapped.closed:
            self.flush()
            self._mapped.close()
        self._close_fd()

    def delete(self) -> None:
        """Unmap without flushing and remove the file."""
        if not self._mapped.closed:
            self._mapped.close()
        self._close_fd()
        self.path.unlink(missing_ok=True)

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _slot_position(self, key_hash: int) -> int:
        return HEADER_SIZE_BYTES + (key_hash % self._hash_slot_num) * SLOT_SIZE_BYTES

    def _entry_position(self, entry_number: int) -> int:
        return self._entries_base + entry_number * ENTRY_SIZE_BYTES
