"""Offline consistency check of a store directory: do CommitLog, ConsumeQueues and index agree?

``python -m orbitmq.store.verify DIR`` prints a summary and one line per problem, and exits
0 when the store is consistent, 1 when it is not and 2 on a usage error. Tests call
:func:`verify_store` after every scenario (bbolt's ``Check`` after each test).

The verifier only reads: files are mapped read-only and nothing is created, repaired or
removed. Run it on a closed store; a store that is open, or crashed and not yet reopened,
can legitimately have a torn tail (the report notes the abort marker when it is present).

It decodes the on-disk formats itself (with the stored-message codec) rather than through
the store's own readers, so a bug in a reader cannot hide the same bug in the writer.

What is checked
---------------

CommitLog (``commitlog/<20-digit commit-log offset>``):
  * segment names are consecutive multiples of the segment size and every segment has that size;
  * every record up to the end of written data decodes, has the message magic code, a total size
    within the segment, a body CRC (``zlib.crc32 & 0x7FFFFFFF``) equal to its BODYCRC field and a
    PHYSICALOFFSET field equal to its own commit-log offset;
  * a blank (end-of-file) record appears only as the last record of a segment, every segment
    but the last ends with one, and only zero bytes follow the last record of the last segment.

ConsumeQueue (``consumequeue/<topic>/<queue id>/<20-digit byte offset>``, 20-byte entries):
  * file names are consecutive multiples of the file size;
  * every entry at or above the commit-log minimum points at the start of a valid record whose
    topic, queue id, queue offset, size and tags code match the entry (tags codes of
    ``SCHEDULE_TOPIC_XXXX`` hold a delivery time and are not compared);
  * entries end at the first zero entry and nothing but zero entries follows it;
  * every dispatchable record (transaction type NOT or COMMIT) has its entry, and no queue offset
    is used by two records.

Index (``index/<yyyyMMddHHmmssSSS>``):
  * every used entry (all, or an even sample per file) points at a valid record one of whose keys
    (``<topic>#<UNIQ_KEY>`` and each ``<topic>#<KEYS token>``) has the entry's hash, with a store
    time matching the entry's time delta;
  * every slot chain stays inside the file, each entry is reachable from exactly the slot of its hash;
  * every dispatchable record with keys at or above the first indexed commit-log offset is indexed.
"""

from __future__ import annotations

import argparse
import mmap
import re
import struct
import sys
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageConst, SysFlag
from orbitmq.protocol.message_codec import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, decode_stored_message
from orbitmq.protocol.tags import tags_code
from orbitmq.store.dispatch import takes_queue_offset
from orbitmq.store.index_file import index_key_hash

COMMIT_LOG_DIR = "commitlog"
CONSUME_QUEUE_DIR = "consumequeue"
INDEX_DIR = "index"
ABORT_MARKER = "abort"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

CQ_ENTRY = struct.Struct(">qiq")  # commit-log offset, record size, tags code
INDEX_HEADER = struct.Struct(">qqqqii")  # begin/end timestamp, begin/end commit-log offset, slots, count
INDEX_ENTRY = struct.Struct(">iqii")  # key hash, commit-log offset, seconds delta, previous index
INDEX_SLOT = struct.Struct(">i")
RECORD_HEAD = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE
RECORD_SIZE_MIN = 88 + 1 + 2  # fixed IPv4 part, topic length byte, properties length short

_FILE_NAME = re.compile(r"^\d{20}$")
# RocketMQ fills the positions before a queue's first entry with (0, INT32_MAX, 0) entries.
_CQ_PRE_BLANK_SIZE = (1 << 31) - 1


