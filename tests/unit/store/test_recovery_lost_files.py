"""Derived files lost under an intact checkpoint: one queue directory, a topic, queue files, the index.

Goal: the derived files "can always be rebuilt from the CommitLog alone", even when the
checkpoint claims them complete, and a normal open still does not walk the whole log.

Method: real stores in tmp dirs (tiny geometry, see conftest). A store is filled over two
topics and three queues each (several queue files per queue), closed or crash-copied, then a
queue directory, a topic directory, some queue files or the index are deleted and the store
reopened. Checks: the rebuilt queue files are byte-identical to the originals, every message
reads back through get_messages, every key is found again, the RecoveryReport counts what
was rebuilt, and the offline verifier passes at teardown (the ``open_store`` fixture).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.store.consume_queue import iterate_consume_queue
from orbitmq.store.message_store import GetStatus, MessageStore, PutMessageRequest, PutStatus
from orbitmq.store.queue_manifest import QueueBounds, QueueManifest, manifest_path, read_manifest
from orbitmq.store.recovery import RecoveryReport
from tests.support.crash_copy import copy_as_crashed

OpenStore = Callable[..., MessageStore]
TOPICS = ("TopicA", "TopicB")
QUEUES_PER_TOPIC = 3
MESSAGES = 900  # 150 per queue: two files of 100 entries each
HOUR_MS = 3_600_000

QueueKey = tuple[str, int]


def _put(store: MessageStore, topic: str, queue_id: int, body: bytes, key: str | None = None) -> int:
    properties = {"TAGS": "t"} if key is None else {"KEYS": key, "TAGS": "t"}
    result = store.put_message(PutMessageRequest(topic, queue_id, body, properties=properties))
    assert result.status is PutStatus.PUT_OK
    return result.queue_offset


def _fill(store: MessageStore, count: int = MESSAGES, first: int = 0) -> None:
    for index in range(first, first + count):
        topic = TOPICS[index % len(TOPICS)]
        queue_id = (index // len(TOPICS)) % QUEUES_PER_TOPIC
        _put(store, topic, queue_id, f"message-{index}".encode() * 20, key=f"k{index}")


def _bodies(store: MessageStore, topic: str, queue_id: int) -> list[bytes]:
    bodies: list[bytes] = []
    queue_offset = store.get_min_queue_offset(topic, queue_id)
    while True:
        got = store.get_messages(topic, queue_id, queue_offset, 32)
        if got.status is not GetStatus.FOUND:
            return bodies
        bodies.extend(message.body for message in decode_stored_messages(got.body()))
        queue_offset = got.next_begin_offset


def _all_bodies(store: MessageStore) -> dict[QueueKey, list[bytes]]:
    return {
        (topic, queue_id): _bodies(store, topic, queue_id)
        for topic in TOPICS
        for queue_id in range(QUEUES_PER_TOPIC)
    }


def _queue_files(root: Path) -> dict[Path, bytes]:
    queue_dir = root / "consumequeue"
    return {path.relative_to(queue_dir): path.read_bytes() for path in queue_dir.rglob("*") if path.is_file()}


def _report(store: MessageStore) -> RecoveryReport:
    report = store.recovery_report
    assert report is not None
    return report


def _crash_copy(store: MessageStore, target: Path) -> Path:
    """What a killed process leaves: the directory as it is while the store is open."""
    copy_as_crashed(store.store_path, target)
    assert (target / "abort").exists()
    return target


def _crash_past_checkpoint(open_store: OpenStore, tmp_path: Path, past: int) -> tuple[MessageStore, Path]:
    """600 messages checkpointed, ``past`` more still buffered; the store and a crash's copy of it.

    The thorough flush puts the checkpoint and the manifest on disk; the later messages'
    queue entries are only in memory, so the crash copy lacks them.
    """
    store = open_store()
    _fill(store, 600)
    store.flush_consume_queues(thorough=True)
    if past:
        _fill(store, past, first=600)
    return store, _crash_copy(store, tmp_path / "crashed")


# -- a lost queue directory -------------------------------------------------------------------


def test_recovery_lost_files_rebuilds_a_deleted_queue_directory_byte_for_byte(open_store: OpenStore) -> None:
    store = open_store()
    _fill(store)
    expected = _all_bodies(store)
    store.close()
    before = _queue_files(store.store_path)
    assert sum(1 for path in before if path.parts[:2] == ("TopicA", "1")) == 2
    shutil.rmtree(store.store_path / "consumequeue" / "TopicA" / "1")
    reopened = open_store()
    report = _report(reopened)
    assert (report.lost_queues, report.rebuilt_queues, report.index_rebuilt) == (1, 1, False)
    assert report.rebuild_records_scanned == MESSAGES
    # Written and fsync'd during open, not left to the first thorough flush.
    assert _queue_files(store.store_path) == before
    assert _all_bodies(reopened) == expected
    reopened.close()
    assert _queue_files(store.store_path) == before


def test_recovery_lost_files_rebuilds_a_deleted_topic_directory(open_store: OpenStore) -> None:
    store = open_store()
    _fill(store)
    expected = _all_bodies(store)
    store.close()
    before = _queue_files(store.store_path)
    shutil.rmtree(store.store_path / "consumequeue" / "TopicB")
    reopened = open_store()
    assert (_report(reopened).lost_queues, _report(reopened).rebuilt_queues) == (
        QUEUES_PER_TOPIC,
        QUEUES_PER_TOPIC,
    )
    assert _all_bodies(reopened) == expected
    assert _put(reopened, "TopicB", 2, b"after") == len(expected[("TopicB", 2)])
    reopened.close()
    after = _queue_files(store.store_path)
    assert {path: data for path, data in after.items() if path.parts[:2] != ("TopicB", "2")} == {
        path: data for path, data in before.items() if path.parts[:2] != ("TopicB", "2")
    }


@pytest.mark.parametrize("lost_file", ["last", "middle"])
def test_recovery_lost_files_rebuilds_a_queue_missing_one_file(open_store: OpenStore, lost_file: str) -> None:
    """A queue whose directory survives but lost a file holds fewer entries than the manifest counts."""
    store = open_store()
    _fill(store, 2400)  # 400 entries per queue: four files
    expected = _all_bodies(store)
    store.close()
    before = _queue_files(store.store_path)
    files = sorted((store.store_path / "consumequeue" / "TopicA" / "2").iterdir())
    assert len(files) == 4
    (files[-1] if lost_file == "last" else files[1]).unlink()
    reopened = open_store()
    assert (_report(reopened).lost_queues, _report(reopened).rebuilt_queues) == (1, 1)
    assert _all_bodies(reopened) == expected
    reopened.close()
    assert _queue_files(store.store_path) == before


def test_recovery_lost_files_rebuilds_a_queue_lost_after_a_crash(
    open_store: OpenStore, tmp_path: Path
) -> None:
    """Crash variant: records past the checkpoint come back through the usual re-dispatch, the rest by the rebuild."""
    store, copy = _crash_past_checkpoint(open_store, tmp_path, 300)
    expected = _all_bodies(store)
    shutil.rmtree(copy / "consumequeue" / "TopicA" / "0")
    recovered = open_store(root=copy)
    report = _report(recovered)
    assert not report.clean_shutdown
    assert (report.lost_queues, report.rebuilt_queues) == (1, 1)
    assert _all_bodies(recovered) == expected
    store.close()
    recovered.close()
    assert _queue_files(copy) == _queue_files(store.store_path)


def test_recovery_lost_files_rebuilds_a_topic_lost_after_a_crash(
    open_store: OpenStore, tmp_path: Path
) -> None:
    store, copy = _crash_past_checkpoint(open_store, tmp_path, 0)
    expected = _all_bodies(store)
    shutil.rmtree(copy / "consumequeue" / "TopicB")
    shutil.rmtree(copy / "index")
    recovered = open_store(root=copy)
    report = _report(recovered)
    assert (report.lost_queues, report.index_rebuilt) == (QUEUES_PER_TOPIC, True)
    assert _all_bodies(recovered) == expected
    assert all(
        len(recovered.query_messages_by_key(TOPICS[i % 2], f"k{i}", 4, 0, 2**62)) == 1 for i in range(600)
    )


def test_recovery_lost_files_deleted_topic_stays_deleted(open_store: OpenStore) -> None:
    """A deleted topic's records do not bring its queues back after a clean close.

    Its queues stay listed in the manifest, empty at their old end, so the records the log
    keeps (below that end) are neither re-dispatched nor counted missing by the verifier,
    and a re-created topic continues the numbering.
    """
    store = open_store()
    _fill(store, 300)
    store.close()
    reopened = open_store()
    reopened.delete_topic("TopicB")  # its queues were never loaded in this session
    reopened.close()
    again = open_store()
    assert (_report(again).lost_queues, _report(again).rebuild_records_scanned) == (0, 0)
    assert again.get_max_queue_offset("TopicB", 0) == again.get_min_queue_offset("TopicB", 0) == 50
    assert again.get_messages("TopicB", 0, 0, 32).buffers == []
    assert _put(again, "TopicB", 0, b"re-created") == 50
    assert _bodies(again, "TopicA", 0) == [f"message-{i}".encode() * 20 for i in range(0, 300, 6)]


def test_recovery_lost_files_restart_after_deleting_a_topic_is_quiet(
    open_store: OpenStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Every restart after a topic was deleted logged a WARNING per queue of it ("has no record
    left in the commit log"): an empty queue the manifest lists is the expected state."""
    store = open_store()
    _fill(store, 300)
    store.delete_topic("TopicB")
    store.close()
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="orbitmq.store"):
            again = open_store()
        assert again.get_max_queue_offset("TopicB", 0) == 50
        noisy = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert noisy == [], noisy
        again.close()


