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
5. Files lost under an intact checkpoint are found and rebuilt. The queue manifest
   (``queue_manifest.py``) lists every queue: one whose directory is gone, or whose files
   hold fewer entries than the manifest counts, is rebuilt from the whole log, with the
   queues of step 3 in the same walk; one none of whose records survive retention comes
   back empty at its old end. An index that holds nothing although the checkpoint counts
   keys is re-indexed in that walk too (keys only). A normal start skips this step's walk:
   its checks list the directory of each queue not loaded by step 3, nothing more.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from orbitmq.model.message import MessageExt
from orbitmq.protocol.message_codec import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE
from orbitmq.store.checkpoint import Checkpoint
from orbitmq.store.commit_log import CommitLog, RecordCheck, check_record, check_record_header, skim_records
from orbitmq.store.consume_queue import ConsumeQueueTable
from orbitmq.store.dispatch import Dispatcher, Redispatch
from orbitmq.store.index_service import IndexService
from orbitmq.store.mapped_file import MappedFile
from orbitmq.store.queue_manifest import QueueManifest, missing_queues, short_queues

_log = logging.getLogger(__name__)

_HEAD = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE


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
    rebuilt_queues: int = 0  # queues rebuilt from the whole log: with a gap, or lost
    lost_queues: int = 0  # queues the manifest lists whose files were missing or short
    restored_empty_queues: int = 0  # lost queues without a surviving record, restored empty
    index_rebuilt: bool = False  # the index had lost its files and was rebuilt from the whole log
    rebuild_records_scanned: int = 0  # records read by the rebuild walk
    rebuild_ms: int = 0  # time the rebuild walk took


def recover(
    commit_log: CommitLog,
    dispatcher: Dispatcher,
    checkpoint: Checkpoint | None,
    clean_shutdown: bool,
    rebuild_all_queues: bool,
    manifest: QueueManifest | None = None,
) -> RecoveryReport:
    """Recover the loaded ``commit_log`` and the derived files; return what was done.

    ``manifest`` (None for stores without one) names the queues that must exist; those whose
    files went missing are rebuilt from the log (see the module docstring, step 5).
    """
    report = RecoveryReport(clean_shutdown)
    if not commit_log.segments.files:
        return report
    index = dispatcher.index
    # Judged before recovery touches anything: an index that holds nothing although the
    # checkpoint says it was dispatched past the log's start has lost its files.
    index_lost = _index_lost(commit_log, index, checkpoint, manifest)
    missing = missing_queues(manifest, dispatcher.queues.names()) if manifest is not None else set()
    if index is not None and not clean_shutdown and index.max_commit_log_offset >= 0:
        # A crash may have indexed only some keys of the newest record: drop it and redo it.
        index.truncate_after(index.max_commit_log_offset)
    dispatch_from = _dispatch_from(commit_log, index, checkpoint, rebuild_all_queues)
    if manifest is not None:
        # Empty queues (emptied by retention or by a topic deletion) come back at their end
        # before the walk, so deleted records it meets (below that end) are not dispatched again.
        restored = _restore_empty(dispatcher.queues, manifest, missing, holding=False)
        # An empty queue's directory holds nothing to lose: restored, it is not a loss.
        missing -= restored
    else:
        restored = set()
    gaps = _recover_log(commit_log, dispatcher, checkpoint, dispatch_from, report)
    _recover_lost_files(commit_log, dispatcher, manifest, missing, gaps, index_lost, report, restored)
    _log.info("store recovery: %s", report)
    return report


def _recover_log(
    commit_log: CommitLog,
    dispatcher: Dispatcher,
    checkpoint: Checkpoint | None,
    dispatch_from: int,
    report: RecoveryReport,
) -> set[tuple[str, int]]:
    """Steps 1-4: find the log's end, re-dispatch from ``dispatch_from``; return queues with a gap."""
    index = dispatcher.index
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
    skim_below = dispatch_from if report.clean_shutdown else segment.start_offset
    end = _walk(commit_log, segment.start_offset, not report.clean_shutdown, dispatch, report, skim_below)
    report.end_offset = end
    commit_log.truncate_after(end)
    commit_log.set_flushed_offset(min(end, segment.start_offset))
    commit_log.flush()
    for queue in dispatcher.queues.loaded():
        queue.truncate_past(end)
    if index is not None:
        index.truncate_after(end)
    return gaps


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
        # The mapping is read only where the file has blocks (see mapped_file); past them,
        # records are read from the file itself.
        readable = segment.allocated_position
        if not _mapped_record(segment, position, readable):
            found, size, message = _check_unmapped(segment, position, verify_crc)
        elif segment.start_offset + position < skim_below:
            # The tail segment's bodies are CRC-checked even here: a clean start still
            # refuses to serve a record damaged after shutdown.
            in_tail = segment is segments.files[-1]
            skimmed = skim_records(
                segment.buffer,
                position,
                min(skim_below - segment.start_offset, readable),
                segment.start_offset,
                readable,
                in_tail,
            )
            if skimmed != position:
                position = skimmed
                continue
            # The skim stopped here: a blank, the end, damage, or a record it leaves to the
            # checks below.
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