@dataclass(slots=True)
class VerifyReport:
    """What :func:`verify_store` found. ``ok`` is true when ``problems`` is empty."""

    store_path: Path
    commit_log_segment_bytes: int = 0
    consume_queue_entries_per_file: int = 0
    segments: int = 0
    records: int = 0
    blank_records: int = 0
    commit_log_min_offset: int = 0
    commit_log_end_offset: int = 0  # end of the valid written data
    consume_queues: int = 0
    consume_queue_entries: int = 0
    expired_consume_queue_entries: int = 0  # entries below the commit-log minimum (retention)
    index_files: int = 0
    index_entries: int = 0
    index_entries_checked: int = 0
    abort_marker_present: bool = False
    notes: list[str] = field(default_factory=list)  # what could not be checked, and why
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0  # may exceed len(problems) when capped
    max_problems: int = 1000

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def problem(self, text: str) -> None:
        """Record one problem (kept up to max_problems, always counted)."""
        self.problem_count += 1
        if len(self.problems) < self.max_problems:
            self.problems.append(text)

    def summary(self) -> str:
        """A few lines of counts, then the verdict."""
        lines = [
            f"store {self.store_path}",
            f"commitlog: {self.segments} segments of {self.commit_log_segment_bytes} bytes, "
            f"{self.records} records, {self.blank_records} blank, "
            f"commit-log offsets [{self.commit_log_min_offset}, {self.commit_log_end_offset})",
            f"consumequeue: {self.consume_queues} queues, {self.consume_queue_entries} entries "
            f"({self.expired_consume_queue_entries} below the commit-log minimum), "
            f"{self.consume_queue_entries_per_file} entries per file",
            f"index: {self.index_files} files, {self.index_entries} entries, "
            f"{self.index_entries_checked} checked",
        ]
        if self.abort_marker_present:
            lines.append("note: abort marker present (store open or crashed; reopen it before verifying)")
        lines += [f"note: {note}" for note in self.notes]
        verdict = "OK" if self.ok else f"{self.problem_count} problems"
        if len(self.problems) < self.problem_count:
            verdict += f" (first {len(self.problems)} listed)"
        lines.append(verdict)
        return "\n".join(lines)

    def render(self) -> str:
        """The summary followed by one line per problem."""
        return "\n".join([self.summary(), *self.problems])


@dataclass(slots=True)
class _Record:
    commit_log_offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    tags_code: int
    sys_flag: int
    store_timestamp_ms: int
    keys: tuple[str, ...]

    @property
    def dispatchable(self) -> bool:
        return takes_queue_offset(self.sys_flag)

    def where(self) -> str:
        return (
            f"topic {self.topic!r} queue {self.queue_id} queue offset {self.queue_offset} "
            f"(commit-log offset {self.commit_log_offset})"
        )


@dataclass(slots=True)
class _CommitLog:
    records: dict[int, _Record] = field(default_factory=dict)
    min_offset: int = 0
    end_offset: int = 0


def verify_store(
    path: Path | str,
    *,
    commit_log_segment_bytes: int | None = None,
    consume_queue_entries_per_file: int | None = None,
    index_sample_per_file: int | None = None,
    max_problems: int = 1000,
    index_hash_slot_num: int | None = None,
    index_num: int | None = None,
) -> VerifyReport:
    """Check that a closed store's CommitLog, ConsumeQueues and index agree.

    Args:
        path: the store root (the directory holding ``commitlog/``), or its parent holding ``store/``.
        commit_log_segment_bytes: the segment size; inferred from segment names and sizes when None.
        consume_queue_entries_per_file: inferred from consume-queue file sizes when None.
        index_sample_per_file: check at most this many index entries per file (None: all of them).
        index_hash_slot_num: slots per index file. When None it is inferred from the file size,
            assuming RocketMQ's ratio of four entries per slot (maxIndexNum = 4 x maxHashSlotNum);
            when that fails the index is not checked and a note says so.
        index_num: entries per index file, entry 0 included (only needed with index_hash_slot_num
            to check the file size).
        max_problems: problems kept in the report (all are counted).

    Returns:
        A VerifyReport; ``report.ok`` is true when no problem was found.
    """
    root = _resolve_root(Path(path))
    report = VerifyReport(store_path=root, max_problems=max_problems)
    report.abort_marker_present = (root / ABORT_MARKER).exists()
    commit_log = _scan_commit_log(root / COMMIT_LOG_DIR, commit_log_segment_bytes, report)
    queue_entries = _scan_consume_queues(
        root / CONSUME_QUEUE_DIR, consume_queue_entries_per_file, commit_log, report
    )
    _check_dispatch_complete(commit_log, queue_entries, report)
    geometry = _IndexGeometry(index_hash_slot_num, index_num, index_sample_per_file)
    _scan_index(root / INDEX_DIR, commit_log, geometry, report)
    return report


