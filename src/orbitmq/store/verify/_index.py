"""Verifier pass over the index files: entries, slot chains and coverage of keyed records."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orbitmq.store.index_file import index_key_hash
from orbitmq.store.verify._common import (
    INDEX_ENTRY,
    INDEX_HEADER,
    INDEX_SLOT,
    CommitLogScan,
    VerifyReport,
    mapped_file,
)


@dataclass(frozen=True, slots=True)
class IndexGeometry:
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


def newest_indexed_offset(directory: Path) -> int | None:
    """The highest commit-log offset the index files' headers say they hold (None: no entry)."""
    if not directory.is_dir():
        return None
    newest: int | None = None
    for path in directory.iterdir():
        if not (path.is_file() and path.name.isdigit()):
            continue
        with open(path, "rb") as handle:
            head = handle.read(INDEX_HEADER.size)
        if len(head) < INDEX_HEADER.size:
            continue
        *_, end_offset, _slots, index_count = INDEX_HEADER.unpack(head)
        if index_count > 1 and (newest is None or end_offset > newest):
            newest = end_offset
    return newest


def scan_index(
    directory: Path, commit_log: CommitLogScan, geometry: IndexGeometry, report: VerifyReport
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
        with mapped_file(path) as data:
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
                if report.leave_to_recovery(record.commit_log_offset, "index keys (indexed)"):
                    continue
                report.problem(f"index: key {key!r} of {record.where()} is not indexed")


def _scan_index_file(
    path: Path,
    data: memoryview,
    slot_num: int,
    geometry: IndexGeometry,
    commit_log: CommitLogScan,
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
    commit_log: CommitLogScan,
    report: VerifyReport,
) -> None:
    if commit_log_offset < commit_log.min_offset:
        return
    where = f"{what}: index number {number} (commit-log offset {commit_log_offset})"
    record = commit_log.records.get(commit_log_offset)
    if record is None:
        if commit_log_offset >= commit_log.end_offset and report.leave_to_recovery(
            commit_log_offset, "index entries past the log's end (dropped)"
        ):
            return
        report.problem(f"{where}: no valid record there")
        return
    if key_hash not in {index_key_hash(record.topic, key) for key in (*record.keys, *record.optional_keys)}:
        report.problem(f"{where}: hash {key_hash} matches no key of {record.where()}")
    # The entry keeps whole seconds since the file's begin timestamp, so allow one second either way.
    if abs(time_ms - record.store_timestamp_ms) > 1000:
        report.problem(f"{where}: entry time {time_ms} ms, record stored at {record.store_timestamp_ms} ms")
