"""Commit-log warming: pages faulted in ahead of the writer, range flushes, close during a populate."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orbitmq.store._fs import allocate_blocks, mapping_calls_available
from orbitmq.store.commit_log import CommitLog, CommitLogWarmer
from orbitmq.store.mapped_file import NEVER, MappedFile
from orbitmq.store.message_store import MessageStore, PutMessageRequest, PutStatus

from .conftest import OpenStore

SIZE = 1 << 20
PAGE = 4096

pytestmark = pytest.mark.skipif(
    not mapping_calls_available(), reason="msync/madvise through ctypes are Linux-only"
)


def _wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return False


WINDOW = 64 * 1024


@pytest.fixture
def warmed_log(tmp_path: Path) -> Iterator[tuple[CommitLog, CommitLogWarmer]]:
    """A CommitLog of 1 MiB segments with a warmer (64 KiB window, 16 KiB chunks), both closed after."""
    log = CommitLog(tmp_path / "commitlog", SIZE)
    warmer = CommitLogWarmer(log, WINDOW, chunk_bytes=16 * 1024)
    warmer.start()
    yield log, warmer
    warmer.stop()
    log.close()
    assert log.wake_warmer is None


def test_populate_keeps_bytes_and_flush_covers_the_written_range(tmp_path: Path) -> None:
    mapped = MappedFile(tmp_path / "00000000000000000000", 0, SIZE)
    try:
        mapped.buffer[0:5] = b"hello"
        mapped.wrote_position = 5
        # Linux 5.14+ knows MADV_POPULATE_WRITE (this kernel: see os.uname()).
        assert mapped.populate(0, SIZE) is True, os.uname().release
        assert bytes(mapped.buffer[0:8]) == b"hello\0\0\0"
        assert bytes(mapped.buffer[SIZE - PAGE :]) == bytes(PAGE)
        assert mapped.flush() == 5
        mapped.buffer[PAGE + 1 : PAGE + 4] = b"abc"
        mapped.wrote_position = PAGE + 4
        # The second flush starts at the page holding the first unflushed byte.
        assert mapped.flush() == PAGE + 4
        assert mapped.flush() == PAGE + 4
    finally:
        mapped.close()
    with open(tmp_path / "00000000000000000000", "rb") as handle:
        data = handle.read(PAGE + 4)
    assert data[:5] == b"hello" and data[PAGE + 1 :] == b"abc"


def test_allocate_blocks_gives_a_sparse_range_its_blocks_and_keeps_size_and_bytes(tmp_path: Path) -> None:
    """What populate does first, so that the pages it faults in need no block allocation."""
    path = tmp_path / "sparse"
    with open(path, "wb") as handle:
        handle.write(b"head")
        handle.truncate(4 * SIZE)
    assert os.stat(path).st_blocks * 512 < SIZE // 2
    fd = os.open(path, os.O_RDWR)
    try:
        assert allocate_blocks(fd, 0, 2 * SIZE) is True
        assert allocate_blocks(-1, 0, PAGE) is False  # a failure is an answer, not an error
    finally:
        os.close(fd)
    stat = os.stat(path)
    assert stat.st_size == 4 * SIZE
    assert 2 * SIZE <= stat.st_blocks * 512 <= 2 * SIZE + 16 * PAGE
    with open(path, "rb") as handle:
        assert handle.read(8) == b"head\0\0\0\0"
        handle.seek(2 * SIZE - PAGE)
        assert handle.read(PAGE) == bytes(PAGE)


def test_closed_segment_refuses_flush_and_populate(tmp_path: Path) -> None:
    mapped = MappedFile(tmp_path / "00000000000000000000", 0, SIZE)
    mapped.buffer[0:1] = b"x"
    mapped.wrote_position = 1
    mapped.close()
    with pytest.raises(ValueError, match="is closed"):
        mapped.flush()
    assert mapped.populate(0, PAGE) is False


def test_zero_from_keeps_the_segment_usable_for_flush_and_populate(tmp_path: Path) -> None:
    mapped = MappedFile(tmp_path / "00000000000000000000", 0, SIZE)
    try:
        mapped.buffer[0 : 3 * PAGE] = b"y" * (3 * PAGE)
        mapped.wrote_position = 3 * PAGE
        assert mapped.populate(0, 4 * PAGE)
        mapped.populated_position = 4 * PAGE
        mapped.zero_from(PAGE + 10)
        assert mapped.populated_position == PAGE
        assert mapped.populate(PAGE, PAGE)
        assert bytes(mapped.buffer[PAGE + 8 : PAGE + 12]) == b"yy\0\0"
        assert mapped.flush() == PAGE + 10
    finally:
        mapped.close()


def test_warmer_keeps_a_window_ahead_of_the_writer_across_segments(
    warmed_log: tuple[CommitLog, CommitLogWarmer],
) -> None:
    log, warmer = warmed_log
    record = b"r" * 1000
    for _ in range(2500):  # 1,048 records fill a segment: this ends in the third
        segment = log.reserve(len(record))
        position = segment.wrote_position
        segment.buffer[position : position + len(record)] = record
        log.commit(segment, position + len(record))
    last = log.segments.files[-1]
    assert len(log.segments.files) == 3
    # The warmer follows the writer into the newest segment and gets a window ahead.
    assert _wait_for(lambda: last.populated_position >= last.wrote_position + WINDOW // 2)
    assert last.populated_position <= last.wrote_position + WINDOW + PAGE
    assert warmer.populated_bytes >= WINDOW
    # A write past the mark wakes the warmer again.
    assert last.warm_mark != NEVER and last.warm_mark > last.wrote_position
    log.commit(last, last.warm_mark)
    assert _wait_for(lambda: last.populated_position >= last.warm_mark + WINDOW // 2 - PAGE)


def test_store_close_while_the_warmer_populates(open_store: OpenStore) -> None:
    # A window as large as the segment: close lands while a populate is in progress.
    config = {
        "commit_log_segment_bytes": 64 << 20,
        "warm_mapped_file_window_bytes": 64 << 20,
        "flush_interval_commit_log_ms": 500,
    }
    for round_number in range(5):
        store = open_store(**config)
        assert store.get_messages("Warm", 0, 0, 8).message_count == round_number
        result = store.put_message(PutMessageRequest(topic="Warm", queue_id=0, body=b"body"))
        assert result.status is PutStatus.PUT_OK
        store.close()
    assert open_store(**config).get_messages("Warm", 0, 0, 8).message_count == 5


def test_store_works_with_warming_off(open_store: OpenStore) -> None:
    store = open_store(warm_mapped_file_enable=False)
    assert store._warmer is None  # noqa: SLF001 - the switch under test
    for index in range(300):
        result = store.put_message(PutMessageRequest(topic="Cold", queue_id=0, body=b"%d" % index))
        assert result.status is PutStatus.PUT_OK
    store.close()
    assert open_store(warm_mapped_file_enable=False).get_max_queue_offset("Cold", 0) == 300


def test_puts_race_the_warmer_and_every_record_reads_back(open_store: OpenStore) -> None:
    store: MessageStore = open_store(warm_mapped_file_window_bytes=8192)
    body = os.urandom(700)
    errors: list[BaseException] = []

    def writer(queue_id: int) -> None:
        try:
            for _ in range(400):
                result = store.put_message(PutMessageRequest(topic="Race", queue_id=queue_id, body=body))
                assert result.status is PutStatus.PUT_OK
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(queue_id,)) for queue_id in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    store.close()
    reopened = open_store(warm_mapped_file_window_bytes=8192)
    for queue_id in range(4):
        queue_offset = read = 0
        while queue_offset < 400:
            result = reopened.get_messages("Race", queue_id, queue_offset, 400, max_total_bytes=1 << 30)
            assert result.message_count > 0, result.status
            assert all(body in bytes(record) for record in result.buffers)
            read += result.message_count
            queue_offset = result.next_begin_offset
        assert read == 400


def test_warmer_follows_replicated_appends(warmed_log: tuple[CommitLog, CommitLogWarmer]) -> None:
    # A slave appends raw bytes at the log's end (append_raw): the warmer follows it too.
    log, _ = warmed_log
    data = b"d" * (SIZE + SIZE // 2)  # crosses into a second segment
    assert log.append_raw(0, data)
    last = log.segments.files[-1]
    assert last.start_offset == SIZE and last.wrote_position == SIZE // 2
    assert _wait_for(lambda: last.populated_position >= last.wrote_position + WINDOW // 2)
    assert bytes(last.buffer[: SIZE // 2]) == data[SIZE:]
