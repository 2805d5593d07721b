"""A disk without free blocks: puts refused before a byte is written, the index and the warmer wait.

Method: the allocation seam (``reserve_blocks``, posix_fallocate) is made to answer ENOSPC as a
full file system does, and the statvfs the disk monitor reads to answer a given fullness; the
store around them is real. The fault test ``tests/fault/test_broker_disk_full.py`` fills a
real tmpfs.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from orbitmq.store import index_file, mapped_file
from orbitmq.store._fs import DiskFullError, reserve_blocks
from orbitmq.store.commit_log import CommitLog, CommitLogWarmer
from orbitmq.store.disk_space import DiskLevel, DiskSpaceMonitor
from orbitmq.store.index_service import IndexService
from orbitmq.store.message_store import PutMessageRequest, PutStatus

from .conftest import OpenStore, tiny_config


def _no_space(fd: int, offset: int, length: int, what: str = "a write") -> bool:
    raise DiskFullError(what)


def _disk_used(monkeypatch: pytest.MonkeyPatch, percent: float) -> None:
    free = int(1000 - 10 * percent)
    blocks = os.statvfs_result((4096, 4096, 1000, free, free, 0, 0, 0, 0, 255))
    monkeypatch.setattr(os, "statvfs", lambda path: blocks)


def test_reserve_blocks_turns_enospc_into_disk_full_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def enospc(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with open(tmp_path / "f", "wb") as handle:
        handle.truncate(8192)
        assert reserve_blocks(handle.fileno(), 0, 8192) is True
        monkeypatch.setattr(os, "posix_fallocate", enospc)
        with pytest.raises(DiskFullError, match="no space left on the store's disk for the test"):
            reserve_blocks(handle.fileno(), 0, 8192, "the test")


def test_store_put_without_disk_blocks_is_refused_and_writes_nothing(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store()
    first = store.put_message(PutMessageRequest("TopicA", 0, bytes(1000)))
    assert first.status is PutStatus.PUT_OK
    segments = sorted((store.store_path / "commitlog").iterdir())
    end = store.max_commit_log_offset
    monkeypatch.setattr(mapped_file, "reserve_blocks", _no_space)
    refused = 0
    for _ in range(100):  # fills what is allocated ahead, then needs more
        result = store.put_message(PutMessageRequest("TopicA", 0, bytes(3000)))
        if result.status is not PutStatus.PUT_OK:
            assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
            assert result.remark.startswith("disk full: no space left on the store's disk"), result.remark
            refused += 1
    assert refused
    kept = store.max_commit_log_offset
    assert kept > end and sorted((store.store_path / "commitlog").iterdir()) == segments
    monkeypatch.undo()
    assert store.put_message(PutMessageRequest("TopicA", 0, bytes(3000))).status is PutStatus.PUT_OK
    assert store.max_commit_log_offset > kept


def test_store_refuses_puts_past_the_warning_ratio_and_accepts_them_again(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(flush_interval_consume_queue_ms=60_000)  # checks come from the test
    caplog.set_level(logging.WARNING, logger="orbitmq.store.disk_space")
    _disk_used(monkeypatch, 93)
    assert store.check_disk_space() is DiskLevel.FULL
    result = store.put_message(PutMessageRequest("TopicA", 0, b"x"))
    assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "disk full: the store's disk is 93.0% used, above diskSpaceWarningLevelRatio=90" in result.remark
    for _ in range(5):
        store.check_disk_space()
        store.put_message(PutMessageRequest("TopicA", 0, b"x"))
    _disk_used(monkeypatch, 50)
    assert store.check_disk_space() is DiskLevel.OK
    assert store.put_message(PutMessageRequest("TopicA", 0, b"x")).status is PutStatus.PUT_OK
    assert [record.levelname for record in caplog.records] == ["ERROR", "WARNING"]  # one line per change


def test_disk_levels_follow_rocketmq_ratios_and_clamps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monitor = DiskSpaceMonitor(tmp_path, tiny_config(tmp_path, disk_space_warning_level_ratio_percent=99))
    for percent, level in ((70, DiskLevel.OK), (80, DiskLevel.CLEAN), (86, DiskLevel.CLEAN_FORCIBLY)):
        _disk_used(monkeypatch, percent)
        assert monitor.check() is level and monitor.refusal is None
    _disk_used(monkeypatch, 91)  # a warning level above 90 acts as 90, as in RocketMQ
    assert monitor.check() is DiskLevel.FULL and monitor.refusal is not None


def test_index_service_holds_keys_the_disk_has_no_room_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = IndexService(tmp_path / "index", 64, 256)
    service.load(clean_shutdown=True)
    try:
        service.put_keys("TopicA", ["first"], 100, 1_700_000_000_000)
        service.write_queued()
        monkeypatch.setattr(index_file, "reserve_blocks", _no_space)
        for number in range(300):  # more than one file holds: a new file is needed too
            service.put_keys("TopicA", [f"k{number}"], 200 + number, 1_700_000_000_000)
        service.write_queued()  # no exception: the keys wait
        assert service.query("TopicA", "k299", 10, 0, 2_000_000_000_000) == []
        assert service.query("TopicA", "first", 10, 0, 2_000_000_000_000) == [100]
        monkeypatch.undo()
        assert service.query("TopicA", "k299", 10, 0, 2_000_000_000_000) == [499]
        assert service.query("TopicA", "k0", 10, 0, 2_000_000_000_000) == [200]
    finally:
        service.close()


def _wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return False


def test_warmer_waits_out_a_full_disk_and_warms_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window = 2 * mapped_file.ALLOCATE_CHUNK_BYTES  # past what a put allocates ahead
    log = CommitLog(tmp_path, 4 * window)
    warmer = CommitLogWarmer(log, window, chunk_bytes=256 * 1024)
    monkeypatch.setattr(mapped_file, "reserve_blocks", _no_space)
    try:
        with pytest.raises(DiskFullError):
            log.reserve(1000)  # nothing to write into: the put is refused
        assert not log.segments.files and not list(tmp_path.iterdir())
        monkeypatch.undo()
        segment = log.reserve(1000)
        monkeypatch.setattr(mapped_file, "reserve_blocks", _no_space)
        warmer.start()
        assert _wait_for(lambda: warmer.disk_full_rounds > 0)
        assert warmer.populated_bytes <= segment.allocated_position  # nothing faulted in without blocks
        monkeypatch.undo()
        log.commit(segment, segment.warm_mark + 1)  # the writer passes the mark: warm again
        assert _wait_for(lambda: warmer.populated_bytes >= window)
    finally:
        warmer.stop()
        log.close()