def _resolve_root(path: Path) -> Path:
    if not (path / COMMIT_LOG_DIR).is_dir() and (path / "store" / COMMIT_LOG_DIR).is_dir():
        return path / "store"
    return path


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview]:
    """The file's bytes, mapped read-only (an empty file cannot be mapped and gives an empty view)."""
    with open(path, "rb") as handle:
        if path.stat().st_size == 0:
            yield memoryview(b"")
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapping:
            view = memoryview(mapping)
            try:
                yield view
            finally:
                # The mapping cannot close while a view of it is alive.
                view.release()


def _numbered_files(directory: Path, what: str, report: VerifyReport) -> list[tuple[int, Path]]:
    """Files named by a 20-digit number, sorted; anything else in the directory is a problem."""
    files = []
    for entry in sorted(directory.iterdir()):
        if entry.is_file() and _FILE_NAME.match(entry.name):
            files.append((int(entry.name), entry))
        else:
            report.problem(f"{what}: unexpected entry {entry}")
    return files


def _infer_file_bytes(files: list[tuple[int, Path]]) -> int:
    """The fixed file size: the most common size (the largest on a tie), else the name spacing."""
    sizes = Counter(path.stat().st_size for _, path in files)
    size, count = max(sizes.items(), key=lambda item: (item[1], item[0]), default=(0, 0))
    if count * 2 > len(files) or len(files) < 2:
        return size
    spacings = [files[index + 1][0] - files[index][0] for index in range(len(files) - 1)]
    return min(spacings)


def _check_file_sequence(
    files: list[tuple[int, Path]], file_bytes: int, what: str, report: VerifyReport
) -> bool:
    """Names must be multiples of the file size without gaps; sizes must equal it."""
    if file_bytes <= 0:
        report.problem(f"{what}: cannot determine the file size")
        return False
    good = True
    for index, (start, path) in enumerate(files):
        if start % file_bytes:
            report.problem(f"{what}: file {path.name} does not start at a multiple of {file_bytes}")
            good = False
        if index and start != files[index - 1][0] + file_bytes:
            report.problem(f"{what}: gap or overlap between {files[index - 1][1].name} and {path.name}")
            good = False
        size = path.stat().st_size
        if size != file_bytes:
            report.problem(f"{what}: file {path.name} is {size} bytes, expected {file_bytes}")
            good = False
    return good


# -- commit log --------------------------------------------------------------------------------


def _scan_commit_log(directory: Path, segment_bytes: int | None, report: VerifyReport) -> _CommitLog:
    commit_log = _CommitLog()
    if not directory.is_dir():
        report.notes.append(f"no {COMMIT_LOG_DIR}/ directory: an empty store")
        return commit_log
    segments = _numbered_files(directory, "commitlog", report)
    report.segments = len(segments)
    if not segments:
        return commit_log
    report.commit_log_segment_bytes = segment_bytes or _infer_file_bytes(segments)
    _check_file_sequence(segments, report.commit_log_segment_bytes, "commitlog", report)
    commit_log.min_offset = segments[0][0]
    for index, (start, path) in enumerate(segments):
        is_last = index == len(segments) - 1
        with _mapped(path) as data:
            end = _scan_segment(data, start, is_last, commit_log, report)
        if is_last:
            commit_log.end_offset = end
    report.commit_log_min_offset = commit_log.min_offset
    report.commit_log_end_offset = commit_log.end_offset
    return commit_log


def _scan_segment(
    data: memoryview, start: int, is_last: bool, commit_log: _CommitLog, report: VerifyReport
) -> int:
    """Walk one segment's records; returns the commit-log offset where written data ends."""
    position = 0
    length = len(data)
    while position + RECORD_HEAD.size <= length:
        total_size, magic = RECORD_HEAD.unpack_from(data, position)
        commit_log_offset = start + position
        if total_size == 0 and magic == 0:
            break
        if magic == BLANK_MAGIC_CODE:
            if position + total_size != length:
                report.problem(
                    f"commitlog: blank record at commit-log offset {commit_log_offset} of size "
                    f"{total_size} does not end its segment (segment end {start + length})"
                )
            else:
                # The last segment may end with a blank: the next segment is created by the next put.
                report.blank_records += 1
            return start + length
        record = _decode_record(data, position, commit_log_offset, total_size, magic, report)
        if record is None:
            return commit_log_offset
        commit_log.records[commit_log_offset] = record
        report.records += 1
        position += total_size
    if not is_last:
        report.problem(
            f"commitlog: segment {start} ends at commit-log offset {start + position} without a blank record"
        )
    elif _has_nonzero(data, position):
        report.problem(
            f"commitlog: non-zero bytes after the last record, at commit-log offset {start + position}"
        )
    return start + position


