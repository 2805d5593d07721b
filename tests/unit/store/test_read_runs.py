"""A read with ``whole_runs`` (what a pull asks for) answers exactly what a record-by-record read does.

Records sent as one batch to one queue lie next to each other in the commit log and are read
as one slice; singles interleaved across queues are not adjacent; tiny segments make reads
cross segment ends. Status, offsets, counts and the concatenated bytes must all agree.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbitmq.protocol.tags import TagFilter
from orbitmq.store.commit_log import CommitLog
from orbitmq.store.message_store import GetResult, GetStatus, MessageStore, PutMessageRequest, PutStatus
from orbitmq.store.read_path import collect_records

OpenStore = Callable[..., MessageStore]
TAGS = ("red", "blue")


def _put(store: MessageStore, queue_id: int, bodies: list[int], tag: str) -> None:
    requests = [
        PutMessageRequest(
            topic="Runs", queue_id=queue_id, body=bytes([size % 251]) * size, properties={"TAGS": tag}
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