def _mapped_record(segment: MappedFile, position: int, readable: int) -> bool:
    """Whether the record (or blank, or end) at ``position`` lies wholly below ``readable``."""
    if position + _HEAD.size > readable:
        return False
    total_size: int
    magic: int
    total_size, magic = _HEAD.unpack_from(segment.buffer, position)
    if magic == BLANK_MAGIC_CODE:
        return True  # only its header is read
    return total_size > 0 and position + total_size <= readable


def _check_unmapped(
    segment: MappedFile, position: int, verify_crc: bool
) -> tuple[RecordCheck, int, MessageExt | None]:
    """:func:`check_record` at ``position`` on bytes read from the file rather than the mapping."""
    remaining = segment.size_bytes - position
    head = segment.read_file(position, _HEAD.size)
    if len(head) < _HEAD.size:
        return RecordCheck.CORRUPT, 0, None
    total_size, magic = _HEAD.unpack(head)
    if magic == MESSAGE_MAGIC_CODE and _HEAD.size < total_size <= remaining:
        head = segment.read_file(position, total_size)
    return check_record(head, 0, segment.start_offset + position, remaining, verify_crc)


def _recover_lost_files(
    commit_log: CommitLog,
    dispatcher: Dispatcher,
    manifest: QueueManifest | None,
    missing: set[tuple[str, int]],
    gaps: set[tuple[str, int]],
    index_lost: bool,
    report: RecoveryReport,
    restored: set[tuple[str, int]],
) -> None:
    """Step 5, after the log's end is known: rebuild lost queues, queues with a gap, a lost index.

    ``restored``: empty queues already restored before the walk (counted once).
    """
    lost = set(missing)
    # A manifest counting entries past the recovered end predates a lost log tail: its
    # counts no longer hold, only its list of queues does.
    counts_hold = manifest is not None and manifest.commit_log_end_offset <= report.end_offset
    if report.dispatch_from_offset > commit_log.min_offset:
        # (Otherwise the first walk re-dispatched the whole log and nothing can be missing.)
        if manifest is not None and counts_hold:
            lost |= short_queues(manifest, dispatcher.queues, missing)
        _rebuild_lost(commit_log, dispatcher, gaps, lost, index_lost, manifest, report)
    elif gaps:
        _rebuild_from_log(commit_log, dispatcher, gaps, set(), False, report)
    if manifest is not None and counts_hold:
        restored |= _restore_empty(dispatcher.queues, manifest, lost)
    report.restored_empty_queues = len(restored)
    if report.corrupt_offset is not None or (manifest is not None and not counts_hold):
        # The log lost records that queues not loaded yet may still point at; loading cuts
        # them now, before a later session's records reuse those commit-log offsets.
        for topic, queue_id in dispatcher.queues.names():
            dispatcher.queues.get(topic, queue_id)


def _index_lost(
    commit_log: CommitLog,
    index: IndexService | None,
    checkpoint: Checkpoint | None,
    manifest: QueueManifest | None,
) -> bool:
    """Whether the index lost its files: it holds nothing, yet the checkpoint counts keys in it."""
    if index is None or checkpoint is None or index.max_commit_log_offset >= 0:
        return False
    if checkpoint.index_dispatched_offset <= commit_log.min_offset:
        return False
    # A log without keys leaves the index empty too; a manifest tells the two apart.
    return manifest is None or manifest.index_has_entries