def _has_nonzero(data: memoryview, position: int) -> bool:
    chunk_bytes = 1 << 20
    for chunk_start in range(position, len(data), chunk_bytes):
        chunk = bytes(data[chunk_start : chunk_start + chunk_bytes])
        if chunk.count(0) != len(chunk):
            return True
    return False


def _decode_record(
    data: memoryview,
    position: int,
    commit_log_offset: int,
    total_size: int,
    magic: int,
    report: VerifyReport,
) -> _Record | None:
    """Decode and check one record; reports and returns None when it is not valid."""
    where = f"commitlog: record at commit-log offset {commit_log_offset}"
    if magic != MESSAGE_MAGIC_CODE:
        report.problem(f"{where}: bad magic code {magic:#x} (torn or corrupt)")
        return None
    if total_size < RECORD_SIZE_MIN or position + total_size > len(data):
        report.problem(f"{where}: total size {total_size} out of bounds")
        return None
    try:
        message, next_position = decode_stored_message(data, position)
    except RemoteProtocolError as exc:
        report.problem(f"{where}: undecodable: {exc}")
        return None
    problems = []
    if next_position - position != total_size:
        problems.append(f"fields span {next_position - position} bytes, TOTALSIZE says {total_size}")
    crc = zlib.crc32(message.body) & 0x7FFFFFFF
    if crc != message.body_crc:
        problems.append(f"body CRC {crc} != stored {message.body_crc}")
    if message.commit_log_offset != commit_log_offset:
        problems.append(f"PHYSICALOFFSET field says {message.commit_log_offset}")
    if problems:
        report.problem(f"{where}: " + "; ".join(problems))
        return None
    uniq_key = message.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    keys = tuple(key for key in [uniq_key or "", *message.keys] if key)
    return _Record(
        commit_log_offset=commit_log_offset,
        size=total_size,
        topic=message.topic,
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        tags_code=tags_code(message.tags),
        sys_flag=message.sys_flag,
        store_timestamp_ms=message.store_timestamp,
        keys=keys,
    )


# -- consume queues ----------------------------------------------------------------------------

# (topic, queue id) -> queue offset -> commit-log offset
_QueueEntries = dict[tuple[str, int], dict[int, int]]


def _scan_consume_queues(
    directory: Path, entries_per_file: int | None, commit_log: _CommitLog, report: VerifyReport
) -> _QueueEntries:
    queue_entries: _QueueEntries = {}
    if not directory.is_dir():
        return queue_entries
    queue_dirs = []
    for topic_dir in sorted(directory.iterdir()):
        if not topic_dir.is_dir():
            report.problem(f"consumequeue: unexpected file {topic_dir}")
            continue
        for queue_dir in sorted(topic_dir.iterdir()):
            if not (queue_dir.is_dir() and queue_dir.name.isdigit()):
                report.problem(f"consumequeue: unexpected entry {queue_dir}")
                continue
            queue_dirs.append((topic_dir.name, int(queue_dir.name), queue_dir))
    report.consume_queues = len(queue_dirs)
    if entries_per_file:
        report.consume_queue_entries_per_file = entries_per_file
    for topic, queue_id, queue_dir in queue_dirs:
        queue_entries[(topic, queue_id)] = _scan_queue(topic, queue_id, queue_dir, commit_log, report)
    return queue_entries


