"""Retention: expired segments go (never the last), minimum offsets follow, reads below them are statuses."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from orbitmq.store.message_store import GetStatus, MessageStore, PutMessageRequest, PutStatus
from orbitmq.store.retention import disk_used_percent, is_delete_hour

OpenStore = Callable[..., MessageStore]
HOUR_MS = 3_600_000


def _fill(store: MessageStore, count: int) -> None:
    for index in range(count):
        result = store.put_message(
            PutMessageRequest("TopicA", index % 2, bytes(3000), properties={"KEYS": f"k{index}"})
        )
        assert result.status is PutStatus.PUT_OK


def _wait_flushed(store: MessageStore) -> None:
    deadline = time.monotonic() + 5
    while store.flushed_commit_log_offset < store.max_commit_log_offset and time.monotonic() < deadline:
        time.sleep(0.01)


def test_retention_keeps_young_segments(open_store: OpenStore) -> None:
    store = open_store()
    _fill(store, 100)
    _wait_flushed(store)
    now_ms = time.time_ns() // 1_000_000
    assert store.run_retention(now_ms, force=True) == 0
    assert store.min_commit_log_offset == 0


def test_retention_deletes_expired_segments_and_moves_minimums(open_store: OpenStore) -> None:
    store = open_store()
    _fill(store, 100)  # 100 x ~3.1 KiB over 64 KiB segments: 5 segments
    _wait_flushed(store)
    segments = sorted((store.store_path / "commitlog").iterdir())
    later_ms = time.time_ns() // 1_000_000 + 73 * HOUR_MS
    deleted = store.run_retention(later_ms, force=True)
    assert deleted == len(segments) - 1
    assert sorted((store.store_path / "commitlog").iterdir()) == segments[-1:]
    assert store.min_commit_log_offset == int(segments[-1].name)
    min_offset = store.get_min_queue_offset("TopicA", 0)
    assert 0 < min_offset < store.get_max_queue_offset("TopicA", 0)
    too_small = store.get_messages("TopicA", 0, 0, 32)
    assert (too_small.status, too_small.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, min_offset)
    first = store.get_messages("TopicA", 0, min_offset, 1)
    assert first.status is GetStatus.FOUND
    assert first.commit_log_offsets[0] >= store.min_commit_log_offset
    # The consume queue's first file (offsets 0..99) still holds live entries, so it stays.
    store.flush_consume_queues(thorough=True)
    assert (store.store_path / "consumequeue" / "TopicA" / "0" / "00000000000000000000").exists()


def test_retention_waits_for_delete_hour_unless_forced(open_store: OpenStore) -> None:
    later_ms = time.time_ns() // 1_000_000 + 73 * HOUR_MS
    other_hour = (time.localtime(later_ms / 1000).tm_hour + 12) % 24
    store = open_store(delete_when=f"{other_hour:02d}")
    _fill(store, 60)
    _wait_flushed(store)
    assert not is_delete_hour(later_ms, f"{other_hour:02d}")
    assert store.run_retention(later_ms) == 0
    assert store.run_retention(later_ms, force=True) > 0


def _other_hour(now_ms: int) -> str:
    return f"{(time.localtime(now_ms / 1000).tm_hour + 12) % 24:02d}"


def _disk_used(monkeypatch: pytest.MonkeyPatch, percent: int) -> None:
    """Every statvfs answers a disk ``percent`` full (of 1,000 blocks)."""
    blocks = os.statvfs_result((4096, 4096, 1000, 1000 - 10 * percent, 1000 - 10 * percent, 0, 0, 0, 0, 255))
    monkeypatch.setattr(os, "statvfs", lambda path: blocks)


def test_retention_deletes_at_once_when_disk_is_full(open_store: OpenStore) -> None:
    """Past diskMaxUsedSpaceRatio expired segments go at once, whatever deleteWhen says (RocketMQ)."""
    later_ms = time.time_ns() // 1_000_000 + 73 * HOUR_MS
    store = open_store(disk_max_used_space_ratio_percent=1, delete_when=_other_hour(later_ms))
    _fill(store, 60)
    _wait_flushed(store)
    assert store.run_retention(later_ms) > 0


def test_retention_past_max_ratio_keeps_segments_younger_than_reserved_time(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """75 < used <= 85: RocketMQ deletes expired files early, never unexpired ones."""
    now_ms = time.time_ns() // 1_000_000
    store = open_store(delete_when=_other_hour(now_ms))
    _fill(store, 60)
    _wait_flushed(store)
    _disk_used(monkeypatch, 80)
    assert store.run_retention(now_ms) == 0
    assert store.min_commit_log_offset == 0


def test_retention_past_clean_forcibly_ratio_deletes_young_segments_unless_disabled(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Past diskSpaceCleanForciblyRatio the oldest segments go whatever their age, unless
    cleanFileForciblyEnable is false."""
    now_ms = time.time_ns() // 1_000_000
    kept = open_store(
        root=tmp_path / "kept", clean_file_forcibly_enable=False, delete_when=_other_hour(now_ms)
    )
    _fill(kept, 60)
    _wait_flushed(kept)
    forced = open_store(root=tmp_path / "forced", delete_when=_other_hour(now_ms))
    _fill(forced, 60)
    _wait_flushed(forced)
    _disk_used(monkeypatch, 88)
    assert kept.run_retention(now_ms) == 0
    assert kept.min_commit_log_offset == 0
    forced.run_retention(now_ms)  # (the store's own housekeeping may have run it first)
    assert forced.min_commit_log_offset > 0


def test_retention_drops_consume_queue_files_below_minimum(open_store: OpenStore, tmp_path: Path) -> None:
    store = open_store(
        root=tmp_path / "many", commit_log_segment_bytes=16 * 1024, consume_queue_entries_per_file=4
    )
    for _ in range(40):
        assert store.put_message(PutMessageRequest("TopicB", 0, bytes(1000))).status is PutStatus.PUT_OK
    _wait_flushed(store)
    store.flush_consume_queues(thorough=True)
    queue_dir = store.store_path / "consumequeue" / "TopicB" / "0"
    files_before = len(list(queue_dir.iterdir()))
    assert store.run_retention(time.time_ns() // 1_000_000 + 73 * HOUR_MS, force=True) > 0
    assert len(list(queue_dir.iterdir())) < files_before
    min_offset = store.get_min_queue_offset("TopicB", 0)
    assert store.get_messages("TopicB", 0, min_offset, 1).status is GetStatus.FOUND
    store.close()
    reopened = open_store(
        root=tmp_path / "many", commit_log_segment_bytes=16 * 1024, consume_queue_entries_per_file=4
    )
    assert reopened.get_min_queue_offset("TopicB", 0) == min_offset
    assert reopened.get_max_queue_offset("TopicB", 0) == 40


def test_disk_used_percent_counts_root_reserved_blocks_as_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """RocketMQ's ratio: (total - free) / total, free including blocks reserved for root.

    A disk of 252 units with 39 used and 149 reserved for root is 15% used, not the 75% that
    ``total - available`` would say (which would delete young segments at once).
    """
    blocks = os.statvfs_result((4096, 4096, 252, 213, 64, 0, 0, 0, 0, 255))
    monkeypatch.setattr(os, "statvfs", lambda path: blocks)
    assert disk_used_percent(Path("/any")) == pytest.approx(100 * 39 / 252)