def test_recovery_lost_files_topic_deleted_just_before_a_crash_keeps_its_numbering(
    open_store: OpenStore, store_root: Path
) -> None:
    """Deleted, re-created, crashed before the manifest was rewritten: the queue comes back from
    the log with the old records, numbered as they were, then the new ones after them."""
    store = open_store()
    _fill(store, 300)
    store.delete_topic("TopicB")
    assert _put(store, "TopicB", 0, b"re-created") == 50
    # The process dies: the bytes written so far (page cache) survive, nothing else runs.
    copy_as_crashed(store_root, store_root.parent / "crashed")
    crashed = open_store(root=store_root.parent / "crashed")
    got = crashed.get_messages("TopicB", 0, 0, 64)
    assert got.queue_offsets == list(range(51))
    assert decode_stored_messages(got.body())[-1].body == b"re-created"


# -- a lost index -----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["directory", "files"])
def test_recovery_lost_files_reindexes_a_deleted_index(open_store: OpenStore, how: str) -> None:
    store = open_store()
    _fill(store)
    store.close()
    queues_before = _queue_files(store.store_path)
    index_dir = store.store_path / "index"
    assert len(list(index_dir.iterdir())) >= 2
    if how == "directory":
        shutil.rmtree(index_dir)
    else:
        for path in index_dir.iterdir():
            path.unlink()
    reopened = open_store()
    report = _report(reopened)
    assert (report.index_rebuilt, report.rebuilt_queues, report.lost_queues) == (True, 0, 0)
    assert report.rebuild_records_scanned == MESSAGES
    for index in range(MESSAGES):
        found = reopened.query_messages_by_key(TOPICS[index % 2], f"k{index}", 4, 0, 2**62)
        assert [message.body for message in decode_stored_messages(b"".join(found))] == [
            f"message-{index}".encode() * 20
        ]
    reopened.close()
    assert _queue_files(store.store_path) == queues_before


