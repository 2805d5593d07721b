"""A read with ``whole_runs`` (what a pull asks for) answers exactly what a record-by-record read does.

Records sent as one batch to one queue lie next to each other in the commit log and are read
as one slice; singles interleaved across queues are not adjacent; tiny segments make reads
cross segment ends. Status, offsets, counts and the concatenated bytes must all agree, with
and without a SQL92 property filter (asked about blocks of records in place, with the
compiled property scan and with the pure-Python path, blocks of any size).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbitmq import native
from orbitmq.filter import compile_filter
from orbitmq.filter import records as records_module
from orbitmq.protocol.tags import TagFilter
from orbitmq.store import read_path
from orbitmq.store.commit_log import CommitLog
from orbitmq.store.message_store import GetResult, GetStatus, MessageStore, PutMessageRequest, PutStatus
from orbitmq.store.read_path import collect_records

OpenStore = Callable[..., MessageStore]
TAGS = ("red", "blue")


def _put(store: MessageStore, queue_id: int, bodies: list[int], tag: str) -> None:
    requests = [
        PutMessageRequest(
            topic="Runs",
            queue_id=queue_id,
            body=bytes([size % 251]) * size,
            properties={"TAGS": tag, "n": str(size % 5)},
        )
        for size in bodies
    ]
    assert store.put_messages(requests).status is PutStatus.PUT_OK


def _view(result: GetResult) -> tuple[Any, ...]:
    return (
        result.status,
        result.next_begin_offset,
        result.min_offset,
        result.max_offset,
        result.queue_offsets,
        result.commit_log_offsets,
        result.message_count,
        result.total_bytes,
        result.body(),
        result.gated,
    )


puts = st.lists(
    st.tuples(
        st.integers(0, 2), st.lists(st.integers(0, 3000), min_size=1, max_size=8), st.sampled_from(TAGS)
    ),
    min_size=1,
    max_size=30,
)
reads = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.integers(0, 40),
        st.integers(1, 40),
        st.sampled_from((1, 5000, 256 * 1024)),
        st.sampled_from((None, *TAGS)),
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(puts=puts, reads=reads)
def test_read_runs_answer_like_record_reads(
    open_store: OpenStore, tmp_path: Path, puts: Any, reads: Any
) -> None:
    store = open_store(Path(tempfile.mkdtemp(dir=tmp_path)), verify=False)  # a fresh store per example
    try:
        for queue_id, bodies, tag in puts:
            _put(store, queue_id, bodies, tag)
        for queue_id, offset, max_nums, max_bytes, tag in reads:
            tag_filter = None if tag is None else TagFilter.parse(tag).matches_code
            by_record = store.get_messages("Runs", queue_id, offset, max_nums, max_bytes, tag_filter)
            by_run = store.get_messages(
                "Runs", queue_id, offset, max_nums, max_bytes, tag_filter, whole_runs=True
            )
            assert _view(by_run) == _view(by_record)
            assert len(by_run.buffers) <= len(by_record.buffers)
    finally:
        store.close()


def test_read_runs_batch_is_one_buffer(open_store: OpenStore) -> None:
    store = open_store()
    _put(store, 0, [100] * 50, "red")
    got = store.get_messages("Runs", 0, 0, 50, whole_runs=True)
    assert got.status is GetStatus.FOUND
    assert len(got.buffers) == 1 and got.message_count == 50
    assert got.body() == store.get_messages("Runs", 0, 0, 50).body()


def test_read_runs_stop_at_the_read_limit_like_record_reads(open_store: OpenStore) -> None:
    store = open_store()
    _put(store, 0, [100] * 10, "red")
    limit = store.get_messages("Runs", 0, 4, 1).commit_log_offsets[0]
    store.read_limit = limit
    assert _view(store.get_messages("Runs", 0, 0, 32, whole_runs=True)) == _view(
        store.get_messages("Runs", 0, 0, 32)
    )
    gated = store.get_messages("Runs", 0, 4, 32, whole_runs=True)
    assert (gated.status, gated.gated, gated.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, True, 4)


class _RunRefusingLog:
    """A commit log whose reads longer than one record fail (as a read past a segment's end does)."""

    def __init__(self, log: CommitLog, record_bytes: int, unreadable: int) -> None:
        self.min_offset = log.min_offset
        self._log = log
        self._record_bytes = record_bytes
        self._unreadable = unreadable

    def read(self, commit_log_offset: int, size_bytes: int) -> bytes | None:
        if size_bytes > self._record_bytes or commit_log_offset == self._unreadable:
            return None
        return self._log.read(commit_log_offset, size_bytes)

    def published_segment(self, commit_log_offset: int) -> None:
        """No mapping to read in place: every read goes through :meth:`read`."""
        return None


def test_read_runs_fall_back_to_records_when_a_run_cannot_be_read(open_store: OpenStore) -> None:
    store = open_store()
    _put(store, 0, [100] * 6, "red")
    reference = store.get_messages("Runs", 0, 0, 32)
    record_bytes = len(reference.buffers[0])
    entries = store._queues.get("Runs", 0).read_entries(0, 32)  # type: ignore[union-attr]
    log = _RunRefusingLog(store._commit_log, record_bytes, reference.commit_log_offsets[2])  # noqa: SLF001
    result = GetResult(GetStatus.FOUND, 0, 0, 6)
    collect_records(log, result, entries, 0, 32, 1 << 20, None, whole_runs=True)  # type: ignore[arg-type]
    assert result.queue_offsets == [0, 1, 3, 4, 5]
    assert result.body() == b"".join(reference.buffers[:2] + reference.buffers[3:])
    assert result.next_begin_offset == 6 and result.message_count == 5


_property_scan = native.load("orbitmq.filter._property_scan")


@pytest.fixture(scope="module", params=["compiled", "pure-python"])
def scan_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a test with the compiled property scan, then with the pure-Python path."""
    saved = records_module.record_values
    if request.param == "compiled":
        if _property_scan is None:
            pytest.skip("the compiled property scan is not built (see orbitmq/native.py)")
        records_module.record_values = _property_scan.record_values
    else:
        records_module.record_values = records_module.record_values_py
    yield request.param
    records_module.record_values = saved


_EXPRESSIONS = ("n < 2", "TAGS = 'red' AND n <> 3", "n IS NULL", "n >= 0")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    puts=puts,
    reads=reads,
    expression=st.sampled_from(_EXPRESSIONS),
    block_min=st.sampled_from((1, 3, read_path.FILTER_BLOCK_MIN)),
)
def test_filtered_read_runs_answer_like_record_reads(
    scan_mode: str,
    open_store: OpenStore,
    tmp_path: Path,
    puts: Any,
    reads: Any,
    expression: str,
    block_min: int,
) -> None:
    store = open_store(Path(tempfile.mkdtemp(dir=tmp_path)), verify=False)
    record_filter = compile_filter("SQL92", expression).stored_record_filter()
    saved_block_min = read_path.FILTER_BLOCK_MIN
    read_path.FILTER_BLOCK_MIN = block_min
    try:
        for queue_id, bodies, tag in puts:
            _put(store, queue_id, bodies, tag)
        for queue_id, offset, max_nums, max_bytes, tag in reads:
            tag_filter = None if tag is None else TagFilter.parse(tag).matches_code
            args = ("Runs", queue_id, offset, max_nums, max_bytes, tag_filter, record_filter)
            by_record = store.get_messages(*args)
            by_run = store.get_messages(*args, whole_runs=True)
            assert _view(by_run) == _view(by_record)
            assert len(by_run.buffers) <= len(by_record.buffers)
    finally:
        read_path.FILTER_BLOCK_MIN = saved_block_min
        store.close()


def test_filtered_read_runs_serve_matched_neighbours_as_one_slice(
    scan_mode: str, open_store: OpenStore
) -> None:
    store = open_store()
    _put(store, 0, [100] * 10 + [101] * 5 + [100] * 10, "red")  # n = 0, then 1, then 0
    record_filter = compile_filter("SQL92", "n = 0").stored_record_filter()
    got = store.get_messages("Runs", 0, 0, 32, record_filter=record_filter, whole_runs=True)
    assert got.status is GetStatus.FOUND and got.message_count == 20
    assert got.queue_offsets == [*range(10), *range(15, 25)]
    assert len(got.buffers) == 2
    assert got.body() == store.get_messages("Runs", 0, 0, 32, record_filter=record_filter).body()
    none = compile_filter("SQL92", "n = 4").stored_record_filter()
    missed = store.get_messages("Runs", 0, 0, 32, record_filter=none, whole_runs=True)
    assert (missed.status, missed.next_begin_offset, missed.buffers) == (GetStatus.NO_MATCHED_MESSAGE, 25, [])


def test_filtered_read_runs_read_records_past_the_blocks_segment(
    scan_mode: str, open_store: OpenStore
) -> None:
    store = open_store()
    for _ in range(6):  # about 190 KB: the queue spans three 64 KiB segments
        _put(store, 0, [3000] * 10, "red")
    record_filter = compile_filter("SQL92", "n = 0").stored_record_filter()
    by_record = store.get_messages("Runs", 0, 0, 60, 1 << 20, None, record_filter)
    by_run = store.get_messages("Runs", 0, 0, 60, 1 << 20, None, record_filter, whole_runs=True)
    assert by_record.message_count == 60
    assert _view(by_run) == _view(by_record)
    assert 1 < len(by_run.buffers) < 60  # one run per segment
