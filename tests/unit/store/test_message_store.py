"""MessageStore facade: put/get, §2.5 statuses, tag filter, batches, lookups, flush, replication.

Each test uses tiny segments (64 KiB) and queue files (100 entries); the conftest closes every
store and runs the offline verifier on its directory afterwards.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orbitmq.errors import StoreClosedError
from orbitmq.model.message import SysFlag
from orbitmq.protocol.message_codec import decode_stored_message, decode_stored_messages
from orbitmq.protocol.tags import TagFilter
from orbitmq.store._fs import failpoints
from orbitmq.store.config import FlushDiskType, StoreConfig
from orbitmq.store.message_store import (
    AppendStatus,
    GetStatus,
    MessageStore,
    PutMessageRequest,
    PutResult,
    PutStatus,
    open_queue_files_limit,
)

OpenStore = Callable[..., MessageStore]


def request(
    topic: str = "TopicA", queue_id: int = 0, body: bytes = b"body", **fields: Any
) -> PutMessageRequest:
    return PutMessageRequest(topic=topic, queue_id=queue_id, body=body, **fields)


def put_ok(store: MessageStore, *requests: PutMessageRequest) -> PutResult:
    result = store.put_messages(list(requests))
    assert result.status is PutStatus.PUT_OK, result.remark
    return result


def test_message_store_put_then_get_returns_raw_records(open_store: OpenStore) -> None:
    store = open_store()
    results = [put_ok(store, request(body=f"m{index}".encode())) for index in range(5)]
    assert [r.queue_offset for r in results] == [0, 1, 2, 3, 4]
    got = store.get_messages("TopicA", 0, 1, 3)
    assert got.status is GetStatus.FOUND
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (4, 0, 5)
    assert got.queue_offsets == [1, 2, 3]
    assert got.commit_log_offsets == [r.commit_log_offsets[0] for r in results[1:4]]
    messages = decode_stored_messages(got.body())
    assert [m.body for m in messages] == [b"m1", b"m2", b"m3"]
    assert [m.commit_log_offset for m in messages] == got.commit_log_offsets
    assert got.message_count == 3 and got.total_bytes == len(got.body())


def test_message_store_get_statuses_follow_pull_semantics(open_store: OpenStore) -> None:
    store = open_store()
    missing = store.get_messages("Nope", 0, 0, 32)
    assert (missing.status, missing.next_begin_offset) == (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0)
    for _ in range(3):
        put_ok(store, request())
    at_end = store.get_messages("TopicA", 0, 3, 32)
    assert (at_end.status, at_end.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 3)
    beyond = store.get_messages("TopicA", 0, 10, 32)
    assert (beyond.status, beyond.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 3)


def test_message_store_tag_filter_counts_scanned_entries(open_store: OpenStore) -> None:
    store = open_store()
    for index in range(10):
        put_ok(store, request(properties={"TAGS": "red" if index % 3 == 0 else "blue"}))
    only_red = TagFilter.parse("red")
    got = store.get_messages("TopicA", 0, 1, 2, tag_filter=only_red.matches_code)
    assert got.queue_offsets == [3, 6]
    assert got.next_begin_offset == 7
    none = store.get_messages("TopicA", 0, 7, 32, tag_filter=TagFilter.parse("green").matches_code)
    assert (none.status, none.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 10)


def test_message_store_byte_limit_returns_at_least_one(open_store: OpenStore) -> None:
    store = open_store()
    for _ in range(4):
        put_ok(store, request(body=b"z" * 1000))
    got = store.get_messages("TopicA", 0, 0, 32, max_total_bytes=2500)
    assert got.message_count == 2 and got.next_begin_offset == 2
    got = store.get_messages("TopicA", 0, 0, 32, max_total_bytes=10)
    assert got.message_count == 1


def test_message_store_put_messages_is_one_contiguous_write(open_store: OpenStore) -> None:
    store = open_store()
    put_ok(store, request(queue_id=2))
    batch = put_ok(store, *(request(queue_id=2, body=bytes([index]) * 10) for index in range(5)))
    assert batch.queue_offset == 1
    offsets = batch.commit_log_offsets
    assert all(b - a == offsets[1] - offsets[0] for a, b in zip(offsets, offsets[1:], strict=False))
    assert batch.wrote_bytes == (offsets[1] - offsets[0]) * 5
    assert store.get_max_queue_offset("TopicA", 2) == 6
    mixed = store.put_messages([request(queue_id=1), request(queue_id=2)])
    assert mixed.status is PutStatus.MESSAGE_ILLEGAL


def test_message_store_rolls_segments_with_blank_records(open_store: OpenStore) -> None:
    store = open_store()
    results = [put_ok(store, request(queue_id=index % 3, body=os.urandom(3000))) for index in range(60)]
    assert store.max_commit_log_offset > 2 * 64 * 1024
    assert len(list((store.store_path / "commitlog").iterdir())) >= 3
    for result in results[::7]:
        record = store.read_message(result.commit_log_offsets[0])
        assert record is not None
        assert decode_stored_message(record)[0].commit_log_offset == result.commit_log_offsets[0]


def test_message_store_validation_statuses(open_store: OpenStore) -> None:
    store = open_store(max_message_size_bytes=1000)
    assert store.put_message(request(body=b"x" * 1001)).status is PutStatus.MESSAGE_ILLEGAL
    too_long = store.put_message(request(topic="t" * 128))
    assert too_long.status is PutStatus.MESSAGE_ILLEGAL and "127" in too_long.remark
    huge = store.put_message(request(properties={"k": "v" * 40000}))
    assert huge.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.put_message(request(properties={"a\x01": "b"})).status is PutStatus.MESSAGE_ILLEGAL
    assert store.get_max_queue_offset("TopicA", 0) == 0


def test_message_store_closed_store_answers_or_raises(make_config: Callable[..., StoreConfig]) -> None:
    store = MessageStore(make_config())
    assert store.put_message(request()).status is PutStatus.SERVICE_NOT_AVAILABLE
    with pytest.raises(StoreClosedError):
        store.get_messages("TopicA", 0, 0, 1)


def test_message_store_offset_lookups_by_time(open_store: OpenStore) -> None:
    store = open_store()
    stamps = []
    for _ in range(6):
        stamps.append(put_ok(store, request()).store_timestamp)
        time.sleep(0.003)
    assert store.get_earliest_store_timestamp("TopicA", 0) == stamps[0]
    assert store.get_store_timestamp("TopicA", 0, 4) == stamps[4]
    assert store.get_store_timestamp("TopicA", 0, 6) == -1
    assert store.get_queue_offset_by_time("TopicA", 0, stamps[3]) == 3
    assert store.get_queue_offset_by_time("TopicA", 0, 0) == 0
    assert store.get_queue_offset_by_time("TopicA", 0, stamps[5] + 1000) == 6
    assert store.get_earliest_store_timestamp("Nope", 0) == -1


def test_message_store_query_by_key_and_unique_id(open_store: OpenStore) -> None:
    store = open_store()
    for index in range(20):
        put_ok(store, request(properties={"KEYS": f"order-{index % 4} shared", "UNIQ_KEY": f"U{index}"}))
    found = store.query_messages_by_key("TopicA", "order-1", 32, 0, 2**62)
    assert len(found) == 5
    assert all("order-1" in decode_stored_message(r)[0].properties["KEYS"] for r in found)
    assert len(store.query_messages_by_key("TopicA", "U7", 32, 0, 2**62)) == 1
    assert store.query_messages_by_key("TopicB", "U7", 32, 0, 2**62) == []


def test_message_store_batch_put_indexes_every_key_across_index_files(open_store: OpenStore) -> None:
    # 7 usable entries per index file; 10 messages x 3 keys roll over files inside the batch.
    store = open_store(max_hash_slot_num=4, max_index_num=8)
    batch = [request(properties={"KEYS": "alpha beta", "UNIQ_KEY": f"U{index}"}) for index in range(10)]
    result = put_ok(store, *batch)
    assert len(result.commit_log_offsets) == 10
    for index, commit_log_offset in enumerate(result.commit_log_offsets):
        found = store.query_messages_by_key("TopicA", f"U{index}", 4, 0, 2**62)
        assert [decode_stored_message(r)[0].commit_log_offset for r in found] == [commit_log_offset]
    assert len(store.query_messages_by_key("TopicA", "beta", 32, 0, 2**62)) == 10
    single = store.put_message(request(properties={"UNIQ_KEY": "U-single"}))
    assert single.status is PutStatus.PUT_OK and single.queue_offset == 10
    assert len(store.query_messages_by_key("TopicA", "U-single", 4, 0, 2**62)) == 1


def test_message_store_transaction_types_skip_consume_queue(open_store: OpenStore) -> None:
    store = open_store()
    prepared = put_ok(store, request(sys_flag=SysFlag.TRANSACTION_PREPARED_TYPE))
    assert prepared.queue_offset == 0
    put_ok(store, request(sys_flag=SysFlag.TRANSACTION_COMMIT_TYPE))
    assert store.get_max_queue_offset("TopicA", 0) == 1
    assert store.read_message(prepared.commit_log_offsets[0]) is not None


def test_message_store_sync_flush_futures_resolve_with_group_commit(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    syncs = []
    real_fdatasync = os.fdatasync

    def counting(fd: int) -> None:
        syncs.append(fd)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", counting)
    futures = []
    lock = threading.Lock()

    def producer() -> None:
        for _ in range(20):
            result = put_ok(store, request(body=b"d" * 200))
            assert result.flush_future is not None
            with lock:
                futures.append(result.flush_future)

    threads = [threading.Thread(target=producer) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(future.result(timeout=5) for future in futures)
    assert store.flushed_commit_log_offset == store.max_commit_log_offset
    assert len(syncs) < len(futures)


def test_message_store_sync_flush_puts_waiting_for_one_flush_share_its_future(open_store: OpenStore) -> None:
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    in_fsync, release = threading.Event(), threading.Event()

    def hold() -> None:
        in_fsync.set()
        release.wait(5)

    failpoints.arm("commit_log.before_fsync", hold)
    first = put_ok(store, request())
    assert in_fsync.wait(5)  # the flush thread took the first put and is inside its flush
    waiting = [put_ok(store, request(body=b"w" * 100)) for _ in range(3)]
    futures = {id(result.flush_future) for result in waiting}
    assert len(futures) == 1 and first.flush_future is not waiting[0].flush_future
    assert waiting[0].flush_future is not None and not waiting[0].flush_future.done()
    assert waiting[0].flush_future.cancel() is False  # one waiter giving up cancels nobody's answer
    failpoints.disarm("commit_log.before_fsync")
    release.set()
    assert waiting[0].flush_future.result(timeout=5) is True
    last_end = waiting[-1].commit_log_offsets[0] + waiting[-1].wrote_bytes
    assert store.flushed_commit_log_offset >= last_end


def test_message_store_sync_flush_times_out(open_store: OpenStore) -> None:
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=30)
    failpoints.arm("commit_log.before_fsync", lambda: time.sleep(0.2))
    result = put_ok(store, request())
    assert result.flush_future is not None
    assert result.flush_future.result(timeout=5) is False


def test_message_store_async_flush_has_no_future_and_flushes(open_store: OpenStore) -> None:
    store = open_store()
    result = put_ok(store, request())
    assert result.flush_future is None
    deadline = time.monotonic() + 5
    while store.flushed_commit_log_offset < store.max_commit_log_offset and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.flushed_commit_log_offset == store.max_commit_log_offset


def test_message_store_arrival_listener_sees_new_max(open_store: OpenStore) -> None:
    store = open_store()
    seen: list[tuple[str, int, int]] = []
    store.add_arrival_listener(lambda topic, queue_id, max_offset: seen.append((topic, queue_id, max_offset)))
    put_ok(store, request(queue_id=1))
    put_ok(store, request(queue_id=1), request(queue_id=1))
    assert seen == [("TopicA", 1, 1), ("TopicA", 1, 3)]


def test_message_store_delete_topic_and_queue_listing(open_store: OpenStore) -> None:
    # Verified at teardown: the log keeps the deleted records, below the queue's kept end.
    store = open_store()
    put_ok(store, request(topic="Keep", queue_id=0))
    put_ok(store, request(topic="Drop", queue_id=1))
    assert sorted(store.queues()) == [("Drop", 1), ("Keep", 0)]
    store.delete_topic("Drop")
    # The deleted queue is empty but keeps counting, so a re-created topic never reuses the
    # queue offsets of the deleted records (recovery replays both from the same log).
    assert store.get_max_queue_offset("Drop", 1) == store.get_min_queue_offset("Drop", 1) == 1
    assert store.get_messages("Drop", 1, 0, 32).buffers == []
    assert put_ok(store, request(topic="Drop", queue_id=1, body=b"again")).queue_offset == 1
    assert [decode_stored_message(b)[0].body for b in store.get_messages("Drop", 1, 1, 32).buffers] == [
        b"again"
    ]


def test_message_store_replicates_through_raw_read_and_append(open_store: OpenStore, tmp_path: Path) -> None:
    master = open_store()
    slave = open_store(root=tmp_path / "slave")
    for index in range(40):
        put_ok(master, request(queue_id=index % 2, body=os.urandom(2500), properties={"KEYS": f"k{index}"}))
    arrivals: list[int] = []
    slave.add_arrival_listener(lambda topic, queue_id, max_offset: arrivals.append(max_offset))
    # Frames of 5000 bytes split records: the slave appends the whole ones and hands the tail
    # back, to be given again with the next frame, as the replication slave does.
    sent = 0
    pending = b""
    while sent < master.max_commit_log_offset:
        chunk = master.read_commit_log(sent, 5000)
        sent += len(chunk)
        data = pending + chunk
        result = slave.append_commit_log(sent - len(data), data)
        assert result.status is AppendStatus.APPENDED, result.remark
        pending = data[result.appended_bytes :]
        assert slave.max_commit_log_offset == sent - len(pending)
    assert pending == b""
    assert slave.append_commit_log(0, b"again").status is AppendStatus.NOT_AT_END
    assert slave.max_commit_log_offset == slave.confirm_commit_log_offset == master.max_commit_log_offset
    assert slave.get_max_queue_offset("TopicA", 1) == 20 and arrivals
    assert slave.get_messages("TopicA", 1, 0, 32).body() == master.get_messages("TopicA", 1, 0, 32).body()
    assert len(slave.query_messages_by_key("TopicA", "k5", 4, 0, 2**62)) == 1
    assert slave.read_commit_log(0, 1 << 20) == master.read_commit_log(0, 1 << 20)


def test_message_store_reopen_keeps_everything(open_store: OpenStore, store_root: Path) -> None:
    store = open_store()
    for index in range(150):
        put_ok(store, request(queue_id=index % 2, properties={"TAGS": "a"}))
    store.close()
    reopened = open_store()
    assert reopened.recovery_report is not None and reopened.recovery_report.clean_shutdown
    assert reopened.get_max_queue_offset("TopicA", 1) == 75
    assert put_ok(reopened, request(queue_id=1)).queue_offset == 75
    assert reopened.get_messages("TopicA", 1, 70, 32).queue_offsets == [70, 71, 72, 73, 74, 75]


def test_message_store_handles_50000_queues(open_store: OpenStore) -> None:
    """50,000 queues written and read back; the put path does no per-queue file work."""
    store = open_store(
        verify=False,  # its queues are dropped before close, on purpose
        commit_log_segment_bytes=8 * 1024 * 1024,
        flush_interval_consume_queue_ms=60_000,
    )
    topics = [f"T{index}" for index in range(500)]
    started = time.monotonic()
    for topic in topics:
        for queue_id in range(100):
            put_ok(store, request(topic=topic, queue_id=queue_id, body=b"q%d" % queue_id))
    assert time.monotonic() - started < 20
    assert sum(1 for _ in store.queues()) == 50_000
    for topic in topics:
        for queue_id in range(100):
            got = store.get_messages(topic, queue_id, 0, 32)
            assert got.status is GetStatus.FOUND and got.queue_offsets == [0]
    assert decode_stored_messages(store.get_messages("T499", 99, 0, 1).body())[0].body == b"q99"
    # Writing 50,000 queue files out at close is the benchmark's business, not a unit test's.
    for topic in topics:
        store.delete_topic(topic)


def test_message_store_reopens_many_queues_with_bounded_open_files(open_store: OpenStore) -> None:
    config = {"consume_queue_entries_per_file": 10, "max_open_consume_queue_files": 16}
    store = open_store(**config)
    for queue_id in range(2_000):
        put_ok(store, request(topic=f"T{queue_id % 20}", queue_id=queue_id, body=b"q%d" % queue_id))
    store.close()
    reopened = open_store(**config)
    assert sum(1 for _ in reopened.queues()) == 2_000
    for queue_id in range(0, 2_000, 3):
        got = reopened.get_messages(f"T{queue_id % 20}", queue_id, 0, 32)
        assert got.queue_offsets == [0]
        assert decode_stored_messages(got.body())[0].body == b"q%d" % queue_id
    assert reopened._queues.files.open_count <= 16


def test_message_store_concurrent_puts_and_reads_stay_consistent(open_store: OpenStore) -> None:
    """A writer and a reader thread while the housekeeping thread writes queue files out."""
    store = open_store(flush_interval_consume_queue_ms=5, consume_queue_entries_per_file=16)
    errors: list[str] = []
    done = threading.Event()

    def writer() -> None:
        for index in range(1500):
            put_ok(store, request(queue_id=index % 3, body=b"%d" % (index // 3)))
        done.set()

    def reader() -> None:
        next_offsets = [0, 0, 0]
        while not done.is_set() or any(o < 500 for o in next_offsets):
            for queue_id in range(3):
                got = store.get_messages("TopicA", queue_id, next_offsets[queue_id], 32)
                if got.status is not GetStatus.FOUND:
                    continue
                bodies = [m.body for m in decode_stored_messages(got.body())]
                expected = [b"%d" % offset for offset in got.queue_offsets]
                if bodies != expected or got.queue_offsets[0] != next_offsets[queue_id]:
                    errors.append(f"queue {queue_id}: {got.queue_offsets} {bodies[:3]}")
                    return
                next_offsets[queue_id] = got.next_begin_offset

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert [store.get_max_queue_offset("TopicA", q) for q in range(3)] == [500, 500, 500]


def test_message_store_close_during_puts_answers_every_put(open_store: OpenStore) -> None:
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    statuses: list[PutStatus] = []
    futures = []

    def producer() -> None:
        for _ in range(300):
            result = store.put_message(request())
            statuses.append(result.status)
            if result.flush_future is not None:
                futures.append(result.flush_future)

    threads = [threading.Thread(target=producer) for _ in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(0.01)
    store.close()
    for thread in threads:
        thread.join(timeout=30)
    assert set(statuses) <= {PutStatus.PUT_OK, PutStatus.SERVICE_NOT_AVAILABLE}
    assert statuses.count(PutStatus.PUT_OK) == len(futures)
    assert all(future.result(timeout=5) for future in futures)


def test_open_queue_files_limit_keeps_half_the_descriptor_limit_free() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert open_queue_files_limit(8) == 8
    # A child process with a soft limit of 256: the LRU may hold 128 files, not 1,024.
    script = (
        "import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit("
        "resource.RLIMIT_NOFILE)[1])); from orbitmq.store.message_store import open_queue_files_limit; "
        "print(open_queue_files_limit(1024), open_queue_files_limit(100))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["128", "100"]
    assert "exceeds half the open-file limit (256)" in out.stderr
    assert (soft, hard) == resource.getrlimit(resource.RLIMIT_NOFILE)
