"""Start-up recovery: find the valid end of the CommitLog and bring derived files up to it.

Both start paths (clean: no abort marker; crash: the marker was left behind) do the same
steps, and differ only in how much they trust the bytes:

1. Choose the scan start: the first segment touching the lowest checkpoint point (commit
   log flushed, ConsumeQueue dispatched, index dispatched), or the first segment when
   there is no usable checkpoint. Starting at a segment start means a stale or wrong
   checkpoint can only cost time, never correctness.
2. Walk records from there, checking each one (magic code, sizes, PHYSICALOFFSET equal to
   its position; on the crash path also the body CRC). The first record that fails is the
   end of the log: a torn or damaged tail is zeroed and later segments are deleted, so no
   half-written record is ever served.
3. Every valid record at or after the dispatch point is re-dispatched (idempotently) to
   its ConsumeQueue and the index. A queue that turns out to miss older entries (its
   files were lost) is deleted and rebuilt from the whole log in a second walk; a missing
   ``consumequeue`` directory rebuilds every queue the same way.
4. ConsumeQueue entries and index entries that point past the new end are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from orbitmq.model.message import MessageExt
from orbitmq.store.checkpoint import Checkpoint
from orbitmq.store.commit_log import CommitLog, RecordCheck, check_record, check_record_header
from orbitmq.store.dispatch import Dispatcher, Redispatch
from orbitmq.store.index_service import IndexService

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class RecoveryReport:
    """What recovery found (logged, and inspected by tests)."""

    clean_shutdown: bool
    scan_start_offset: int = 0
    dispatch_from_offset: int = 0
    end_offset: int = 0
    corrupt_offset: int | None = None  # where a record failed its checks (the torn tail)
    records_scanned: int = 0
    records_dispatched: int = 0
    rebuilt_queues: int = 0


def recover(
    commit_log: CommitLog,
    dispatcher: Dispatcher,
    checkpoint: Checkpoint | None,
    clean_shutdown: bool,
    rebuild_all_queues: bool,
) -> RecoveryReport:
    """Recover the loaded ``commit_log`` and the derived files; return what was done."""
    report = RecoveryReport(clean_shutdown)
    if not commit_log.segments.files:
        return report
    index = dispatcher.index
    if index is not None and not clean_shutdown and index.max_commit_log_offset >= 0:
        # A crash may have indexed only some keys of the newest record: drop it and redo it.
        index.truncate_after(index.max_commit_log_offset)
    dispatch_from = _dispatch_from(commit_log, index, checkpoint, rebuild_all_queues)
    scan_point = dispatch_from
    if checkpoint is not None:
        scan_point = min(scan_point, checkpoint.commit_log_flushed_offset)
    segment = commit_log.segments.find(max(scan_point, commit_log.min_offset))
    if segment is None:
        segment = commit_log.segments.files[-1]
    report.scan_start_offset = segment.start_offset
    report.dispatch_from_offset = dispatch_from
    gaps: set[tuple[str, int]] = set()

    def dispatch(message_offset: int, size: int, message: MessageExt) -> None:
        if message_offset < dispatch_from:
            return
        outcome = dispatcher.redispatch(message, message_offset, size)
        if outcome is Redispatch.GAP:
            gaps.add((message.topic, message.queue_id))
        else:
            report.records_dispatched += 1

    # After a clean shutdown, records below the dispatch point only need a header check.
    skim_below = dispatch_from if clean_shutdown else segment.start_offset
    end = _walk(commit_log, segment.start_offset, not clean_shutdown, dispatch, report, skim_below)
    report.end_offset = end
    commit_log.truncate_after(end)
    commit_log.set_flushed_offset(min(end, segment.start_offset))
    commit_log.flush()
    for queue in dispatcher.queues.loaded():
        queue.truncate_past(end)
    if index is not None:
        index.truncate_after(end)
    if gaps:
        _rebuild_queues(commit_log, dispatcher, gaps, report)
    _log.info("store recovery: %s", report)
    return report


def _dispatch_from(
    commit_log: CommitLog, index: IndexService | None, checkpoint: Checkpoint | None, rebuild_all: bool
) -> int:
    if rebuild_all or checkpoint is None:
        return commit_log.min_offset
    dispatch_from = checkpoint.consume_queue_dispatched_offset
    if index is not None:
        dispatch_from = min(dispatch_from, checkpoint.index_dispatched_offset)
        if index.max_commit_log_offset >= 0:
            # The index may have lost entries the checkpoint counted (an unflushed tail).
            dispatch_from = min(dispatch_from, index.max_commit_log_offset + 1)
    return max(dispatch_from, commit_log.min_offset)


def _walk(
    commit_log: CommitLog,
    start_offset: int,
    verify_crc: bool,
    on_record: Callable[[int, int, MessageExt], None],
    report: RecoveryReport,
    skim_below: int = 0,
) -> int:
    """Walk valid records from ``start_offset`` (a segment start); return the valid end.

    Records below ``skim_below`` get the cheap header check only and are not reported.
    """
    segments = commit_log.segments
    segment = segments.find(start_offset)
    position = 0
    while segment is not None:
        message = None
        if segment.start_offset + position < skim_below:
            # The tail segment's bodies are CRC-checked even here: a clean start still
            # refuses to serve a record damaged after shutdown.
            in_tail = segment is segments.files[-1]
            found, size = check_record_header(
                segment.buffer, position, segment.start_offset, segment.size_bytes, in_tail
            )
            if found is RecordCheck.MESSAGE:
                position += size
                continue
        else:
            found, size, message = check_record(
                segment.buffer, position, segment.start_offset, segment.size_bytes, verify_crc
            )
        if found is RecordCheck.MESSAGE and message is not None:
            report.records_scanned += 1
            on_record(segment.start_offset + position, size, message)
            position += size
            continue
        if found is RecordCheck.BLANK:
            following = segments.find(segment.end_offset)
            if following is None:
                # A blank closes the last segment: the next put starts a new one.
                return segment.end_offset
            segment, position = following, 0
            continue
        if found is RecordCheck.CORRUPT:
            report.corrupt_offset = segment.start_offset + position
            _log.warning(
                "commit log record at offset %d fails its checks; truncating", segment.start_offset + position
            )
        return segment.start_offset + position
    return start_offset


def _rebuild_queues(
    commit_log: CommitLog, dispatcher: Dispatcher, queues: set[tuple[str, int]], report: RecoveryReport
) -> None:
    """Delete the given queues and rebuild them from the first segment."""
    _log.warning("rebuilding %d consume queues with missing entries from the commit log", len(queues))
    for topic, queue_id in queues:
        dispatcher.queues.drop(topic, queue_id)
    report.rebuilt_queues = len(queues)
    selected = dispatcher.queues

    def dispatch(message_offset: int, size: int, message: MessageExt) -> None:
        key = (message.topic, message.queue_id)
        if key in queues:
            selected.get_or_create(*key)
            dispatcher.redispatch(message, message_offset, size)

    _walk(commit_log, commit_log.min_offset, False, dispatch, RecoveryReport(report.clean_shutdown))