def test_recovery_lost_files_reindexes_after_a_crash_with_records_past_the_checkpoint(
    open_store: OpenStore, tmp_path: Path
) -> None:
    _, copy = _crash_past_checkpoint(open_store, tmp_path, 100)
    shutil.rmtree(copy / "index")
    recovered = open_store(root=copy)
    assert _report(recovered).index_rebuilt
    for index in (0, 299, 599, 600, 699):
        assert len(recovered.query_messages_by_key(TOPICS[index % 2], f"k{index}", 4, 0, 2**62)) == 1


# -- what a normal open does not do ------------------------------------------------------------


def test_recovery_lost_files_normal_open_does_not_walk_the_log(open_store: OpenStore) -> None:
    store = open_store()
    _fill(store)
    store.close()
    reopened = open_store()
    report = _report(reopened)
    assert (report.lost_queues, report.rebuilt_queues, report.restored_empty_queues) == (0, 0, 0)
    assert (report.index_rebuilt, report.rebuild_records_scanned) == (False, 0)


def test_recovery_lost_files_keyless_log_is_not_a_lost_index(open_store: OpenStore) -> None:
    """A log without keys leaves the index empty: with a manifest that is not mistaken for a loss."""
    store = open_store()
    for index in range(100):
        _put(store, "TopicA", index % 2, b"no key %d" % index)
    store.close()
    assert list((store.store_path / "index").iterdir()) == []
    reopened = open_store()
    assert (_report(reopened).index_rebuilt, _report(reopened).rebuild_records_scanned) == (False, 0)


