"""Offline consistency check of a store directory: do CommitLog, ConsumeQueues and index agree?

``python -m orbitmq.store.verify DIR`` prints a summary and one line per problem, and exits

* 0 when the store is consistent,
* 1 when it is not,
* 2 on a usage error,
* 3 when the store needs recovery (its ``abort`` marker is present: it is open, or was not
  closed cleanly, say by SIGKILL) and is consistent apart from what that recovery redoes.

Tests call :func:`verify_store` after every scenario (bbolt's ``Check`` after each test).

The verifier only reads: nothing is created, repaired or removed. Files are read, not
mapped (a mapping of a sparse file on a full tmpfs, or of a file cut meanwhile, can kill
the reader with SIGBUS), so it also runs on a full disk and on short or sparse files. Run it
on a closed store. A store with the abort marker is checked for what its recovery will make
of it: everything below the point where recovery re-dispatches (the checkpoint's
ConsumeQueue and index points, lowered to the newest indexed record) must agree as on a
clean store, while the ConsumeQueue entries and index keys missing past it, entries
pointing past the log's valid end and a torn tail in the last segment are counted as "to
be re-dispatched by recovery", not as problems.

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
    is used by two records; a record below its queue's minimum in the queue manifest (written
    by close) needs none: its topic was deleted, and the queue kept counting from its end.

Index (``index/<yyyyMMddHHmmssSSS>``):
  * every used entry (all, or an even sample per file) points at a valid record one of whose keys
    (``<topic>#<UNIQ_KEY>`` and each ``<topic>#<KEYS token>``) has the entry's hash, with a store
    time matching the entry's time delta;
  * every slot chain stays inside the file, each entry is reachable from exactly the slot of its hash;
  * every dispatchable record with keys at or above the first indexed commit-log offset is indexed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from orbitmq.store.checkpoint import read_checkpoint
from orbitmq.store.queue_manifest import MANIFEST_FILE_NAME, read_manifest
from orbitmq.store.verify._commit_log import scan_commit_log
from orbitmq.store.verify._common import (
    ABORT_MARKER,
    CHECKPOINT_FILE,
    COMMIT_LOG_DIR,
    CONSUME_QUEUE_DIR,
    INDEX_DIR,
    CommitLogScan,
    VerifyReport,
    resolve_root,
)
from orbitmq.store.verify._consume_queue import check_dispatch_complete, scan_consume_queues
from orbitmq.store.verify._index import IndexGeometry, newest_indexed_offset, scan_index


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
    root = resolve_root(Path(path))
    report = VerifyReport(store_path=root, max_problems=max_problems)
    report.abort_marker_present = (root / ABORT_MARKER).exists()
    if report.abort_marker_present:
        report.recovery_redispatch_from = 0  # (the torn tail of the log is recovery's too)
    commit_log = scan_commit_log(root / COMMIT_LOG_DIR, commit_log_segment_bytes, report)
    if report.abort_marker_present:
        report.recovery_redispatch_from = redispatch_from(root, commit_log)
    queue_entries = scan_consume_queues(
        root / CONSUME_QUEUE_DIR, consume_queue_entries_per_file, commit_log, report
    )
    manifest = read_manifest(root / MANIFEST_FILE_NAME)
    queue_mins = {
        key: bounds.min_queue_offset
        for key, bounds in (manifest.queues.items() if manifest is not None else ())
        if bounds is not None
    }
    check_dispatch_complete(commit_log, queue_entries, report, queue_mins)
    geometry = IndexGeometry(index_hash_slot_num, index_num, index_sample_per_file)
    scan_index(root / INDEX_DIR, commit_log, geometry, report)
    return report


def redispatch_from(root: Path, commit_log: CommitLogScan) -> int:
    """Where the recovery of a store left without a clean stop starts re-dispatching records.

    As ``orbitmq.store.recovery`` computes it: the lower of the checkpoint's ConsumeQueue and
    index points and the newest indexed record (whose keys a crash may have cut halfway, so it
    is indexed again); the log's first offset without a checkpoint.
    """
    checkpoint = read_checkpoint(root / CHECKPOINT_FILE)
    if checkpoint is None:
        return commit_log.min_offset
    start = min(checkpoint.consume_queue_dispatched_offset, checkpoint.index_dispatched_offset)
    newest = newest_indexed_offset(root / INDEX_DIR)
    if newest is not None:
        start = min(start, newest)
    return min(max(start, commit_log.min_offset), max(commit_log.end_offset, commit_log.min_offset))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m orbitmq.store.verify DIR``: 0 consistent, 1 not, 2 usage error, 3 needs recovery."""
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
    root = resolve_root(args.dir)
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
    if not report.ok:
        return 1
    return 3 if report.needs_recovery else 0


__all__ = ["VerifyReport", "main", "verify_store"]