def _scan_queue(
    topic: str, queue_id: int, queue_dir: Path, commit_log: _CommitLog, report: VerifyReport
) -> dict[int, int]:
    what = f"consumequeue {topic!r} queue {queue_id}"
    files = _numbered_files(queue_dir, what, report)
    if not files:
        return {}
    if not report.consume_queue_entries_per_file:
        report.consume_queue_entries_per_file = _infer_file_bytes(files) // CQ_ENTRY.size
    if not _check_file_sequence(files, report.consume_queue_entries_per_file * CQ_ENTRY.size, what, report):
        return {}
    entries: dict[int, tuple[int, int, int]] = {}
    ended_at: int | None = None
    for queue_offset, entry in _queue_file_entries(files):
        if entry == (0, 0, 0) or (entry[:2] == (0, _CQ_PRE_BLANK_SIZE) and not entries):
            # Zero entries before the first one were never written: the queue was rebuilt
            # after retention and starts at its first surviving record.
            if entries and ended_at is None:
                ended_at = queue_offset
            continue
        if ended_at is not None:
            report.problem(f"{what}: entry at queue offset {queue_offset} follows the end at {ended_at}")
            break
        entries[queue_offset] = entry
    report.consume_queue_entries += len(entries)
    previous = -1
    for queue_offset, entry in entries.items():
        if entry[0] <= previous:
            report.problem(
                f"{what}: queue offset {queue_offset} points at commit-log offset {entry[0]}, "
                f"not after the previous entry's {previous}"
            )
        previous = entry[0]
        _check_entry(
            f"{what} queue offset {queue_offset}", (topic, queue_id, queue_offset), entry, commit_log, report
        )
    return {queue_offset: entry[0] for queue_offset, entry in entries.items()}


def _queue_file_entries(files: list[tuple[int, Path]]) -> Iterator[tuple[int, tuple[int, int, int]]]:
    """(queue offset, entry) of every slot of the queue's files, in order."""
    for start, path in files:
        with _mapped(path) as data:
            slots = list(CQ_ENTRY.iter_unpack(data))  # copied out so the mapping can close
        first = start // CQ_ENTRY.size
        for index, entry in enumerate(slots):
            yield first + index, entry


def _check_entry(
    what: str,
    place: tuple[str, int, int],
    entry: tuple[int, int, int],
    commit_log: _CommitLog,
    report: VerifyReport,
) -> None:
    """One entry against the record it points at; ``place`` is (topic, queue id, queue offset)."""
    commit_log_offset, size, code = entry
    if commit_log_offset < commit_log.min_offset:
        report.expired_consume_queue_entries += 1
        return
    where = f"{what} (commit-log offset {commit_log_offset}, size {size})"
    record = commit_log.records.get(commit_log_offset)
    if record is None:
        beyond = commit_log_offset >= commit_log.end_offset
        report.problem(f"{where}: {'beyond the end of' if beyond else 'no valid record in'} the commit log")
        return
    mismatches = []
    if (record.topic, record.queue_id) != place[:2]:
        mismatches.append(f"record belongs to topic {record.topic!r} queue {record.queue_id}")
    if record.queue_offset != place[2]:
        mismatches.append(f"record has queue offset {record.queue_offset}")
    if record.size != size:
        mismatches.append(f"record size is {record.size}")
    if place[0] != SCHEDULE_TOPIC and record.tags_code != code:
        mismatches.append(f"tags code {code} != record's {record.tags_code}")
    if not record.dispatchable:
        mismatches.append(f"record has transaction sys flag {record.sys_flag & SysFlag.TRANSACTION_MASK:#x}")
    if mismatches:
        report.problem(f"{where}: " + "; ".join(mismatches))


def _check_dispatch_complete(
    commit_log: _CommitLog, queue_entries: _QueueEntries, report: VerifyReport
) -> None:
    """Every dispatchable record has its entry, and no two records share a queue offset."""
    seen: dict[tuple[str, int, int], int] = {}
    for record in commit_log.records.values():
        if not record.dispatchable:
            continue
        key = (record.topic, record.queue_id, record.queue_offset)
        if key in seen:
            report.problem(
                f"commitlog: {record.where()} reuses the queue offset of commit-log offset {seen[key]}"
            )
            continue
        seen[key] = record.commit_log_offset
        entries = queue_entries.get((record.topic, record.queue_id))
        if entries is None:
            report.problem(f"consumequeue: no consume queue for {record.where()}")
        elif entries.get(record.queue_offset) != record.commit_log_offset:
            found = entries.get(record.queue_offset)
            detail = "missing" if found is None else f"points at commit-log offset {found}"
            report.problem(f"consumequeue: entry for {record.where()} is {detail}")


