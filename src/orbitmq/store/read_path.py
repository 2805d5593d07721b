"""The read half of a pull: turn ConsumeQueue entries into raw stored records.

A pull answers with the records concatenated, so it need not see them one by one: with
``whole_runs`` the records that lie next to each other in the commit log (a batch sent to
one queue, or a topic with one queue) are read as one slice per run, not one ``bytes`` per
record. Every entry is still checked as before (removed, tag filter, read limit); only the
reads are merged, and a run whose merged read fails (it would cross a segment's end) is read
record by record, with the same outcome as without ``whole_runs``.

Without a filter, the common case (no entry removed, every record published in one
segment) takes a shortcut (``_collect_unfiltered``): the entries are checked as columns, by
``min``, ``map`` and ``accumulate`` over one unpack of them, and the records are sliced from
the segment's mapping, as one slice when they all lie next to each other and else one slice
each, cut by ``map``: the Python work of a pull does not grow with its message count. Any
other case runs the loop below.

A property filter (:class:`RecordFilter`, a SQL92 subscription) with ``whole_runs`` is asked
about a block of entries at a time, over the records as they lie in the mapped segment
(``matches_in``): no record is copied before it is known to match, and the matched records
that lie next to each other are still read as one slice. A block is as many entries as the
pull still needs records (at least :data:`FILTER_BLOCK_MIN`); a record outside the block's
segment is read and asked about alone.

The three loops repeat their entry checks on purpose: they run once per record on every pull,
and sharing them through a generator or a callback would add a call per record to the path
this module exists to keep short. ``tests/unit/store/test_read_runs.py`` holds them in step
(property-based: the same answers from all for any entries, filters, limits and segments).
"""

from __future__ import annotations

import mmap
import struct
from bisect import bisect_right
from collections.abc import Callable
from functools import lru_cache
from itertools import accumulate, repeat
from operator import add, sub
from typing import Protocol

from orbitmq.store.commit_log import CommitLog
from orbitmq.store.consume_queue import ENTRY, ENTRY_BYTES
from orbitmq.store.results import GetResult, GetStatus

FILTER_BLOCK_MIN = 128
"""Fewest entries a property filter is asked about at once (see the module docstring)."""


class RecordFilter(Protocol):
    """A property filter over stored records (``orbitmq.filter.StoredRecordFilter`` is one)."""

    def __call__(self, record: bytes, /) -> bool:
        """Whether one stored record matches."""
        ...

    def matches_in(
        self, buffer: mmap.mmap, base: int, limit: int, rows: list[tuple[int, int, int]], /
    ) -> list[bool | None]:
        """Whether each record of ``rows`` (consume-queue entries) matches, read in place.

        ``buffer[0]`` is at commit-log offset ``base`` and its first ``limit`` bytes are
        published. A record lying there is answered as ``self(its bytes)`` would answer; one
        that does not lie wholly there is answered None.
        """
        ...


