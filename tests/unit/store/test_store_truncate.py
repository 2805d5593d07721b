"""MessageStore.truncate_to: a replica drops a divergent tail durably, queues and index with it."""

from __future__ import annotations

from pathlib import Path

from orbitmq.store.config import StoreConfig
from orbitmq.store.message_store import MessageStore, PutMessageRequest, PutStatus
from tests.support.crash_copy import copy_as_crashed


def _store(path: Path) -> MessageStore:
    store = MessageStore(StoreConfig(store_path_root_dir=str(path), commit_log_segment_bytes=1024 * 1024))
    store.open()
    return store


def _put(store: MessageStore, body: bytes) -> int:
    result = store.put_message(
        PutMessageRequest(topic="T", queue_id=0, body=body, properties={"KEYS": body.decode()})
    )
    assert result.status is PutStatus.PUT_OK
    return result.commit_log_offsets[0]


def test_store_truncate_to_drops_the_tail_and_survives_a_crash(tmp_path: Path) -> None:
    store = _store(tmp_path / "store")
    for index in range(10):
        _put(store, f"keep-{index}".encode())
    cut = store.max_commit_log_offset
    for index in range(5):
        _put(store, f"drop-{index}".encode())
    assert store.truncate_to(cut) > 0
    assert store.max_commit_log_offset == cut
    assert store.get_max_queue_offset("T", 0) == 10
    # New bytes continue at the cut, with queue offsets after the kept ones.
    _put(store, b"after")
    assert store.get_max_queue_offset("T", 0) == 11
    # A crash now (no close): recovery finds the log as it is, nothing of the dropped tail.
    copy_as_crashed(tmp_path / "store", tmp_path / "crashed")
    store.close()
    reopened = _store(tmp_path / "crashed")
    bodies = [bytes(buffer) for buffer in reopened.get_messages("T", 0, 0, 32).buffers]
    assert len(bodies) == 11
    assert not any(b"drop-" in body for body in bodies) and b"after" in bodies[-1]
    reopened.close()


def test_store_read_limit_hides_records_past_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _put(store, b"confirmed")
    limit = store.max_commit_log_offset
    _put(store, b"not yet")
    store.read_limit = limit
    assert store.get_messages("T", 0, 0, 32).message_count == 1
    gated = store.get_messages("T", 0, 1, 32)
    assert gated.message_count == 0 and gated.gated and gated.next_begin_offset == 1
    store.read_limit = None
    assert store.get_messages("T", 0, 1, 32).message_count == 1
    store.close()