# -- index -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _IndexGeometry:
    hash_slot_num: int | None
    index_num: int | None
    sample_per_file: int | None

    def slots_for(self, size_bytes: int) -> int | None:
        """The slot count of a file of this size, or None when it cannot be known."""
        if self.hash_slot_num is not None:
            return self.hash_slot_num
        # RocketMQ's geometry has four entries per slot: 40 + 4 s + 20 (4 s) = 40 + 84 s bytes.
        fixed_bytes = INDEX_HEADER.size
        per_slot_bytes = INDEX_SLOT.size + 4 * INDEX_ENTRY.size
        if size_bytes > fixed_bytes and (size_bytes - fixed_bytes) % per_slot_bytes == 0:
            return (size_bytes - fixed_bytes) // per_slot_bytes
        return None


def _scan_index(
    directory: Path, commit_log: _CommitLog, geometry: _IndexGeometry, report: VerifyReport
) -> None:
    if not directory.is_dir():
        return
    files = sorted(path for path in directory.iterdir() if path.is_file() and path.name.isdigit())
    report.index_files = len(files)
    indexed: set[tuple[int, int]] = set()
    first_indexed_offset: int | None = None
    for path in files:
        slot_num = geometry.slots_for(path.stat().st_size)
        if slot_num is None:
            report.notes.append(
                f"index file {path.name}: geometry unknown (pass the slot count); index not checked"
            )
            return
        with _mapped(path) as data:
            begin = _scan_index_file(path, data, slot_num, geometry, commit_log, indexed, report)
        if begin is not None and (first_indexed_offset is None or begin < first_indexed_offset):
            first_indexed_offset = begin
    if first_indexed_offset is None:
        return
    for record in commit_log.records.values():
        if record.commit_log_offset < first_indexed_offset or not record.dispatchable:
            continue
        for key in record.keys:
            if (index_key_hash(record.topic, key), record.commit_log_offset) not in indexed:
                report.problem(f"index: key {key!r} of {record.where()} is not indexed")


def _scan_index_file(
    path: Path,
    data: memoryview,
    slot_num: int,
    geometry: _IndexGeometry,
    commit_log: _CommitLog,
    indexed: set[tuple[int, int]],
    report: VerifyReport,
) -> int | None:
    """Check one index file; returns its first entry's commit-log offset (None when empty)."""
    what = f"index file {path.name}"
    entries_base = INDEX_HEADER.size + slot_num * INDEX_SLOT.size
    capacity = (len(data) - entries_base) // INDEX_ENTRY.size
    if geometry.index_num is not None and geometry.hash_slot_num is not None:
        expected_bytes = entries_base + geometry.index_num * INDEX_ENTRY.size
        if len(data) != expected_bytes:
            report.problem(f"{what}: {len(data)} bytes, expected {expected_bytes}")
    if capacity < 1:
        report.problem(f"{what}: {len(data)} bytes cannot hold {slot_num} slots and any entry")
        return None
    begin_ms, _end_ms, _begin_offset, _end_offset, _used_slots, index_count = INDEX_HEADER.unpack_from(
        data, 0
    )
    if not 1 <= index_count <= capacity:
        report.problem(f"{what}: index count {index_count} outside [1, {capacity}]")
        return None
    report.index_entries += index_count - 1
    entries = [
        INDEX_ENTRY.unpack_from(data, entries_base + number * INDEX_ENTRY.size)
        for number in range(index_count)
    ]
    _check_index_chains(what, data, slot_num, entries, report)
    sample = geometry.sample_per_file
    used = index_count - 1
    step = 1.0 if sample is None or used <= sample else used / sample
    checked = {int(1 + step * i) for i in range(min(used, sample if sample is not None else used))}
    first_offset: int | None = None
    for number in range(1, index_count):
        key_hash, commit_log_offset, delta_s, _previous = entries[number]
        indexed.add((key_hash, commit_log_offset))
        first_offset = commit_log_offset if first_offset is None else min(first_offset, commit_log_offset)
        if number in checked:
            report.index_entries_checked += 1
            _check_index_entry(
                what, number, key_hash, commit_log_offset, begin_ms + delta_s * 1000, commit_log, report
            )
    return first_offset


