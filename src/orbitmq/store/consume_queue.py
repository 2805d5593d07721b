"""ConsumeQueues: per (topic, queue id) index of fixed 20-byte entries into the CommitLog.

Entry layout (big-endian)::

    pos  size  field
    0    8     commit-log offset of the record (long)
    8    4     record size in bytes (int)
    12   8     tags code (long): Java String.hashCode of TAGS, or the delivery time for
               SCHEDULE_TOPIC_XXXX

Queue offset N lives at byte N*20 of the queue; files hold ``entries_per_file`` entries
and are named by the 20-digit byte offset of their first entry, under
``consumequeue/<topic>/<queueId>/``. A zero entry (size 0) was never written.

Theory of operation. A ConsumeQueue is derived data: the CommitLog alone can rebuild it.
That lets the put path stay O(1) however many queues exist: :meth:`ConsumeQueue.put`
packs the entry into an in-memory tail buffer, and the flush thread later writes each
buffer to its file with one pwrite (:meth:`ConsumeQueueTable.write_pending`; the file work
is in ``_queue_writeout``, which spreads file creation over a few threads). Readers see
file entries below ``written_queue_offset`` and buffered ones above it. The tail buffer is
kept and reused once written (only its capacity matters: bytes past ``max_queue_offset``
are never read), so a queue's steady state allocates nothing per put or per write-out.
Only a bounded number of files is open at once (:class:`FileHandles`, LRU), so 50,000
queues cost no more descriptors than 8.

File creation is the dominant cost of a first write to many queues (one directory and
one file each, which the filesystem's metadata work bounds), so the write-out keeps it
to the minimum: each queue makes its directory once, and creates a file with one
``open(O_CREAT | O_EXCL)`` plus an extension to full size on that same descriptor; later
writes to a file it created or extended skip both. Everything here runs under the store's
lock except the file I/O of the write-out, whose caller holds ``flush_lock`` instead;
structural changes (truncate, delete) take both.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from orbitmq.errors import StoreError
from orbitmq.protocol.names import is_legal_name, shorten
from orbitmq.store._fs import list_segments, parse_segment_name
from orbitmq.store._queue_files import ENTRY as ENTRY
from orbitmq.store._queue_files import ENTRY_BYTES as ENTRY_BYTES
from orbitmq.store._queue_files import FileHandles
from orbitmq.store._queue_writeout import DEFAULT_THREAD_COUNT, QueueWriter

_log = logging.getLogger(__name__)
_QUEUE_ID_MAX = (1 << 31) - 1

# A tail buffer grows by this much (zeros, never read) when a put finds it full; a written
# buffer larger than _PENDING_KEEP_BYTES_MAX (a burst's) is released rather than kept.
_PENDING_GROWTH = bytes(ENTRY_BYTES * 16)
_PENDING_KEEP_BYTES_MAX = 64 * 1024
# Entries read at once at the end of a queue's data when it is loaded (over one 4 KiB block).
_TAIL_SCAN_ENTRIES = 256
_entries_structs: dict[int, struct.Struct] = {}


def _entries_struct(count: int) -> struct.Struct:
    """The struct of ``count`` consecutive entries (cached: a batch size recurs)."""
    packer = _entries_structs.get(count)
    if packer is None:
        if len(_entries_structs) >= 1024:
            _entries_structs.clear()
        packer = _entries_structs[count] = struct.Struct(">" + "qiq" * count)
    return packer


class ConsumeQueue:
    """One queue's entries: files below ``written_queue_offset``, a memory tail above it."""

    # Slots: 50,000 queues are 50,000 of these, touched on every put.
    __slots__ = (
        "topic",
        "queue_id",
        "directory",
        "entries_per_file",
        "file_bytes",
        "files",
        "min_queue_offset",
        "max_queue_offset",
        "written_queue_offset",
        "_pending",
        "first_dirty_round",
        "directory_ready",
        "sized_file_start",
        "sized_file_path",
    )

    def __init__(self, topic: str, queue_id: int, directory: str, entries_per_file: int, files: FileHandles):
        self.topic = topic
        self.queue_id = queue_id
        self.directory = directory
        self.entries_per_file = entries_per_file
        self.file_bytes = entries_per_file * ENTRY_BYTES
        self.files = files
        self.min_queue_offset = 0
        self.max_queue_offset = 0  # next queue offset to be written
        self.written_queue_offset = 0  # entries below this are in files
        # Entries from written_queue_offset to max_queue_offset; its capacity may be larger.
        self._pending = bytearray()
        self.first_dirty_round = 0  # write-out round that first saw entries waiting (0: none)
        # What the write-out (``_queue_writeout``) knows exists, so that it skips the checks:
        # the directory, and the one file (first queue offset, path) it last created or
        # extended to full size.
        self.directory_ready = False
        self.sized_file_start = -1
        self.sized_file_path = ""

    # -- paths --------------------------------------------------------------------------------

    def path_of(self, queue_offset: int) -> str:
        first = queue_offset - queue_offset % self.entries_per_file
        return f"{self.directory}/{first * ENTRY_BYTES:020d}"

    def file_starts(self) -> list[int]:
        """First queue offset of each existing file, sorted (plain names: a restart runs this per queue)."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(
            start // ENTRY_BYTES for name in names if (start := parse_segment_name(name)) is not None
        )

    # -- loading ------------------------------------------------------------------------------

    def load(self, commit_log_min: int, commit_log_max: int) -> None:
        """Find min/max from the files, dropping entries that point past ``commit_log_max``.

        A restart with many queues loads each at its first use, so this reads little: the
        first entry, and the last block of data (see :meth:`_search_end`).
        """
        starts = self.file_starts()
        if not starts:
            return
        self.directory_ready = True
        first = self._first_used(starts[0])
        last = starts[-1]
        last_first = first if last == starts[0] else self._first_used(last)
        end, last_entry = (last, None) if last_first is None else self._search_end(last, last_first[0])
        self.max_queue_offset = self.written_queue_offset = end
        if end == last and len(starts) > 1:
            # The newest file holds nothing; the queue ends where the previous file ends.
            self._delete_file(last)
            self.max_queue_offset = self.written_queue_offset = last
            last_entry = None
        if last_entry is None or last_entry[0] + last_entry[1] > commit_log_max:
            self.truncate_past(commit_log_max)
            first = self._first_used(starts[0])  # the cut may have reached it
        self.min_queue_offset = self._search_min(first, commit_log_min)

    def load_known(self, min_queue_offset: int, max_queue_offset: int) -> None:
        """Take bounds known to match the files (an exact manifest), without reading them."""
        self.directory_ready = True
        self.min_queue_offset = min_queue_offset
        self.max_queue_offset = self.written_queue_offset = max_queue_offset

    def _read_entry(self, queue_offset: int) -> tuple[int, int, int]:
        data = self.files.pread(
            self.path_of(queue_offset), ENTRY_BYTES, (queue_offset % self.entries_per_file) * ENTRY_BYTES
        )
        if len(data) < ENTRY_BYTES:
            return 0, 0, 0
        commit_log_offset, size, tags = ENTRY.unpack(data)
        return commit_log_offset, size, tags

    def _first_used(self, file_start: int) -> tuple[int, tuple[int, int, int]] | None:
        """The first non-zero entry of a file, with its queue offset (a rebuilt queue may start mid-file)."""
        entry = self._read_entry(file_start)
        if entry[1]:
            return file_start, entry
        data = self.files.pread(self.path_of(file_start), self.file_bytes, 0)
        for index, fields in enumerate(ENTRY.iter_unpack(data[: len(data) - len(data) % ENTRY_BYTES])):
            if fields[1]:
                return file_start + index, fields
        return None

    def _search_end(self, file_start: int, low: int) -> tuple[int, tuple[int, int, int] | None]:
        """The queue offset after the last non-zero entry of a file, and that entry when read.

        ``low`` is the file's first used entry. The file's first hole after it bounds the
        search (``FileHandles.data_end``), and the last block before the hole is read at
        once: one lseek and one read where a binary search over the file took about twenty
        reads, which at 50,000 queues is what a restart's first put to each queue costs.
        Entries zeroed by a truncation are data, not a hole; when the block read holds only
        those, a binary search below it takes over.
        """
        path = self.path_of(file_start)
        data_end = self.files.data_end(path, (low - file_start) * ENTRY_BYTES)
        high = min(file_start + self.entries_per_file, file_start + -(-data_end // ENTRY_BYTES))
        high = max(high, low + 1)  # entries in [low, high) may be used
        tail_start = max(low, high - _TAIL_SCAN_ENTRIES)
        tail = self.files.pread(
            path, (high - tail_start) * ENTRY_BYTES, (tail_start - file_start) * ENTRY_BYTES
        )
        used_bytes = len(tail.rstrip(b"\0"))
        if used_bytes:
            last = (used_bytes - 1) // ENTRY_BYTES
            entry: tuple[int, int, int] = ENTRY.unpack_from(tail, last * ENTRY_BYTES)
            if entry[1]:
                return tail_start + last + 1, entry
            high = tail_start + last + 1  # a torn entry: search below it
        else:
            high = max(tail_start, low + 1)
        while high - low > 1:
            middle = (low + high) // 2
            if self._read_entry(middle)[1]:
                low = middle
            else:
                high = middle
        return low + 1, None

    def _search_min(self, first: tuple[int, tuple[int, int, int]] | None, commit_log_min: int) -> int:
        """The first queue offset whose entry points at or after ``commit_log_min``.

        ``first`` is the oldest file's first used entry (with its queue offset).
        """
        if first is None:
            return self.max_queue_offset
        low, (commit_log_offset, size, _) = first
        if size and commit_log_offset >= commit_log_min:
            return low  # retention has not reached this queue: no search
        return self._first_at_or_after(low, commit_log_min, lambda clo, size: clo)

    def _first_at_or_after(self, low: int, bound: int, key: Callable[[int, int], int]) -> int:
        high = self.max_queue_offset
        while low < high:
            middle = (low + high) // 2
            commit_log_offset, size, _ = self.entry(middle)
            if size and key(commit_log_offset, size) >= bound:
                high = middle
            else:
                low = middle + 1
        return low

    # -- writing ------------------------------------------------------------------------------

    def put(self, queue_offset: int, commit_log_offset: int, size: int, tags_code: int) -> None:
        """Buffer the entry for ``queue_offset``, which must equal ``max_queue_offset``."""
        position = (queue_offset - self.written_queue_offset) * ENTRY_BYTES
        pending = self._pending
        if len(pending) < position + ENTRY_BYTES:
            pending += _PENDING_GROWTH
        ENTRY.pack_into(pending, position, commit_log_offset, size, tags_code)
        self.max_queue_offset = queue_offset + 1

    def put_many(self, queue_offset: int, fields: list[int]) -> None:
        """Buffer consecutive entries from ``queue_offset`` (== ``max_queue_offset``) in one pack.

        ``fields`` is flat: commit-log offset, size, tags code of each entry in turn.
        """
        count = len(fields) // 3
        position = (queue_offset - self.written_queue_offset) * ENTRY_BYTES
        pending = self._pending
        end = position + count * ENTRY_BYTES
        if len(pending) < end:
            pending += bytes(end - len(pending))
            pending += _PENDING_GROWTH
        _entries_struct(count).pack_into(pending, position, *fields)
        self.max_queue_offset = queue_offset + count

    def take_pending(self) -> tuple[int, bytearray]:
        """(first queue offset, bytes) of the buffered entries, for the write-out (store lock held).

        A copy: puts go on growing the buffer while the write-out runs without the lock.
        """
        count = self.max_queue_offset - self.written_queue_offset
        return self.written_queue_offset, self._pending[: count * ENTRY_BYTES]

    def mark_written(self, queue_offset: int, data_bytes: int) -> int:
        """The write-out wrote ``data_bytes`` of entries from ``queue_offset``; return their count.

        Store lock held. Nothing changes (and 0 is returned) when the queue was cut since.
        """
        if queue_offset != self.written_queue_offset:
            return 0
        entry_count = data_bytes // ENTRY_BYTES
        self.written_queue_offset += entry_count
        if self.written_queue_offset < self.max_queue_offset:
            del self._pending[: entry_count * ENTRY_BYTES]  # entries arrived meanwhile: shift them
        elif len(self._pending) > _PENDING_KEEP_BYTES_MAX:
            self._pending = bytearray()
        # Otherwise the buffer is kept as it is: the next put overwrites it from its start.
        return entry_count

    def truncate_past(self, commit_log_max: int) -> None:
        """Drop entries whose record does not end at or before ``commit_log_max``."""
        if self.max_queue_offset == 0:
            return
        commit_log_offset, size, _ = self.entry(self.max_queue_offset - 1)
        if size and commit_log_offset + size <= commit_log_max:
            return
        cut = self._first_at_or_after(self.min_queue_offset, commit_log_max + 1, lambda clo, size: clo + size)
        self.truncate(cut)

    def truncate(self, queue_offset: int) -> None:
        """Drop every entry at and after ``queue_offset`` (recovery; flush_lock held)."""
        if queue_offset >= self.max_queue_offset:
            return
        if queue_offset >= self.written_queue_offset:
            self._pending[(queue_offset - self.written_queue_offset) * ENTRY_BYTES :] = b""
        else:
            self._pending.clear()
            for start in self.file_starts():
                if start >= queue_offset and start > 0:
                    self._delete_file(start)
            path = self.path_of(queue_offset)
            if os.path.exists(path):
                self.files.forget(path)
                in_file = (queue_offset % self.entries_per_file) * ENTRY_BYTES
                with open(path, "r+b") as handle:
                    handle.truncate(in_file)
                    handle.truncate(self.file_bytes)
            self.written_queue_offset = queue_offset
        self.max_queue_offset = queue_offset
        self.min_queue_offset = min(self.min_queue_offset, queue_offset)

    def _delete_file(self, file_start: int) -> None:
        if file_start == self.sized_file_start:
            self.sized_file_start = -1
        path = self.path_of(file_start)
        self.files.forget(path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def delete_files_below(self, commit_log_min: int) -> int:
        """Delete files whose entries all point below ``commit_log_min``; move the min offset."""
        deleted = 0
        starts = self.file_starts()
        for start, following in zip(starts, starts[1:], strict=False):
            last_offset = (
                following - 1 if following - 1 < self.max_queue_offset else self.max_queue_offset - 1
            )
            commit_log_offset, size, _ = self.entry(last_offset)
            if size == 0 or commit_log_offset >= commit_log_min:
                break
            self._delete_file(start)
            deleted += 1
        # Entries of deleted files read as zeros, which count as "below": the search stays valid.
        self.min_queue_offset = self._first_at_or_after(
            self.min_queue_offset, commit_log_min, lambda clo, size: clo
        )
        return deleted

    # -- reading ------------------------------------------------------------------------------

    def entry(self, queue_offset: int) -> tuple[int, int, int]:
        """(commit-log offset, size, tags code) at ``queue_offset``; zeros when absent."""
        if queue_offset >= self.written_queue_offset:
            if queue_offset >= self.max_queue_offset:
                return 0, 0, 0
            commit_log_offset, size, tags = ENTRY.unpack_from(
                self._pending, (queue_offset - self.written_queue_offset) * ENTRY_BYTES
            )
            return commit_log_offset, size, tags
        return self._read_entry(queue_offset)

    def read_entries(self, queue_offset: int, count_max: int) -> bytes:
        """Up to ``count_max`` consecutive entries from ``queue_offset`` (stopping at a file end)."""
        count = min(count_max, self.max_queue_offset - queue_offset)
        if count <= 0:
            return b""
        if queue_offset >= self.written_queue_offset:
            position = (queue_offset - self.written_queue_offset) * ENTRY_BYTES
            return bytes(self._pending[position : position + count * ENTRY_BYTES])
        in_file = queue_offset % self.entries_per_file
        file_count = min(count, self.entries_per_file - in_file, self.written_queue_offset - queue_offset)
        data = self.files.pread(self.path_of(queue_offset), file_count * ENTRY_BYTES, in_file * ENTRY_BYTES)
        if file_count < count and queue_offset + file_count == self.written_queue_offset:
            # The file part ends where the buffered tail begins: continue into it.
            data += bytes(self._pending[: (count - file_count) * ENTRY_BYTES])
        return data


def queue_is_legal(topic: str, queue_id: int) -> bool:
    """Whether ``consumequeue/<topic>/<queue_id>`` is a safe path: a legal topic name, a 32-bit id."""
    return 0 <= queue_id <= _QUEUE_ID_MAX and is_legal_name(topic)


class ConsumeQueueTable:
    """Every ConsumeQueue of the store, loaded lazily from ``consumequeue/``."""

    def __init__(
        self,
        root: Path,
        entries_per_file: int,
        max_open_files: int,
        commit_log_bounds: Callable[[], tuple[int, int]],
        write_threads: int = DEFAULT_THREAD_COUNT,
    ) -> None:
        self.root = root
        self._root_text = str(root)
        self.entries_per_file = entries_per_file
        self.files = FileHandles(max_open_files)
        self.writer = QueueWriter(self._root_text, write_threads)
        self._commit_log_bounds = commit_log_bounds
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._on_disk: set[tuple[str, int]] = set()  # queues on disk, not loaded yet
        self.dirty: set[ConsumeQueue] = set()  # queues with buffered entries
        self.flush_lock = threading.Lock()
        # (min, max queue offset) of queues on disk that may load without reading their files:
        # the exact bounds of the manifest close() wrote, when the open found them still valid.
        self.known_bounds: dict[tuple[str, int], tuple[int, int]] = {}

    def scan_disk(self) -> None:
        """Note every queue directory on disk (once, at open) so lookups need no syscalls."""
        self._on_disk = set()
        self.known_bounds = {}
        try:
            topic_entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return
        for topic_entry in topic_entries:
            if not topic_entry.is_dir():
                continue
            if not is_legal_name(topic_entry.name):
                _log.warning("ignoring %s: not a legal topic name", topic_entry.path)
                continue
            for queue_entry in os.scandir(topic_entry.path):
                if queue_entry.is_dir() and queue_entry.name.isdigit():
                    if queue_is_legal(topic_entry.name, int(queue_entry.name)):
                        self._on_disk.add((topic_entry.name, int(queue_entry.name)))
                    else:
                        _log.warning("ignoring %s: not a legal queue id", queue_entry.path)

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue, loading it from disk on first use; None when it does not exist."""
        key = (topic, queue_id)
        queue = self._queues.get(key)
        if queue is None and key in self._on_disk:
            self._on_disk.discard(key)
            queue = self._new(topic, queue_id)
            bounds = self.known_bounds.pop(key, None)
            if bounds is None:
                queue.load(*self._commit_log_bounds())
            else:
                queue.load_known(*bounds)
        return queue

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue, created empty when new (its directory appears with its first file)."""
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            queue = self.get(topic, queue_id) or self._new(topic, queue_id)
        return queue

    def _new(self, topic: str, queue_id: int) -> ConsumeQueue:
        # Callers check names (put, recovery); this is the last line before a path is made.
        if not queue_is_legal(topic, queue_id):
            raise StoreError(f"{shorten(topic)!r}/{queue_id} is not a legal queue name")
        queue = ConsumeQueue(
            topic, queue_id, f"{self._root_text}/{topic}/{queue_id}", self.entries_per_file, self.files
        )
        self._queues[(topic, queue_id)] = queue
        return queue

    def drop(self, topic: str, queue_id: int) -> None:
        """Forget one queue and delete its files (recovery rebuilds it; flush_lock held)."""
        if not queue_is_legal(topic, queue_id):
            return
        queue = self._queues.pop((topic, queue_id), None)
        self._on_disk.discard((topic, queue_id))
        self.known_bounds.pop((topic, queue_id), None)
        if queue is not None:
            self.dirty.discard(queue)
        directory = self.root / topic / str(queue_id)
        for _, path in list_segments(directory):
            self.files.forget(str(path))
        shutil.rmtree(directory, ignore_errors=True)

    def loaded(self) -> list[ConsumeQueue]:
        return list(self._queues.values())

    def names(self) -> list[tuple[str, int]]:
        """Every (topic, queue id) on disk or in memory, sorted."""
        return sorted(self.name_set())

    def name_set(self) -> set[tuple[str, int]]:
        """Every (topic, queue id) on disk or in memory: a copy, cheaper than sorting it."""
        return self._on_disk.union(self._queues)

    def delete_topic(self, topic: str) -> None:
        """Delete every queue file of ``topic``; each queue stays, empty at its old end (locks held).

        The records stay in the commit log until retention, with their queue offsets. A queue
        that started again at 0 would give a re-created topic's messages the same queue
        offsets as the deleted ones: recovery, which replays the log, could not tell them
        apart, nor could a consumer's committed offset. So, as after retention emptied it, the
        queue keeps counting: it is empty at its old end, the manifest lists it so, and a
        re-created topic continues from there. A name that is not a legal topic deletes
        nothing: it could name a path outside the store.
        """
        if not is_legal_name(topic):
            return
        keys = {key for key in self._queues if key[0] == topic} | {
            key for key in self._on_disk if key[0] == topic
        }
        ends = {}
        for key in keys:
            queue = self.get(*key)
            if queue is not None:
                ends[key] = queue.max_queue_offset
                self.dirty.discard(queue)
            self._queues.pop(key, None)
        self._on_disk = {key for key in self._on_disk if key[0] != topic}
        self.known_bounds = {key: bounds for key, bounds in self.known_bounds.items() if key[0] != topic}
        directory = self.root / topic
        if directory.is_dir():
            for _, path in self._all_files(directory):
                self.files.forget(str(path))
            shutil.rmtree(directory, ignore_errors=True)
        for (_, queue_id), end in ends.items():
            if end:
                self.restore_empty(topic, queue_id, end)

    def restore_empty(self, topic: str, queue_id: int, end: int) -> ConsumeQueue:
        """A queue with no entries whose next queue offset is ``end`` (deleted or emptied before)."""
        queue = self._new(topic, queue_id)
        queue.min_queue_offset = queue.max_queue_offset = queue.written_queue_offset = end
        return queue

    @staticmethod
    def _all_files(directory: Path) -> Iterator[tuple[int, Path]]:
        for queue_entry in os.scandir(directory):
            if queue_entry.is_dir():
                yield from list_segments(Path(queue_entry.path))

    def write_pending(self, store_lock: threading.Lock, force: bool = True) -> int:
        """Write buffered entries to their files; return the entries written.

        With ``force`` every buffer is written, otherwise only the due ones (see
        :meth:`QueueWriter.write_pending`). The caller holds ``flush_lock``; ``store_lock``
        is taken only to snapshot and to publish, so puts and reads go on meanwhile.

        Raises:
            StoreError: ``force`` and some queue could not be written (it stays buffered).
        """
        return self.writer.write_pending(self.dirty, store_lock, force)

    def sync_written(self) -> None:
        """Make every file written since the last sync durable (flush thread, flush_lock held)."""
        self.writer.sync()

    def close(self) -> None:
        self.files.close_all()


def iterate_consume_queue(store_path: Path, topic: str, queue_id: int) -> Iterator[tuple[int, int, int, int]]:
    """Yield (queue offset, commit-log offset, size, tags code) of every non-zero entry on disk.

    Reads the files as they are (entries still buffered by a running store are not there).
    """
    directory = Path(store_path) / "consumequeue" / topic / str(queue_id)
    for start_bytes, path in list_segments(directory):
        first = start_bytes // ENTRY_BYTES
        data = path.read_bytes()
        usable = len(data) - len(data) % ENTRY_BYTES
        for index, (commit_log_offset, size, tags) in enumerate(ENTRY.iter_unpack(data[:usable])):
            if size:
                yield first + index, commit_log_offset, size, tags
