"""Verifier pass over the CommitLog: segment files and every record in them."""

from __future__ import annotations

import zlib
from pathlib import Path

from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageConst
from orbitmq.protocol.message_codec import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, decode_stored_message
from orbitmq.protocol.tags import tags_code
from orbitmq.store.verify._common import (
    COMMIT_LOG_DIR,
    RECORD_HEAD,
    RECORD_SIZE_MIN,
    CommitLogScan,
    Record,
    VerifyReport,
    check_file_sequence,
    infer_file_bytes,
    mapped_file,
    numbered_files,
)


def scan_commit_log(directory: Path, segment_bytes: int | None, report: VerifyReport) -> CommitLogScan:
    commit_log = CommitLogScan()
    if not directory.is_dir():
        report.notes.append(f"no {COMMIT_LOG_DIR}/ directory: an empty store")
        return commit_log
    segments = numbered_files(directory, "commitlog", report)
    report.segments = len(segments)
    if not segments:
        return commit_log
    report.commit_log_segment_bytes = segment_bytes or infer_file_bytes(segments)
    check_file_sequence(segments, report.commit_log_segment_bytes, "commitlog", report)
    commit_log.min_offset = segments[0][0]
    tail = _tail_segment(segments, report)
    for index, (start, path) in enumerate(segments[: tail + 1]):
        is_last = index == tail
        with mapped_file(path) as data:
            end = _scan_segment(data, start, is_last, commit_log, report)
        if is_last:
            commit_log.end_offset = end
    report.commit_log_min_offset = commit_log.min_offset
    report.commit_log_end_offset = commit_log.end_offset
    return commit_log


def _tail_segment(segments: list[tuple[int, Path]], report: VerifyReport) -> int:
    """The index of the segment a store's recovery keeps as its last.

    A roll-over creates the next segment before it closes the full one with its blank, so a
    kill between the two leaves an empty newest segment after one that ends in zeros. Recovery
    ends the log in the full one and deletes the empty one; in a store that needs recovery
    both are left to it.
    """
    tail = len(segments) - 1
    while tail > 0 and _is_empty(segments[tail][1]):
        if not report.leave_to_recovery(segments[tail][0], "empty segments after an unclosed one (deleted)"):
            break
        tail -= 1
    return tail


def _is_empty(path: Path) -> bool:
    with open(path, "rb") as handle:
        head = handle.read(RECORD_HEAD.size)
    return head.count(0) == len(head)


def _scan_segment(
    data: memoryview, start: int, is_last: bool, commit_log: CommitLogScan, report: VerifyReport
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
        problems_before = report.problem_count
        record = _decode_record(data, position, commit_log_offset, total_size, magic, report)
        if record is None:
            if is_last and report.problem_count > problems_before:
                _leave_tail_to_recovery(report, commit_log_offset)
            return commit_log_offset
        commit_log.records[commit_log_offset] = record
        report.records += 1
        position += total_size
    if not is_last:
        report.problem(
            f"commitlog: segment {start} ends at commit-log offset {start + position} without a blank record"
        )
    elif _has_nonzero(data, position) and not report.leave_to_recovery(
        start + position, "torn commit-log tails (cut)"
    ):
        report.problem(
            f"commitlog: non-zero bytes after the last record, at commit-log offset {start + position}"
        )
    return start + position


def _leave_tail_to_recovery(report: VerifyReport, commit_log_offset: int) -> None:
    """A record failing its checks in the last segment of a store that needs recovery: its
    recovery cuts the log there (the torn tail of a crash), so it is no problem of the store."""
    if report.leave_to_recovery(commit_log_offset, "torn commit-log tails (cut)"):
        report.problem_count -= 1
        if report.problems:
            report.problems.pop()


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
) -> Record | None:
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
    return Record(
        commit_log_offset=commit_log_offset,
        size=total_size,
        topic=message.topic,
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        tags_code=tags_code(message.tags),
        sys_flag=message.sys_flag,
        store_timestamp_ms=message.store_timestamp,
        keys=keys,
        # RocketMQ 5's broker also indexes each message's tags under ``<topic>#T#<tags>``.
        optional_keys=(f"T#{message.tags}",) if message.tags else (),
    )