def collect_records(
    commit_log: CommitLog,
    result: GetResult,
    entries: bytes,
    queue_offset: int,
    max_msg_nums: int,
    max_total_bytes: int,
    tag_filter: Callable[[int], bool] | None,
    record_filter: RecordFilter | None = None,
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
    at ``queue_offset`` (nothing new yet). With ``whole_runs`` ``result.buffers`` holds one
    slice per run of adjacent records instead of one per record, and ``record_filter`` is
    asked about blocks of records in place (see the module docstring).
    """
    if whole_runs:
        if (
            tag_filter is None
            and record_filter is None
            and _collect_unfiltered(
                commit_log, result, entries, queue_offset, max_msg_nums, max_total_bytes, read_limit
            )
        ):
            return
        _collect_runs(
            commit_log,
            result,
            entries,
            queue_offset,
            max_msg_nums,
            max_total_bytes,
            tag_filter,
            record_filter,
            read_limit,
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


@lru_cache(maxsize=64)
def _entries_struct(count: int) -> struct.Struct:
    """``count`` consume-queue entries as one flat tuple (offset, size, tags, offset, ...)."""
    return struct.Struct(">" + "qiq" * count)


def _collect_unfiltered(
    commit_log: CommitLog,
    result: GetResult,
    entries: bytes,
    queue_offset: int,
    max_msg_nums: int,
    max_total_bytes: int,
    read_limit: int | None,
) -> bool:
    """:func:`_collect_runs` without filters, for entries that all point at records in place.

    The common pull: every entry is read, none was removed, and all the records lie in one
    segment. The entries are checked as columns (one unpack, then ``min``, ``map`` and
    ``accumulate`` over them) instead of one entry per loop turn, and the records are sliced
    from the segment's mapping: as one slice when they lie next to each other (a batch sent
    to one queue), else one slice each, cut by ``map`` without a loop turn per record.
    Returns False, with ``result`` untouched, when some entry needs the loop's treatment (a
    removed or empty entry, one past ``read_limit`` or past the segment's published bytes):
    the caller runs the loop.
    """
    count = min(len(entries) // ENTRY_BYTES, max_msg_nums)
    if count <= 0:
        return False
    fields = _entries_struct(count).unpack_from(entries)
    offsets = fields[0::3]
    sizes = fields[1::3]
    if min(sizes) <= 0 or min(offsets) < commit_log.min_offset:
        return False
    totals = list(accumulate(sizes))
    if totals[-1] > max_total_bytes:
        # Stop before the record that would pass the cap; the first one always fits.
        count = max(bisect_right(totals, max_total_bytes), 1)
        offsets, sizes = offsets[:count], sizes[:count]
    ends = list(map(add, offsets, sizes))
    last_end = max(ends)
    if read_limit is not None and last_end > read_limit:
        return False
    segment = commit_log.published_segment(offsets[0])
    if segment is None:
        return False
    buffer, base, published_bytes = segment
    if min(offsets) < base or last_end > base + published_bytes:
        return False
    if ends[:-1] == list(offsets[1:]):
        result.buffers = [buffer[offsets[0] - base : last_end - base]]
    else:
        starts = map(sub, offsets, repeat(base))
        stops = map(sub, ends, repeat(base))
        result.buffers = list(map(buffer.__getitem__, map(slice, starts, stops)))
    result.queue_offsets = list(range(queue_offset, queue_offset + count))
    result.commit_log_offsets = list(offsets)
    result.next_begin_offset = queue_offset + count
    return True


def _collect_runs(
    commit_log: CommitLog,
    result: GetResult,
    entries: bytes,
    queue_offset: int,
    max_msg_nums: int,
    max_total_bytes: int,
    tag_filter: Callable[[int], bool] | None,
    record_filter: RecordFilter | None,
    read_limit: int | None,
) -> None:
    """:func:`collect_records` reading runs of adjacent records as one slice each; a property
    filter is asked about blocks of records in place."""
    commit_log_min = commit_log.min_offset
    queue_offsets, commit_log_offsets = result.queue_offsets, result.commit_log_offsets
    # Each run: (first commit-log offset, bytes, first index into the per-record lists).
    runs: list[tuple[int, int, int]] = []
    run_start = run_end = -1
    run_index = 0
    sizes: list[int] = []
    scanned = removed = filtered = 0
    total_bytes = 0
    entry_count = len(entries) // ENTRY_BYTES
    # The filter's answers for entries [block_start, block_end).
    block_start = block_end = 0
    answers: list[bool | None] = []
    for index, (commit_log_offset, size, tags) in enumerate(ENTRY.iter_unpack(entries)):
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
        if record_filter is not None:
            if index >= block_end:
                block_start = index
                block_end = min(entry_count, index + max(max_msg_nums - count, FILTER_BLOCK_MIN))
                segment = commit_log.published_segment(commit_log_offset)
                if segment is None:
                    answers = [None] * (block_end - block_start)
                else:
                    rows = list(
                        ENTRY.iter_unpack(entries[block_start * ENTRY_BYTES : block_end * ENTRY_BYTES])
                    )
                    answers = record_filter.matches_in(*segment, rows)
            matches = answers[index - block_start]
            if matches is None:  # not in the block's segment: read and asked about alone
                record = commit_log.read(commit_log_offset, size)
                if record is None:
                    removed += 1
                    continue
                matches = record_filter(record)
            if not matches:
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
    removed += _read_runs(commit_log, result, runs, sizes)
    result.next_begin_offset = queue_offset + scanned
    if not result.buffers:
        result.status = GetStatus.NO_MATCHED_MESSAGE if filtered else GetStatus.MESSAGE_WAS_REMOVING


def _read_runs(
    commit_log: CommitLog, result: GetResult, runs: list[tuple[int, int, int]], sizes: list[int]
) -> int:
    """Read each run into ``result.buffers`` (record by record when the run's read fails).

    ``runs`` holds (first commit-log offset, bytes, first index into the per-record lists);
    the records that cannot be read are dropped from ``result``'s offsets. Returns their count.
    """
    buffers, commit_log_offsets = result.buffers, result.commit_log_offsets
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
        result.queue_offsets = [o for i, o in enumerate(result.queue_offsets) if i not in unreadable]
        result.commit_log_offsets = [o for i, o in enumerate(commit_log_offsets) if i not in unreadable]
    return len(unreadable)