def test_recovery_lost_files_store_without_manifest_recovers_as_before(open_store: OpenStore) -> None:
    """No manifest (a store from before it): no loss is detected, and the next open writes one."""
    store = open_store()
    _fill(store, 300)
    expected = _all_bodies(store)
    store.close()
    path = manifest_path(store.store_path)
    path.unlink()
    reopened = open_store()
    assert (_report(reopened).lost_queues, _report(reopened).rebuild_records_scanned) == (0, 0)
    assert _all_bodies(reopened) == expected
    manifest = read_manifest(path)
    assert manifest is not None
    assert set(manifest.queues) == set(expected)


def test_recovery_lost_files_ignores_a_damaged_manifest(open_store: OpenStore) -> None:
    store = open_store()
    _fill(store, 300)
    expected = _all_bodies(store)
    store.close()
    path = manifest_path(store.store_path)
    path.write_bytes(path.read_bytes()[:-7])
    reopened = open_store()
    assert (_report(reopened).lost_queues, _report(reopened).rebuild_records_scanned) == (0, 0)
    assert _all_bodies(reopened) == expected
    reopened.close()
    assert read_manifest(path) is not None


def test_recovery_lost_files_torn_tail_is_not_taken_for_lost_entries(
    open_store: OpenStore, tmp_path: Path
) -> None:
    """Records a crash took from the log's tail shorten their queues: that is not a loss to rebuild."""
    store = open_store()
    _fill(store, 300)
    store.flush_consume_queues(thorough=True)
    cut_offset = store.max_commit_log_offset
    _fill(store, 60, first=300)
    _put(store, "TopicC", 0, b"new queue")  # a new queue: the next thorough flush writes the manifest
    store.flush_consume_queues(thorough=True)
    manifest = read_manifest(manifest_path(store.store_path))
    assert manifest is not None and manifest.commit_log_end_offset == store.max_commit_log_offset
    copy = _crash_copy(store, tmp_path / "crashed")
    segment = sorted((copy / "commitlog").iterdir())[-1]
    with open(segment, "r+b") as handle:  # the tail past cut_offset never reached the disk
        handle.seek(cut_offset - int(segment.name))
        handle.write(bytes(len(segment.read_bytes()) - (cut_offset - int(segment.name))))
    recovered = open_store(root=copy)
    report = _report(recovered)
    assert report.end_offset == cut_offset
    assert (report.lost_queues, report.rebuild_records_scanned) == (0, 0)
    rewritten = read_manifest(manifest_path(copy))
    assert rewritten is not None and rewritten.commit_log_end_offset <= cut_offset


# -- retention --------------------------------------------------------------------------------

_RETENTION = {"commit_log_segment_bytes": 16 * 1024, "consume_queue_entries_per_file": 4}