def _check_index_chains(
    what: str,
    data: memoryview,
    slot_count: int,
    entries: list[tuple[int, int, int, int]],
    report: VerifyReport,
) -> None:
    """Each slot's chain runs backwards through entries whose hash maps to that slot, reaching each once."""
    reached = 0
    for slot, (head,) in enumerate(
        INDEX_SLOT.iter_unpack(data[INDEX_HEADER.size : INDEX_HEADER.size + slot_count * 4])
    ):
        number = head
        while number:
            if not 0 < number < len(entries):
                report.problem(
                    f"{what}: slot {slot} chain reaches index number {number} outside [1, {len(entries)})"
                )
                break
            key_hash, _, _, previous = entries[number]
            if key_hash % slot_count != slot:
                report.problem(f"{what}: index number {number} (hash {key_hash}) is chained from slot {slot}")
            if previous >= number:
                report.problem(f"{what}: index number {number} links forward to {previous}")
                break
            reached += 1
            number = previous
    if reached != max(len(entries) - 1, 0):
        report.problem(f"{what}: {reached} entries reachable from slots, header counts {len(entries) - 1}")


def _check_index_entry(
    what: str,
    number: int,
    key_hash: int,
    commit_log_offset: int,
    time_ms: int,
    commit_log: _CommitLog,
    report: VerifyReport,
) -> None:
    if commit_log_offset < commit_log.min_offset:
        return
    where = f"{what}: index number {number} (commit-log offset {commit_log_offset})"
    record = commit_log.records.get(commit_log_offset)
    if record is None:
        report.problem(f"{where}: no valid record there")
        return
    if key_hash not in {index_key_hash(record.topic, key) for key in record.keys}:
        report.problem(f"{where}: hash {key_hash} matches no key of {record.where()}")
    # The entry keeps whole seconds since the file's begin timestamp, so allow one second either way.
    if abs(time_ms - record.store_timestamp_ms) > 1000:
        report.problem(f"{where}: entry time {time_ms} ms, record stored at {record.store_timestamp_ms} ms")


# -- command line ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m orbitmq.store.verify DIR``: 0 when consistent, 1 when not, 2 on usage errors."""
    parser = argparse.ArgumentParser(
        prog="python -m orbitmq.store.verify", description="Check a closed OrbitMQ store directory offline."
    )
    parser.add_argument("dir", type=Path, help="store root (holds commitlog/, consumequeue/, index/)")
    parser.add_argument("--segment-bytes", type=int, help="commit-log segment size (default: inferred)")
    parser.add_argument(
        "--queue-entries-per-file", type=int, help="consume-queue entries per file (default: inferred)"
    )
    parser.add_argument("--index-sample", type=int, help="index entries checked per file (default: all)")
    parser.add_argument("--index-slots", type=int, help="hash slots per index file (default: inferred)")
    parser.add_argument("--index-entries", type=int, help="entries per index file (checks file sizes)")
    parser.add_argument("--max-problems", type=int, default=1000, help="problems listed (all are counted)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    root = _resolve_root(args.dir)
    if not root.is_dir():
        print(f"error: {args.dir} is not a directory", file=sys.stderr)
        return 2
    numeric = (
        "segment_bytes",
        "queue_entries_per_file",
        "index_sample",
        "index_slots",
        "index_entries",
        "max_problems",
    )
    for name in numeric:
        value = getattr(args, name)
        if value is not None and value <= 0:
            print(f"error: --{name.replace('_', '-')} must be positive, got {value}", file=sys.stderr)
            return 2
    report = verify_store(
        root,
        commit_log_segment_bytes=args.segment_bytes,
        consume_queue_entries_per_file=args.queue_entries_per_file,
        index_sample_per_file=args.index_sample,
        max_problems=args.max_problems,
        index_hash_slot_num=args.index_slots,
        index_num=args.index_entries,
    )
    print(report.render())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
