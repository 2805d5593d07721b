"""Queues loading from the exact bounds close() writes into the manifest, and when they must not.

A clean restart with many queues loads each queue at its first use. When the manifest close()
wrote still describes the log (clean shutdown, same first and end offsets), a queue takes its
bounds from it without reading its files; otherwise it searches its files as before. The
checks compare the bounds a trusted load gives with those a search gives, and show that a
crash, a moved log or losses found at open fall back to the search.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

import orjson
import pytest

from orbitmq.store.consume_queue import ConsumeQueueTable
from orbitmq.store.message_store import MessageStore, PutMessageRequest, PutStatus
from orbitmq.store.queue_manifest import (
    QueueBounds,
    QueueManifest,
    collector_paused,
    manifest_path,
    read_manifest,
)

from .conftest import OpenStore

HOUR_MS = 3_600_000
RETENTION = {"commit_log_segment_bytes": 16 * 1024, "consume_queue_entries_per_file": 4}
QUEUES = [("TopicA", 0), ("TopicA", 1), ("TopicB", 0), ("TopicB", 5)]


def _put(store: MessageStore, topic: str, queue_id: int, body: bytes) -> None:
    result = store.put_message(PutMessageRequest(topic, queue_id, body))
    assert result.status is PutStatus.PUT_OK


def _filled_store(open_store: OpenStore) -> tuple[MessageStore, dict[tuple[str, int], tuple[int, int]]]:
    """A closed store whose queues span several files, with retention past the oldest ones."""
    store = open_store(**RETENTION)
    for index in range(60):
        topic, queue_id = QUEUES[index % len(QUEUES)]
        _put(store, topic, queue_id, bytes(900) + b"%d" % index)
    deadline = time.monotonic() + 5
    while store.flushed_commit_log_offset < store.max_commit_log_offset and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.run_retention(time.time_ns() // 1_000_000 + 73 * HOUR_MS, force=True) > 0
    bounds = _store_bounds(store)
    assert all(low > 0 for low, _ in bounds.values()), bounds
    store.close()
    return store, bounds


def _store_bounds(store: MessageStore) -> dict[tuple[str, int], tuple[int, int]]:
    return {key: (store.get_min_queue_offset(*key), store.get_max_queue_offset(*key)) for key in QUEUES}


def _searched_bounds(store: MessageStore) -> dict[tuple[str, int], tuple[int, int]]:
    """Each queue's bounds as a search of its files finds them."""
    table = ConsumeQueueTable(
        store.config.consume_queue_dir,
        store.config.consume_queue_entries_per_file,
        8,
        lambda: (store.min_commit_log_offset, store.max_commit_log_offset),
    )
    table.scan_disk()
    found = {}
    for key in QUEUES:
        queue = table.get(*key)
        assert queue is not None
        found[key] = (queue.min_queue_offset, queue.max_queue_offset)
    table.close()
    return found


def test_clean_restart_loads_queues_from_the_exact_manifest(open_store: OpenStore) -> None:
    store, bounds = _filled_store(open_store)
    manifest = read_manifest(manifest_path(store.store_path))
    assert manifest is not None and manifest.exact
    reopened = open_store(**RETENTION)
    assert manifest.commit_log_end_offset == reopened.max_commit_log_offset
    assert manifest.commit_log_min_offset == reopened.min_commit_log_offset > 0
    assert reopened._queues.known_bounds == bounds  # noqa: SLF001 - the trusted bounds under test
    assert _store_bounds(reopened) == bounds
    assert _searched_bounds(reopened) == bounds
    assert not reopened._queues.known_bounds  # noqa: SLF001 - each was taken at its load
    # The queues go on from there, and read back.
    _put(reopened, "TopicA", 0, b"after the restart")
    assert reopened.get_max_queue_offset("TopicA", 0) == bounds[("TopicA", 0)][1] + 1
    low, high = bounds[("TopicA", 0)]
    read, queue_offset = 0, low
    while queue_offset <= high:
        got = reopened.get_messages("TopicA", 0, queue_offset, 32)
        assert got.message_count > 0, got.status
        read += got.message_count
        queue_offset = got.next_begin_offset
    assert read == high - low + 1


def test_a_crash_makes_the_restart_search_the_files(open_store: OpenStore) -> None:
    store, bounds = _filled_store(open_store)
    store.config.abort_path.touch()  # as if the process had died
    reopened = open_store(**RETENTION)
    assert reopened._queues.known_bounds == {}  # noqa: SLF001
    assert _store_bounds(reopened) == bounds


def test_a_manifest_that_no_longer_matches_the_log_is_not_trusted(open_store: OpenStore) -> None:
    # A close whose manifest write failed leaves an older one: its bounds may be stale, and its
    # end offset then differs from the log's.
    store, bounds = _filled_store(open_store)
    path = manifest_path(store.store_path)
    document = orjson.loads(path.read_bytes())
    document["commit_log_end_offset"] -= 1
    document["queues"] = [[topic, queue_id, 0, 1] for topic, queue_id, _, _ in document["queues"]]
    path.write_bytes(orjson.dumps(document))
    reopened = open_store(**RETENTION)
    assert reopened._queues.known_bounds == {}  # noqa: SLF001
    assert _store_bounds(reopened) == bounds


def test_a_manifest_from_a_running_store_is_not_exact(open_store: OpenStore) -> None:
    store = open_store()
    _put(store, "TopicA", 0, b"one")
    store.flush_consume_queues(thorough=True)  # a new queue: the flush thread's save writes it
    manifest = read_manifest(manifest_path(store.store_path))
    assert manifest is not None and not manifest.exact
    assert not manifest.trusted_bounds(True, store.min_commit_log_offset, store.max_commit_log_offset)
    store.close()
    closed = read_manifest(manifest_path(store.store_path))
    assert closed is not None and closed.exact
    assert closed.trusted_bounds(True, 0, closed.commit_log_end_offset) == {("TopicA", 0): (0, 1)}
    assert not closed.trusted_bounds(False, 0, closed.commit_log_end_offset)
    assert not closed.trusted_bounds(True, 1, closed.commit_log_end_offset)


def test_manifest_exact_fields_round_trip_and_default_to_untrusted(tmp_path: Path) -> None:
    manifest = QueueManifest(
        {("TopicA", 0): QueueBounds(2, 10), ("TopicA", 1): None},
        index_has_entries=False,
        commit_log_end_offset=5_000,
        exact=True,
        commit_log_min_offset=4_096,
    )
    assert QueueManifest.decode(manifest.encode()) == manifest
    older = b'{"version": 1, "commit_log_end_offset": 0, "index_has_entries": false, "queues": []}'
    decoded = QueueManifest.decode(older)
    assert decoded is not None and not decoded.exact and decoded.commit_log_min_offset == 0
    for bad in (b'"exact": 1', b'"commit_log_min_offset": -4'):
        data = older.replace(b'"queues"', bad + b', "queues"')
        assert QueueManifest.decode(data) is None, data


def test_collector_paused_restores_the_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a failed save")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # it was off: it stays off
    finally:
        gc.enable()