def _rebuild_lost(
    commit_log: CommitLog,
    dispatcher: Dispatcher,
    gaps: set[tuple[str, int]],
    lost: set[tuple[str, int]],
    index_lost: bool,
    manifest: QueueManifest | None,
    report: RecoveryReport,
) -> None:
    """Step 5: one walk over the whole log for queues with a gap, lost queues and a lost index."""
    report.lost_queues = len(lost)
    known = manifest.queues if manifest is not None else {}
    # A lost queue that held no entries has nothing in the log to rebuild: it is restored
    # empty afterwards, and walks only along with the others.
    lost_with_entries = [key for key in lost if (bounds := known.get(key)) is None or bounds.holds_entries]
    reindex = index_lost and report.end_offset > commit_log.min_offset
    if gaps or lost_with_entries or reindex:
        _rebuild_from_log(commit_log, dispatcher, gaps, lost, reindex, report)


def _names(queues: set[tuple[str, int]], shown_max: int = 20) -> str:
    names = [f"{topic}/{queue_id}" for topic, queue_id in sorted(queues)]
    if len(names) > shown_max:
        return ", ".join(names[:shown_max]) + f" and {len(names) - shown_max} more"
    return ", ".join(names)


def _rebuild_from_log(
    commit_log: CommitLog,
    dispatcher: Dispatcher,
    gaps: set[tuple[str, int]],
    lost: set[tuple[str, int]],
    reindex: bool,
    report: RecoveryReport,
) -> None:
    """Delete the given queues and rebuild them, and the index if ``reindex``, from the first segment.

    Only the records of those queues reach a ConsumeQueue: the others are complete.
    """
    started_ns = time.monotonic_ns()
    if gaps:
        _log.warning("consume queues missing entries below the checkpoint: %s", _names(gaps))
    if lost:
        _log.warning("consume queues lost while the checkpoint was intact: %s", _names(lost))
    if reindex:
        _log.warning(
            "the index lost its files although the checkpoint counts keys past commit-log offset %d",
            commit_log.min_offset,
        )
    queues = gaps | lost
    for topic, queue_id in queues:
        dispatcher.queues.drop(topic, queue_id)
    report.rebuilt_queues = len(queues)
    index = dispatcher.index if reindex else None
    if index is not None:
        # The first walk indexed the records past the checkpoint; index them again in log order.
        index.truncate_after(commit_log.min_offset)
        report.index_rebuilt = True

    def dispatch(message_offset: int, size: int, message: MessageExt) -> None:
        if (message.topic, message.queue_id) in queues:
            dispatcher.redispatch(message, message_offset, size)
        elif index is not None:
            dispatcher.index_new(message, message_offset)

    walked = RecoveryReport(report.clean_shutdown)
    _walk(commit_log, commit_log.min_offset, False, dispatch, walked)
    report.rebuild_records_scanned = walked.records_scanned
    report.rebuild_ms = (time.monotonic_ns() - started_ns) // 1_000_000
    _log.warning(
        "rebuilt %d consume queues%s from the whole commit log (%d records) in %d ms",
        len(queues),
        " and the index" if index is not None else "",
        walked.records_scanned,
        report.rebuild_ms,
    )


def _restore_empty(
    table: ConsumeQueueTable, manifest: QueueManifest, lost: set[tuple[str, int]], holding: bool = True
) -> set[tuple[str, int]]:
    """Recreate lost queues none of whose records survive, empty at their old end; return which.

    Retention can take every record of a queue, and deleting a topic empties its queues; the
    queue still counts its history, so that consumers' offsets stay valid and the next put
    continues the numbering. ``holding=False`` restores only queues the manifest lists as
    empty (the ones that need no walk of the log).
    """
    restored: set[tuple[str, int]] = set()
    for topic, queue_id in sorted(lost):
        bounds = manifest.queues.get((topic, queue_id))
        if bounds is None or bounds.max_queue_offset == 0 or table.get(topic, queue_id) is not None:
            continue
        if not holding and bounds.holds_entries:
            continue
        table.restore_empty(topic, queue_id, bounds.max_queue_offset)
        restored.add((topic, queue_id))
        # A queue the manifest lists as empty (its topic deleted, or retention took every
        # record) is the expected state, not news: a restart after deleting topics stays
        # quiet. A queue the manifest says held entries that the log no longer has is worth
        # a warning.
        _log.log(
            logging.WARNING if bounds.holds_entries else logging.DEBUG,
            "consume queue %s/%d has no record left in the commit log; restored empty at queue offset %d",
            topic,
            queue_id,
            bounds.max_queue_offset,
        )
    return restored