def test_recovery_lost_files_trimmed_queue_keeps_its_min_queue_offset(open_store: OpenStore) -> None:
    store = open_store(**_RETENTION)
    for index in range(40):
        _put(store, "TopicB", index % 2, bytes(1000) + b"%d" % index, key=f"k{index}")
    _put(store, "TopicC", 0, b"first of a queue retention empties")
    for index in range(40, 60):
        _put(store, "TopicB", index % 2, bytes(1000) + b"%d" % index, key=f"k{index}")
    deadline = time.monotonic() + 5
    while store.flushed_commit_log_offset < store.max_commit_log_offset and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.run_retention(time.time_ns() // 1_000_000 + 73 * HOUR_MS, force=True) > 0
    min_offset = store.get_min_queue_offset("TopicB", 0)
    assert 0 < min_offset < store.get_max_queue_offset("TopicB", 0) == 30
    assert store.get_min_queue_offset("TopicC", 0) == store.get_max_queue_offset("TopicC", 0) == 1
    expected = _bodies(store, "TopicB", 0)
    store.close()
    entries_before = list(iterate_consume_queue(store.store_path, "TopicB", 0))
    queue_dir = store.store_path / "consumequeue" / "TopicB" / "0"
    full_files = {
        path.name: path.read_bytes() for path in queue_dir.iterdir() if int(path.name) // 20 > min_offset
    }
    shutil.rmtree(queue_dir)
    shutil.rmtree(store.store_path / "consumequeue" / "TopicC")
    reopened = open_store(**_RETENTION)
    report = _report(reopened)
    # TopicC was empty: restored at its end before the walk, it lost nothing.
    assert (report.lost_queues, report.rebuilt_queues, report.restored_empty_queues) == (1, 1, 1)
    assert reopened.get_min_queue_offset("TopicB", 0) == min_offset
    assert reopened.get_max_queue_offset("TopicB", 0) == 30
    assert _bodies(reopened, "TopicB", 0) == expected
    assert reopened.get_min_queue_offset("TopicC", 0) == reopened.get_max_queue_offset("TopicC", 0) == 1
    assert _put(reopened, "TopicC", 0, b"numbering continues") == 1
    reopened.close()
    entries_after = list(iterate_consume_queue(store.store_path, "TopicB", 0))
    assert entries_after == [entry for entry in entries_before if entry[0] >= min_offset]
    assert {name: (queue_dir / name).read_bytes() for name in full_files} == full_files


def test_recovery_lost_files_emptied_queue_alone_is_restored_without_a_walk(open_store: OpenStore) -> None:
    store = open_store(**_RETENTION)
    _put(store, "TopicC", 0, b"soon gone")
    _put(store, "TopicC", 0, b"soon gone too")
    for index in range(40):
        _put(store, "TopicB", 0, bytes(1000) + b"%d" % index)
    deadline = time.monotonic() + 5
    while store.flushed_commit_log_offset < store.max_commit_log_offset and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.run_retention(time.time_ns() // 1_000_000 + 73 * HOUR_MS, force=True) > 0
    store.close()
    shutil.rmtree(store.store_path / "consumequeue" / "TopicC")
    reopened = open_store(**_RETENTION)
    report = _report(reopened)
    assert (report.lost_queues, report.restored_empty_queues, report.rebuild_records_scanned) == (0, 1, 0)
    got = reopened.get_messages("TopicC", 0, 0, 8)
    assert (got.status, got.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, 2)


# -- the manifest itself ----------------------------------------------------------------------


def test_queue_manifest_round_trips() -> None:
    manifest = QueueManifest(
        {("TopicA", 0): QueueBounds(0, 10), ("TopicA", 1): None, ("%RETRY%g", 3): QueueBounds(5, 5)},
        index_has_entries=True,
        commit_log_end_offset=123_456,
    )
    assert QueueManifest.decode(manifest.encode()) == manifest


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        b'{"version": 2, "commit_log_end_offset": 0, "index_has_entries": false, "queues": []}',
        b'{"version": 1, "commit_log_end_offset": -1, "index_has_entries": false, "queues": []}',
        b'{"version": 1, "commit_log_end_offset": 0, "index_has_entries": 1, "queues": []}',
        b'{"version": 1, "commit_log_end_offset": 0, "index_has_entries": false, "queues": [["T", 0, 5, 4]]}',
        b'{"version": 1, "commit_log_end_offset": 0, "index_has_entries": false, "queues": [["T", true, 0, 4]]}',
        b'{"version": 1, "commit_log_end_offset": 0, "index_has_entries": false, "queues": [["", 0, 0, 4]]}',
        b'{"version": 1, "commit_log_end_offset": 0, "index_has_entries": false, "queues": [["T", 0, null, 4]]}',
    ],
)
def test_queue_manifest_rejects_what_it_cannot_trust(data: bytes) -> None:
    assert QueueManifest.decode(data) is None


def test_queue_manifest_is_rewritten_only_when_the_shape_changes(open_store: OpenStore) -> None:
    store = open_store()
    _put(store, "TopicA", 0, b"one")
    store.flush_consume_queues(thorough=True)
    path = manifest_path(store.store_path)
    first = path.read_bytes()
    _put(store, "TopicA", 0, b"two")  # a queue that grows: the manifest stays as it is
    store.flush_consume_queues(thorough=True)
    assert path.read_bytes() == first
    _put(store, "TopicA", 1, b"three")  # a new queue: rewritten
    store.flush_consume_queues(thorough=True)
    manifest = read_manifest(path)
    assert manifest is not None
    assert manifest.queues == {("TopicA", 0): QueueBounds(0, 2), ("TopicA", 1): QueueBounds(0, 1)}
    _put(store, "TopicA", 0, b"four")
    store.close()  # close writes the exact bounds
    closed = read_manifest(path)
    assert closed is not None and closed.queues[("TopicA", 0)] == QueueBounds(0, 3)
    assert closed.index_has_entries is False
