"""Verifier pass over the ConsumeQueues: entries against records, and dispatch completeness."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from orbitmq.model.message import SysFlag
from orbitmq.store.verify._common import (
    CQ_ENTRY,
    CQ_PRE_BLANK_SIZE,
    SCHEDULE_TOPIC,
    CommitLogScan,
    VerifyReport,
    check_file_sequence,
    infer_file_bytes,
    mapped_file,
    numbered_files,
)

# (topic, queue id) -> queue offset -> commit-log offset
_QueueEntries = dict[tuple[str, int], dict[int, int]]


def scan_consume_queues(
    directory: Path, entries_per_file: int | None, commit_log: CommitLogScan, report: VerifyReport
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
    topic: str, queue_id: int, queue_dir: Path, commit_log: CommitLogScan, report: VerifyReport
) -> dict[int, int]:
    what = f"consumequeue {topic!r} queue {queue_id}"
    files = numbered_files(queue_dir, what, report)
    if not files:
        return {}
    if not report.consume_queue_entries_per_file:
        report.consume_queue_entries_per_file = infer_file_bytes(files) // CQ_ENTRY.size
    if not check_file_sequence(files, report.consume_queue_entries_per_file * CQ_ENTRY.size, what, report):
        return {}
    entries: dict[int, tuple[int, int, int]] = {}
    ended_at: int | None = None
    for queue_offset, entry in _queue_file_entries(files):
        if entry == (0, 0, 0) or (entry[:2] == (0, CQ_PRE_BLANK_SIZE) and not entries):
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
        with mapped_file(path) as data:
            slots = list(CQ_ENTRY.iter_unpack(data))  # copied out so the mapping can close
        first = start // CQ_ENTRY.size
        for index, entry in enumerate(slots):
            yield first + index, entry


def _check_entry(
    what: str,
    place: tuple[str, int, int],
    entry: tuple[int, int, int],
    commit_log: CommitLogScan,
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
        if beyond and report.leave_to_recovery(
            commit_log_offset, "consume-queue entries past the log's end (dropped)"
        ):
            return
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


def check_dispatch_complete(
    commit_log: CommitLogScan,
    queue_entries: _QueueEntries,
    report: VerifyReport,
    queue_mins: dict[tuple[str, int], int] | None = None,
) -> None:
    """Every dispatchable record has its entry, and no two records share a queue offset.

    ``queue_mins`` (from the queue manifest) excuses records below a queue's minimum: they
    belong to a deleted topic whose queue kept counting.
    """
    seen: dict[tuple[str, int, int], int] = {}
    mins = queue_mins or {}
    for record in commit_log.records.values():
        if not record.dispatchable:
            continue
        if record.queue_offset < mins.get((record.topic, record.queue_id), 0):
            continue
        key = (record.topic, record.queue_id, record.queue_offset)
        if key in seen:
            report.problem(
                f"commitlog: {record.where()} reuses the queue offset of commit-log offset {seen[key]}"
            )
            continue
        seen[key] = record.commit_log_offset
        entries = queue_entries.get((record.topic, record.queue_id))
        missing = entries is None or record.queue_offset not in entries
        if missing and report.leave_to_recovery(record.commit_log_offset, "consume-queue entries (written)"):
            continue
        if entries is None:
            report.problem(f"consumequeue: no consume queue for {record.where()}")
        elif entries.get(record.queue_offset) != record.commit_log_offset:
            found = entries.get(record.queue_offset)
            detail = "missing" if found is None else f"points at commit-log offset {found}"
            report.problem(f"consumequeue: entry for {record.where()} is {detail}")
