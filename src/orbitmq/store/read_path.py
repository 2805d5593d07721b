"""The read half of a pull: turn ConsumeQueue entries into raw stored records.

A pull answers with the records concatenated, so it need not see them one by one: with
``whole_runs`` the records that lie next to each other in the commit log (a batch sent to
one queue, or a topic with one queue) are read as one slice per run, not one ``bytes`` per
record. Every entry is still checked as before (removed, tag filter, read limit); only the
reads are merged, and a run whose merged read fails (it would cross a segment's end) is read
record by record, with the same outcome as without ``whole_runs``.

The two loops repeat their entry checks on purpose: they run once per record on every pull,
and sharing them through a generator or a callback would add a call per record to the path
this module exists to keep short. ``tests/unit/store/test_read_runs.py`` holds them in step
(property-based: the same answers from both for any entries, filters, limits and segments).
"""

from __future__ import annotations

from collections.abc import Callable

from orbitmq.store.commit_log import CommitLog
from orbitmq.store.consume_queue import ENTRY
from orbitmq.store.results import GetResult, GetStatus


def collect_records(
    commit_log: CommitLog,
    result: GetResult,
    entries: bytes,
    queue_offset: int,
    max_msg_nums: int,
    max_total_bytes: int,
    tag_filter: Callable[[int], bool] | None,
    record_filter: Callable[[bytes], bool] | None = None,
    read_limit: int | None = None,
    *,
    whole_runs: bool = False,
) -> None:
    """Fill ``result`` with the records that consume-queue ``entries`` point at (store lock held).

    Stops at ``max_msg_nums`` records or before passing ``max_total_bytes`` (the first record
    always fits); entries below the commit-log minimum count as removed, ``tag_filter``
    sees each entry's tags code, and ``record_filter`` each record that passed it (a property
    filter: the records it refuses are skipped like the tag filter's). A record that does not
    end at or before ``read_limit`` (a confirm offset: bytes a failover could still discard)
    stops the read before it; a read stopped there with nothing found is ``OFFSET_OVERFLOW_ONE``
    at ``queue_offset`` (nothing new yet). With ``whole_runs`` (and no ``record_filter``)
    ``result.buffers`` holds one slice per run of adjacent records instead of one per record.
    """
    if whole_runs and record_filter is None:
        _collect_runs(
            commit_log, result, entries, queue_offset, max_msg_nums, max_total_bytes, tag_filter, read_limit
        )
        return
    commit_log_min = commit_log.min_offset
    buffers, queue_offsets, commit_log_offsets = (
        result.buffers,
        result.queue_offsets,
        result.commit_log_offsets,
    )
    scanned = removed = filtered = 0
    total_bytes = 0
    for commit_log_offset, size, tags in ENTRY.iter_unpack(entries):
        if len(buffers) >= max_msg_nums or (buffers and total_bytes + size > max_total_bytes):
            break
        if read_limit is not None and commit_log_offset + size > read_limit and size > 0:
            if not buffers and not scanned:
                result.status = GetStatus.OFFSET_OVERFLOW_ONE
                result.next_begin_offset = queue_offset
                result.gated = True
                return
            break
        scanned += 1
        if commit_log_offset < commit_log_min or size <= 0:
            removed += 1
            continue
        if tag_filter is not None and not tag_filter(tags):
            filtered += 1
            continue
        record = commit_log.read(commit_log_offset, size)
        if record is None:
            removed += 1
            continue
        if record_filter is not None and not record_filter(record):
            filtered += 1
            continue
        buffers.append(record)
        queue_offsets.append(queue_offset + scanned - 1)
        commit_log_offsets.append(commit_log_offset)
        total_bytes += size
    result.next_begin_offset = queue_offset + scanned
    if not buffers:
        result.status = GetStatus.NO_MATCHED_MESSAGE if filtered else GetStatus.MESSAGE_WAS_REMOVING


def _collect_runs(
    commit_log: CommitLog,
    result: GetResult,
    entries: bytes,
    queue_offset: int,
    max_msg_nums: int,
    max_total_bytes: int,
    tag_filter: Callable[[int], bool] | None,
    read_limit: int | None,
) -> None:
    """:func:`collect_records` reading runs of adjacent records as one slice each."""
    commit_log_min = commit_log.min_offset
    buffers, queue_offsets, commit_log_offsets = (
        result.buffers,
        result.queue_offsets,
        result.commit_log_offsets,
    )
    # Each run: (first commit-log offset, bytes, first index into the per-record lists).
    runs: list[tuple[int, int, int]] = []
    run_start = run_end = -1
    run_index = 0
    sizes: list[int] = []
    scanned = removed = filtered = 0
    total_bytes = 0
    for commit_log_offset, size, tags in ENTRY.iter_unpack(entries):
        count = len(commit_log_offsets)
        if count >= max_msg_nums or (count and total_bytes + size > max_total_bytes):
            break
        if read_limit is not None and commit_log_offset + size > read_limit and size > 0:
            if not count and not scanned:
                result.status = GetStatus.OFFSET_OVERFLOW_ONE
                result.next_begin_offset = queue_offset
                result.gated = True
                return
            break
        scanned += 1
        if commit_log_offset < commit_log_min or size <= 0:
            removed += 1
            continue
        if tag_filter is not None and not tag_filter(tags):
            filtered += 1
            continue
        if commit_log_offset != run_end:
            if run_start >= 0:
                runs.append((run_start, run_end - run_start, run_index))
            run_start, run_index = commit_log_offset, count
        run_end = commit_log_offset + size
        queue_offsets.append(queue_offset + scanned - 1)
        commit_log_offsets.append(commit_log_offset)
        sizes.append(size)
        total_bytes += size
    if run_start >= 0:
        runs.append((run_start, run_end - run_start, run_index))
    unreadable: set[int] = set()
    for index, (start, length, first) in enumerate(runs):
        run = commit_log.read(start, length)
        if run is not None:
            buffers.append(run)
            continue
        last = runs[index + 1][2] if index + 1 < len(runs) else len(commit_log_offsets)
        for position in range(first, last):
            record = commit_log.read(commit_log_offsets[position], sizes[position])
            if record is None:
                unreadable.add(position)
            else:
                buffers.append(record)
    if unreadable:
        removed += len(unreadable)
        result.queue_offsets = [o for i, o in enumerate(queue_offsets) if i not in unreadable]
        result.commit_log_offsets = [o for i, o in enumerate(commit_log_offsets) if i not in unreadable]
    result.next_begin_offset = queue_offset + scanned
    if not buffers:
        result.status = GetStatus.NO_MATCHED_MESSAGE if filtered else GetStatus.MESSAGE_WAS_REMOVING
