"""ConsumeQueue write-out: many queues from several threads, failures, the descriptor bound, sync.

Method: fill a ConsumeQueueTable with tiny files (ENTRIES per file, so writes roll files),
write it out, and compare every file entry read back from disk with what was put. The
``consume_queue.before_write`` failpoint observes the write-out from inside (which thread,
how many descriptors are open) and injects failures.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest

from orbitmq.errors import StoreError
from orbitmq.store import _queue_writeout
from orbitmq.store._fs import failpoints
from orbitmq.store._queue_writeout import (
    CHUNK_JOBS,
    PARALLEL_JOBS_MIN,
    SYNC_EACH_FILE_MAX,
    WRITE_BATCH_ENTRIES,
)
from orbitmq.store.checkpoint import read_checkpoint
from orbitmq.store.consume_queue import ENTRY, ConsumeQueueTable, iterate_consume_queue
from orbitmq.store.message_store import MessageStore, PutMessageRequest

ENTRIES = 10
OpenStore = Callable[..., MessageStore]
TOPICS = 3
QUEUES = PARALLEL_JOBS_MIN + 44  # enough creating jobs for the threaded path


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    failpoints.disarm()


def _table(root: Path, threads: int = 3, max_open: int = 8) -> ConsumeQueueTable:
    table = ConsumeQueueTable(root / "consumequeue", ENTRIES, max_open, lambda: (0, 10**12), threads)
    table.scan_disk()
    return table


def _keys(count: int = QUEUES) -> list[tuple[str, int]]:
    return [(f"T{index % TOPICS}", index // TOPICS) for index in range(count)]


def _put(table: ConsumeQueueTable, keys: list[tuple[str, int]], count_of: Callable[[int], int]) -> None:
    """Append ``count_of(index)`` entries to each queue; an entry encodes its queue and offset."""
    for index, (topic, queue_id) in enumerate(keys):
        queue = table.get_or_create(topic, queue_id)
        for _ in range(count_of(index)):
            queue_offset = queue.max_queue_offset
            queue.put(queue_offset, index * 1_000_000 + queue_offset, 100 + index, queue_offset)
        table.dirty.add(queue)


def _expected(index: int, entry_count: int) -> list[tuple[int, int, int, int]]:
    return [(offset, index * 1_000_000 + offset, 100 + index, offset) for offset in range(entry_count)]


def _assert_on_disk(root: Path, keys: list[tuple[str, int]], count_of: Callable[[int], int]) -> None:
    for index, (topic, queue_id) in enumerate(keys):
        assert list(iterate_consume_queue(root, topic, queue_id)) == _expected(index, count_of(index))


def _watch(action: Callable[[], None]) -> None:
    failpoints.arm("consume_queue.before_write", action)


def test_consume_queue_writeout_threads_write_every_entry_of_many_queues(tmp_path: Path) -> None:
    table = _table(tmp_path)
    keys = _keys()
    threads_seen: set[str] = set()
    second_writer = threading.Event()

    def watch() -> None:
        # The first writer waits (once, 10 s at most) for a second one: a busy machine may
        # start the helper threads only after one thread alone has taken every chunk.
        threads_seen.add(threading.current_thread().name)
        if len(threads_seen) >= 2:
            second_writer.set()
        elif not second_writer.is_set():
            second_writer.wait(10)
            second_writer.set()

    _watch(watch)

    def first(index: int) -> int:
        return 1 + index % 25  # up to 25 entries: three files

    _put(table, keys, first)
    total = sum(first(index) for index in range(len(keys)))
    assert table.write_pending(threading.Lock()) == total
    assert len(threads_seen) >= 2, threads_seen
    assert not table.dirty
    _assert_on_disk(tmp_path, keys, first)
    # Steady state: appends into the files the first round sized, then rolls to new ones.
    _put(table, keys, lambda index: 1 + index % 7)
    assert table.write_pending(threading.Lock()) == sum(1 + index % 7 for index in range(len(keys)))
    _assert_on_disk(tmp_path, keys, lambda index: first(index) + 1 + index % 7)
    table.close()


def test_consume_queue_writeout_one_thread_matches_many_threads(tmp_path: Path) -> None:
    keys = _keys()
    for threads in (1, 4):
        root = tmp_path / f"threads-{threads}"
        table = _table(root, threads=threads)
        _put(table, keys, lambda index: 1 + index % 13)
        table.write_pending(threading.Lock())
        table.close()
    first, second = (tmp_path / "threads-1" / "consumequeue", tmp_path / "threads-4" / "consumequeue")
    files = sorted(path.relative_to(first) for path in first.rglob("*") if path.is_file())
    assert len(files) > len(keys)
    assert files == sorted(path.relative_to(second) for path in second.rglob("*") if path.is_file())
    for name in files:
        assert (first / name).read_bytes() == (second / name).read_bytes()


def test_consume_queue_writeout_reloads_what_threads_wrote(tmp_path: Path) -> None:
    table = _table(tmp_path)
    keys = _keys()
    _put(table, keys, lambda index: 1 + index % 25)
    table.write_pending(threading.Lock())
    table.sync_written()
    table.close()
    reloaded = _table(tmp_path)
    assert reloaded.names() == sorted(keys)
    for index, (topic, queue_id) in enumerate(keys):
        queue = reloaded.get(topic, queue_id)
        assert queue is not None and queue.max_queue_offset == 1 + index % 25
    reloaded.close()


def test_consume_queue_writeout_holds_the_descriptor_bound_with_readers(tmp_path: Path) -> None:
    """Readers fill the LRU while threads write: the bound holds, and no descriptor leaks."""
    max_open = 4
    table = _table(tmp_path, max_open=max_open)
    store_lock = threading.Lock()
    keys = _keys()
    _put(table, keys, lambda index: 3)
    table.write_pending(store_lock)
    fds_before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    open_counts: list[int] = []
    entries_read: list[tuple[int, int, int]] = []
    stop = threading.Event()

    def read_all() -> None:
        while not stop.is_set():
            for topic, queue_id in keys[:50]:
                with store_lock:
                    queue = table.get(topic, queue_id)
                    if queue is not None:
                        entries_read.append(queue.entry(1))  # from its file

    reader = threading.Thread(target=read_all)
    _watch(lambda: open_counts.append(table.files.open_count))
    reader.start()
    try:
        with store_lock:
            _put(table, keys, lambda index: 1 + index % 12)  # rolls many queues to a new file
        table.write_pending(store_lock)
    finally:
        stop.set()
        reader.join()
    assert entries_read and {entry[2] for entry in entries_read} == {1}
    assert open_counts and max(open_counts) <= max_open
    assert table.files.open_count <= max_open
    if fds_before is not None:
        assert len(os.listdir("/proc/self/fd")) <= fds_before + max_open
    _assert_on_disk(tmp_path, keys, lambda index: 4 + index % 12)
    table.close()


def test_consume_queue_writeout_retries_queues_whose_write_failed(tmp_path: Path) -> None:
    table = _table(tmp_path)
    keys = _keys()
    _put(table, keys, lambda index: 2)
    hits = [0]

    def fail_some() -> None:
        hits[0] += 1
        if hits[0] % 5 == 0:
            raise OSError(28, "No space left on device")

    _watch(fail_some)
    # A forced write-out precedes the checkpoint: it must not return as if all were written.
    with pytest.raises(StoreError, match="consume queues could not be written; first: T"):
        table.write_pending(threading.Lock())
    failed = len(table.dirty)
    assert 0 < failed < len(keys)
    failpoints.disarm()
    assert table.write_pending(threading.Lock()) == 2 * failed
    _assert_on_disk(tmp_path, keys, lambda index: 2)
    table.close()


def test_consume_queue_writeout_unforced_failure_is_logged_and_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = _table(tmp_path)
    keys = _keys(3)
    _put(table, keys, lambda index: WRITE_BATCH_ENTRIES)  # due at once

    def fail() -> None:
        raise OSError(28, "No space left on device")

    _watch(fail)
    assert table.write_pending(threading.Lock(), force=False) == 0
    assert len(table.dirty) == 3
    assert "writing 3 consume queues failed" in caplog.text
    failpoints.disarm()
    assert table.write_pending(threading.Lock(), force=False) == 3 * WRITE_BATCH_ENTRIES
    _assert_on_disk(tmp_path, keys, lambda index: WRITE_BATCH_ENTRIES)
    table.close()


def test_consume_queue_writeout_exception_keeps_every_queue_dirty(tmp_path: Path) -> None:
    table = _table(tmp_path)
    keys = _keys()
    _put(table, keys, lambda index: 2)
    hits = [0]

    def fail_once() -> None:
        hits[0] += 1
        if hits[0] == 100:
            raise RuntimeError("injected")

    _watch(fail_once)
    with pytest.raises(RuntimeError, match="injected"):
        table.write_pending(threading.Lock())
    assert len(table.dirty) == len(keys)
    failpoints.disarm()
    assert table.write_pending(threading.Lock()) == 2 * len(keys)
    _assert_on_disk(tmp_path, keys, lambda index: 2)
    table.close()


def test_consume_queue_writeout_reuses_the_tail_buffer(tmp_path: Path) -> None:
    table = _table(tmp_path, threads=1)
    _put(table, [("T", 0)], lambda index: 3)
    queue = table.get_or_create("T", 0)
    buffer = queue._pending
    for _ in range(3):
        table.write_pending(threading.Lock())
        _put(table, [("T", 0)], lambda index: 3)
        assert queue._pending is buffer
    assert queue.entry(11) == (11, 100, 11)  # still buffered
    table.write_pending(threading.Lock())
    assert [entry[0] for entry in iterate_consume_queue(tmp_path, "T", 0)] == list(range(12))
    _put(table, [("T", 0)], lambda index: 4000)  # a burst: its buffer is released once written
    table.write_pending(threading.Lock())
    assert len(queue._pending) == 0
    assert queue.entry(4011) == (4011, 100, 4011)
    table.close()


def test_consume_queue_writeout_keeps_entries_put_during_the_write(tmp_path: Path) -> None:
    table = _table(tmp_path, threads=1)
    store_lock = threading.Lock()
    _put(table, [("T", 0)], lambda index: 3)
    queue = table.get_or_create("T", 0)
    hits = [0]

    def put_meanwhile() -> None:
        hits[0] += 1
        if hits[0] == 1:
            with store_lock:
                _put(table, [("T", 0)], lambda index: 2)

    _watch(put_meanwhile)
    assert table.write_pending(store_lock) == 3
    assert (queue.written_queue_offset, queue.max_queue_offset) == (3, 5)
    assert queue in table.dirty
    assert queue.entry(4) == (4, 100, 4)
    assert table.write_pending(store_lock) == 2
    assert [entry[0] for entry in iterate_consume_queue(tmp_path, "T", 0)] == list(range(5))
    table.close()


def test_consume_queue_writeout_syncs_few_files_and_their_new_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(tmp_path)
    synced: list[str] = []
    directories: list[Path] = []
    real_fdatasync = os.fdatasync

    def recording_fdatasync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", recording_fdatasync)
    monkeypatch.setattr(_queue_writeout, "fsync_directory", directories.append)
    monkeypatch.setattr(_queue_writeout, "sync_filesystem", lambda path: pytest.fail("syncfs for few files"))
    _put(table, [("T", 0), ("T", 1)], lambda index: 12)  # two files each
    table.write_pending(threading.Lock())
    table.sync_written()
    root = tmp_path / "consumequeue"
    assert sorted(synced) == sorted(str(path) for path in root.glob("T/*/*"))
    assert set(directories) == {root, root / "T", root / "T" / "0", root / "T" / "1"}
    synced.clear()
    directories.clear()
    table.sync_written()  # nothing written since
    assert synced == [] and directories == []
    _put(table, [("T", 0)], lambda index: 1)
    table.write_pending(threading.Lock())
    table.sync_written()
    assert synced == [str(root / "T" / "0" / f"{10 * ENTRY.size:020d}")]
    assert directories == []  # no new name
    table.close()


def test_consume_queue_writeout_syncs_many_files_with_one_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(tmp_path)
    calls: list[str] = []
    monkeypatch.setattr(_queue_writeout, "sync_filesystem", calls.append)
    monkeypatch.setattr(os, "fdatasync", lambda fd: pytest.fail("fdatasync for many files"))
    _put(table, _keys(SYNC_EACH_FILE_MAX + 1), lambda index: 1)
    table.write_pending(threading.Lock())
    table.sync_written()
    assert calls == [str(tmp_path / "consumequeue")]
    table.close()


def test_consume_queue_writeout_failed_sync_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(tmp_path)
    _put(table, [("T", 0)], lambda index: 1)
    table.write_pending(threading.Lock())

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", broken)
    with pytest.raises(OSError, match="Input/output"):
        table.sync_written()
    synced: list[int] = []
    monkeypatch.setattr(os, "fdatasync", synced.append)
    table.sync_written()
    assert len(synced) == 1
    table.close()


def test_consume_queue_writeout_sync_filesystem_succeeds(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"x" * 100)
    _queue_writeout.sync_filesystem(str(tmp_path))  # raises OSError on failure
    with pytest.raises(FileNotFoundError):
        _queue_writeout.sync_filesystem(str(tmp_path / "missing"))


def test_consume_queue_writeout_failure_holds_the_checkpoint_back(open_store: OpenStore) -> None:
    store = open_store()
    for serial in range(20):
        store.put_message(PutMessageRequest(topic="T", queue_id=serial % 4, body=b"x" * 50))
    store.flush_consume_queues(thorough=True)
    before = read_checkpoint(store.config.checkpoint_path)
    assert before is not None and before.consume_queue_dispatched_offset > 0
    store.put_message(PutMessageRequest(topic="T", queue_id=0, body=b"y" * 50))

    def fail() -> None:
        raise OSError(28, "No space left on device")

    _watch(fail)
    with pytest.raises(StoreError, match="T/0 from queue offset 5"):
        store.flush_consume_queues(thorough=True)
    after = read_checkpoint(store.config.checkpoint_path)
    assert after is not None
    assert after.consume_queue_dispatched_offset == before.consume_queue_dispatched_offset
    failpoints.disarm()
    store.flush_consume_queues(thorough=True)
    moved = read_checkpoint(store.config.checkpoint_path)
    assert (
        moved is not None and moved.consume_queue_dispatched_offset > before.consume_queue_dispatched_offset
    )
    assert [entry[0] for entry in iterate_consume_queue(store.store_path, "T", 0)] == list(range(6))


def test_consume_queue_writeout_spreads_chunks_over_distant_directories(tmp_path: Path) -> None:
    table = _table(tmp_path)
    queues = [table.get_or_create(f"T{index // 100:02d}", index % 100) for index in range(CHUNK_JOBS * 6 + 5)]
    jobs = [(queue, 0, bytearray()) for queue in reversed(queues)]
    chunks = _queue_writeout._spread_chunks(jobs, 2)
    ordered = sorted(queue.directory for queue in queues)
    assert sorted(job[0].directory for chunk in chunks for job in chunk) == ordered
    assert all(len(chunk) <= CHUNK_JOBS for chunk in chunks)
    # Two threads taking chunks in turn work half the sorted list apart.
    starts = [0, 4 * CHUNK_JOBS, CHUNK_JOBS, 5 * CHUNK_JOBS, 2 * CHUNK_JOBS, 6 * CHUNK_JOBS, 3 * CHUNK_JOBS]
    assert [chunk[0][0].directory for chunk in chunks] == [ordered[start] for start in starts]


class _CountingLock:
    """The store lock, noting how many queue buffers each hold takes or publishes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0  # take_pending and mark_written calls so far
        self.most_per_hold = 0
        self._at_enter = 0

    def __enter__(self) -> None:
        self._lock.acquire()
        self._at_enter = self.calls

    def __exit__(self, *_: object) -> None:
        self.most_per_hold = max(self.most_per_hold, self.calls - self._at_enter)
        self._lock.release()


def test_consume_queue_writeout_holds_the_store_lock_for_a_chunk_of_queues_at_a_time(tmp_path: Path) -> None:
    # The write-out took every dirty queue's buffer under one hold of the store lock, and
    # published them under another: after 50,000 topics were created, a request that needed
    # the store (any send, GET_MAX_OFFSET) waited for 50,000 queues, up to 1.6 s.
    table = _table(tmp_path, threads=1)
    keys = _keys(3 * _queue_writeout.LOCK_HOLD_QUEUES + 10)
    _put(table, keys, lambda index: 1 + index % 3)
    lock = _CountingLock()

    def count(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_name in ("take_pending", "mark_written"):
            lock.calls += 1

    sys.setprofile(count)
    try:
        table.write_pending(lock, force=True)  # type: ignore[arg-type]
    finally:
        sys.setprofile(None)
    assert lock.calls == 2 * len(keys)
    assert lock.most_per_hold <= _queue_writeout.LOCK_HOLD_QUEUES, lock.most_per_hold
    assert not table.dirty
    for index, (topic, queue_id) in enumerate(keys):
        entries = list(iterate_consume_queue(tmp_path, topic, queue_id))
        assert len(entries) == 1 + index % 3
