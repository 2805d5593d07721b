"""SYNC_FLUSH puts flushed by their caller (``flush_here``) or, told late, by the flush thread."""

from __future__ import annotations

import threading
import time

from orbitmq.store._fs import failpoints
from orbitmq.store.config import FlushDiskType
from orbitmq.store.message_store import MessageStore, PutMessageRequest, PutResult, PutStatus
from tests.unit.store.conftest import OpenStore

_FLUSH_THREAD = "orbitmq-commit-log-flush"


def _put(store: MessageStore, wake: bool = False, body: bytes = b"body") -> tuple[PutResult, int]:
    result = store.put_message(PutMessageRequest(topic="TopicA", queue_id=0, body=body), wake_flusher=wake)
    assert result.status is PutStatus.PUT_OK, result.remark
    assert result.flush_future is not None
    return result, result.commit_log_offsets[0] + result.wrote_bytes


def _record_flushing_threads() -> list[str]:
    names: list[str] = []
    failpoints.arm("commit_log.before_fsync", lambda: names.append(threading.current_thread().name))
    return names


def test_flush_here_makes_a_put_durable_in_the_calling_thread(open_store: OpenStore) -> None:
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    flushed_by = _record_flushing_threads()
    here = resolved_here = 0
    for _ in range(20):
        result, end = _put(store)
        assert result.flush_future is not None
        if store.flush_here(end):
            here += 1
            assert store.flushed_commit_log_offset >= end
            resolved_here += result.flush_future.done()
        assert result.flush_future.result(timeout=5) is True
    # The flush thread still looks every 10 ms: a put it took first is its to flush, and a
    # group it took just before flush_here's flush is its to resolve.
    assert here >= 15, here
    assert resolved_here >= 10, resolved_here
    assert flushed_by.count(threading.current_thread().name) >= here


def test_a_put_after_flush_here_waits_for_a_flush_of_its_own(open_store: OpenStore) -> None:
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    first, first_end = _put(store)
    assert store.flush_here(first_end)
    second, second_end = _put(store)
    assert second.flush_future is not first.flush_future
    store.wake_flusher()
    assert second.flush_future is not None and second.flush_future.result(timeout=5) is True
    assert store.flushed_commit_log_offset >= second_end


def test_flush_here_refuses_while_the_thread_flushes(open_store: OpenStore) -> None:
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    in_flush, release = threading.Event(), threading.Event()

    def hold_the_thread() -> None:
        if threading.current_thread().name == _FLUSH_THREAD:
            in_flush.set()
            release.wait(5)

    failpoints.arm("commit_log.before_fsync", hold_the_thread)
    _put(store, wake=True)
    assert in_flush.wait(5)
    waiting, end = _put(store)
    started = time.monotonic()
    assert store.flush_here(end) is False  # no wait for the lock the thread holds
    assert time.monotonic() - started < 1
    release.set()
    assert waiting.flush_future is not None and waiting.flush_future.result(timeout=5) is True
    assert store.flushed_commit_log_offset >= end


def test_a_put_nobody_wakes_for_is_still_flushed(open_store: OpenStore) -> None:
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    flushed_by = _record_flushing_threads()
    result, end = _put(store)
    assert result.flush_future is not None and result.flush_future.result(timeout=5) is True
    assert store.flushed_commit_log_offset >= end
    assert flushed_by == [_FLUSH_THREAD]


def test_flush_here_is_refused_where_it_does_not_apply(open_store: OpenStore) -> None:
    asynchronous = open_store()
    result = asynchronous.put_message(PutMessageRequest(topic="TopicA", queue_id=0, body=b"b"))
    assert result.flush_future is None and asynchronous.flush_here(1 << 40) is False
    closed = MessageStore(asynchronous.config)
    assert closed.flush_here(0) is False
