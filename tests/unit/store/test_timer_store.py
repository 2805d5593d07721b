"""TimerLog and TimerStore: linked slots, segment retention, clean reopen and crash rebuild.

Method: tiny geometry on tmp_path (100 ms slots, 64-record log segments); a "crash" is a
reopen without close, after the files were changed past the last checkpoint.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from orbitmq.errors import CorruptRecordError
from orbitmq.store.timer_log import NO_POSITION, RECORD_BYTES, TimerLog
from orbitmq.store.timer_wheel import CHECKPOINT_FILE, TimerCheckpoint, TimerStore

PRECISION_MS = 100
SLOTS = 50
SEGMENT_BYTES = 64 * RECORD_BYTES


def make_store(root: Path) -> TimerStore:
    return TimerStore(root, PRECISION_MS, SLOTS, SEGMENT_BYTES)


def test_timer_log_reads_buffered_and_written_records(tmp_path: Path) -> None:
    log = TimerLog(tmp_path / "log", SEGMENT_BYTES)
    log.load()
    first = log.append(100, 10, 5_000, NO_POSITION)
    assert log.read(first).commit_log_offset == 100  # still buffered
    log.write_out()
    second = log.append(200, 20, 6_000, first)
    assert log.read(first).due_ms == 5_000
    assert log.read(second).prev_log_position == first
    with pytest.raises(CorruptRecordError, match="outside"):
        log.read(second + RECORD_BYTES)
    log.close()


def test_timer_log_rolls_segments_and_deletes_past_ones(tmp_path: Path) -> None:
    log = TimerLog(tmp_path / "log", SEGMENT_BYTES)
    log.load()
    for index in range(64 * 2 + 5):
        log.append(index, 1, 1_000 + index, NO_POSITION)
    log.write_out()
    assert len(list((tmp_path / "log").iterdir())) == 3
    assert log.delete_segments_due_before(1_000 + 64) == 1  # the first segment is all past
    assert log.min_position == SEGMENT_BYTES
    with pytest.raises(CorruptRecordError):
        log.read(0)
    assert log.read(SEGMENT_BYTES).commit_log_offset == 64
    log.close()


def test_timer_store_links_each_slot_newest_first(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.open()
    for index, due_ms in enumerate([10_050, 10_020, 10_150, 10_099]):
        store.add(index, 1, due_ms)
    records = store.slot_records(10_000)
    assert [record.commit_log_offset for record in records] == [3, 1, 0]
    assert [record.commit_log_offset for record in store.slot_records(10_100)] == [2]
    assert store.slot_records(10_200) == []
    store.close(4, 10_000)


def test_timer_store_stale_slot_from_last_turn_reads_empty(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.open()
    store.add(1, 1, 1_000)
    window_ms = SLOTS * PRECISION_MS
    assert store.slot_records(1_000 + window_ms) == []  # same slot index, another period
    store.add(2, 1, 1_000 + window_ms)
    assert [record.commit_log_offset for record in store.slot_records(1_000 + window_ms)] == [2]
    store.close(2, 0)


def test_timer_store_clean_reopen_keeps_everything(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.open()
    for index in range(10):
        store.add(index, 1, 20_000 + index * 30)
    store.close(10, 19_000)
    reopened = make_store(tmp_path)
    checkpoint = reopened.open()
    assert not reopened.recovered_after_crash
    assert (checkpoint.enqueue_queue_offset, checkpoint.dequeue_ms) == (10, 19_000)
    found = reopened.slot_records(20_000) + reopened.slot_records(20_100) + reopened.slot_records(20_200)
    assert sorted(record.commit_log_offset for record in found) == list(range(10))
    reopened.close(10, 19_000)


def test_timer_store_crash_rebuild_keeps_checkpointed_undelivered_only(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.open()
    for index in range(6):
        store.add(index, 1, 30_000 + index * 100)  # one per slot
    store.write_checkpoint(store.prepare_checkpoint(6, 30_200))  # timers 0 and 1 delivered
    store.add(99, 1, 30_050)  # after the checkpoint: the owner re-enqueues it
    store.log.write_out()
    # Crash: no close. The abort marker is still there.
    reopened = make_store(tmp_path)
    checkpoint = reopened.open()
    assert reopened.recovered_after_crash
    assert checkpoint.enqueue_queue_offset == 6
    kept = [
        record.commit_log_offset
        for slot in range(30_000, 30_600, PRECISION_MS)
        for record in reopened.slot_records(slot)
    ]
    assert sorted(kept) == [2, 3, 4, 5]
    reopened.close(6, 30_200)


def test_close_waits_for_a_checkpoint_write_in_flight_and_writes_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The periodic checkpoint is written on a worker thread; close() may come while it runs."""
    store = make_store(tmp_path)
    store.open()
    store.add(1, 1, 20_000)
    entered, release = threading.Event(), threading.Event()
    real_sync = TimerLog.sync
    calls: list[str] = []

    def first_sync_waits(log: TimerLog) -> None:
        calls.append(threading.current_thread().name)
        if len(calls) == 1:  # the worker's write: held inside, before its files are written
            entered.set()
            release.wait(5)
        real_sync(log)

    monkeypatch.setattr(TimerLog, "sync", first_sync_waits)
    older = store.prepare_checkpoint(5, 10_000)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            store.write_checkpoint(older)
        except BaseException as exc:  # noqa: BLE001 - the test reports whatever the thread hit
            errors.append(exc)

    worker = threading.Thread(target=write, name="checkpoint-worker")
    worker.start()
    assert entered.wait(5)
    closer = threading.Thread(target=store.close, args=(7, 12_000), name="closer")
    closer.start()
    time.sleep(0.2)  # the closer's turn, if nothing made it wait
    release.set()
    worker.join(5)
    closer.join(5)
    assert errors == []
    assert calls == ["checkpoint-worker", "closer"]
    saved = TimerCheckpoint.decode((tmp_path / CHECKPOINT_FILE).read_bytes(), "checkpoint")
    assert (saved.enqueue_queue_offset, saved.dequeue_ms) == (7, 12_000)
    # And a write that comes after close() (a worker that had not started) changes nothing.
    store.write_checkpoint(older)
    saved = TimerCheckpoint.decode((tmp_path / CHECKPOINT_FILE).read_bytes(), "checkpoint")
    assert (saved.enqueue_queue_offset, saved.dequeue_ms) == (7, 12_000)


def test_a_checkpoint_prepared_earlier_never_replaces_a_later_one(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.open()
    earlier = store.prepare_checkpoint(5, 10_000)
    later = store.prepare_checkpoint(6, 11_000)
    store.write_checkpoint(later)
    store.write_checkpoint(earlier)  # lost the race: skipped
    saved = TimerCheckpoint.decode((tmp_path / CHECKPOINT_FILE).read_bytes(), "checkpoint")
    assert (saved.enqueue_queue_offset, saved.dequeue_ms) == (6, 11_000)
    store.close(6, 11_000)
