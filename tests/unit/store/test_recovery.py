"""Crash recovery: torn tail, flipped byte, lost consume queues, abort marker, stale/missing checkpoint.

Method: a crash is the store directory copied while the store is open (what a killed process
leaves in the page cache: abort marker present, buffered ConsumeQueue entries missing). The
copy is then damaged as each scenario needs and reopened; the reopened store must hold every
message put before the crash (except a damaged last one, which must never be served), take
new puts at the right offsets, and pass the offline verifier at teardown.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.store._fs import failpoints
from orbitmq.store.config import FlushDiskType, StoreConfig
from orbitmq.store.message_store import GetStatus, MessageStore, PutMessageRequest, PutResult, PutStatus
from orbitmq.store.verify import verify_store
from tests.support.crash_copy import copy_as_crashed

OpenStore = Callable[..., MessageStore]


def _put(store: MessageStore, queue_id: int, body: bytes, **fields: Any) -> PutResult:
    result = store.put_message(PutMessageRequest("TopicA", queue_id, body, **fields))
    assert result.status is PutStatus.PUT_OK
    return result


def _fill(store: MessageStore, count: int) -> list[PutResult]:
    return [
        _put(
            store, index % 3, f"message-{index}".encode() * 20, properties={"KEYS": f"k{index}", "TAGS": "t"}
        )
        for index in range(count)
    ]


def _bodies(store: MessageStore, queue_id: int) -> list[bytes]:
    bodies: list[bytes] = []
    queue_offset = 0
    while True:
        got = store.get_messages("TopicA", queue_id, queue_offset, 32)
        if got.status is not GetStatus.FOUND:
            return bodies
        bodies.extend(m.body for m in decode_stored_messages(got.body()))
        queue_offset = got.next_begin_offset


def _crash(store: MessageStore, target: Path) -> Path:
    copy_as_crashed(store.store_path, target)
    assert (target / "abort").exists()
    return target


def _last_segment(root: Path) -> Path:
    return sorted((root / "commitlog").iterdir())[-1]


def test_recovery_crash_path_keeps_every_message(open_store: OpenStore, tmp_path: Path) -> None:
    store = open_store()
    _fill(store, 200)
    expected = [_bodies(store, queue_id) for queue_id in range(3)]
    copy = _crash(store, tmp_path / "crashed")
    recovered = open_store(root=copy)
    report = recovered.recovery_report
    assert report is not None and not report.clean_shutdown and report.corrupt_offset is None
    assert [_bodies(recovered, queue_id) for queue_id in range(3)] == expected
    assert recovered.max_commit_log_offset == store.max_commit_log_offset
    assert _put(recovered, 0, b"after").queue_offset == len(expected[0])


def test_recovery_truncates_torn_tail(open_store: OpenStore, tmp_path: Path) -> None:
    store = open_store()
    results = _fill(store, 50)
    end = store.max_commit_log_offset
    last_record = store.read_message(results[-1].commit_log_offsets[0])
    assert last_record is not None
    copy = _crash(store, tmp_path / "crashed")
    segment = _last_segment(copy)
    start = int(segment.name)
    with open(segment, "r+b") as handle:  # half of a record that never finished
        handle.seek(end - start)
        handle.write(last_record[: len(last_record) // 2])
    recovered = open_store(root=copy)
    assert recovered.recovery_report is not None and recovered.recovery_report.corrupt_offset == end
    assert recovered.max_commit_log_offset == end
    assert len(_bodies(recovered, 1)) == 17
    assert _put(recovered, 1, b"next").commit_log_offsets == [end]


def test_recovery_never_serves_a_record_with_a_flipped_byte(open_store: OpenStore, tmp_path: Path) -> None:
    store = open_store()
    results = _fill(store, 30)
    last = results[-1]
    copy = _crash(store, tmp_path / "crashed")
    segment = _last_segment(copy)
    with open(segment, "r+b") as handle:
        handle.seek(last.commit_log_offsets[0] - int(segment.name) + 100)  # inside the body
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0x40]))
    recovered = open_store(root=copy)
    assert recovered.max_commit_log_offset == last.commit_log_offsets[0]
    assert recovered.read_message(last.commit_log_offsets[0]) is None
    assert recovered.get_max_queue_offset("TopicA", 29 % 3) == last.queue_offset
    assert len(_bodies(recovered, 2)) == 9


def test_recovery_rebuilds_deleted_consume_queues_identically(open_store: OpenStore) -> None:
    store = open_store()
    _fill(store, 400)
    store.close()
    queue_dir = store.store_path / "consumequeue"
    before = {p.relative_to(queue_dir): p.read_bytes() for p in queue_dir.rglob("*") if p.is_file()}
    assert len(before) >= 6
    shutil.rmtree(queue_dir)
    reopened = open_store()
    reopened.close()
    after = {p.relative_to(queue_dir): p.read_bytes() for p in queue_dir.rglob("*") if p.is_file()}
    assert after == before


def test_recovery_rebuilds_one_lost_queue_from_the_log(open_store: OpenStore) -> None:
    """A queue directory lost while the checkpoint claims it complete: a checkpoint-less start rebuilds it."""
    store = open_store()
    _fill(store, 120)
    store.close()
    reopened = open_store()
    expected = _bodies(reopened, 1)
    reopened.close()
    shutil.rmtree(store.store_path / "consumequeue" / "TopicA" / "1")
    again = open_store()
    again.close()  # clean path; queue 1 lost its files but not its records
    (store.store_path / "checkpoint").unlink()
    last = open_store()
    assert _bodies(last, 1) == expected


def test_recovery_with_stale_checkpoint_redispatches(open_store: OpenStore, tmp_path: Path) -> None:
    store = open_store()
    _fill(store, 40)
    store.close()
    stale = (store.store_path / "checkpoint").read_bytes()
    store = open_store()
    _fill(store, 40)
    expected = [_bodies(store, queue_id) for queue_id in range(3)]
    copy = _crash(store, tmp_path / "crashed")
    (copy / "checkpoint").write_bytes(stale)
    recovered = open_store(root=copy)
    assert [_bodies(recovered, queue_id) for queue_id in range(3)] == expected


def test_recovery_without_checkpoint_scans_from_first_segment(open_store: OpenStore, tmp_path: Path) -> None:
    store = open_store()
    _fill(store, 300)
    expected = _bodies(store, 0)
    copy = _crash(store, tmp_path / "crashed")
    (copy / "checkpoint").unlink(missing_ok=True)
    recovered = open_store(root=copy)
    assert recovered.recovery_report is not None and recovered.recovery_report.scan_start_offset == 0
    assert _bodies(recovered, 0) == expected
    assert len(recovered.query_messages_by_key("TopicA", "k299", 4, 0, 2**62)) == 1


def test_recovery_after_process_kill_keeps_acknowledged_puts(tmp_path: Path) -> None:
    """A child process acknowledges SYNC_FLUSH puts, then dies at a failpoint mid-flush."""
    root = tmp_path / "store"
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from orbitmq.store._fs import crash_process, failpoints
        from orbitmq.store.config import FlushDiskType, StoreConfig, StoreConfig
        from orbitmq.store.message_store import MessageStore, PutMessageRequest
        store = MessageStore(StoreConfig(Path({str(root)!r}), commit_log_segment_bytes=65536,
            consume_queue_entries_per_file=100, max_hash_slot_num=64, max_index_num=256,
            flush_disk_type=FlushDiskType.SYNC_FLUSH))
        store.open()
        for index in range(60):
            result = store.put_message(PutMessageRequest("TopicA", 0, b"acked-%d" % index))
            assert result.flush_future.result(timeout=10)
            print(index, flush=True)
        failpoints.arm("commit_log.before_fsync", crash_process)
        store.put_message(PutMessageRequest("TopicA", 0, b"unacked"))
        import time; time.sleep(10)
        """
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, text=True)
    assert completed.returncode == 137, completed.stderr
    assert completed.stdout.split()[-1] == "59"
    store = MessageStore(
        StoreConfig(
            root,
            commit_log_segment_bytes=65536,
            consume_queue_entries_per_file=100,
            max_hash_slot_num=64,
            max_index_num=256,
            flush_disk_type=FlushDiskType.SYNC_FLUSH,
        )
    )
    store.open()
    try:
        bodies = _bodies(store, 0)
        assert bodies[:60] == [b"acked-%d" % index for index in range(60)]
        assert len(bodies) in (60, 61)
    finally:
        store.close()


def test_recovery_of_a_kill_between_a_new_segment_and_the_blank_closing_the_full_one(
    open_store: OpenStore, tmp_path: Path
) -> None:
    """A roll-over creates the next segment before it writes the full one's blank: a kill between
    the two leaves an empty newest segment after one ending in zeros. The verifier leaves both to
    recovery; recovery ends the log in the full segment, and puts go on from there."""
    store = open_store()
    copy = tmp_path / "crashed"
    failpoints.arm(
        "commit_log.before_blank", lambda: copy.exists() or copy_as_crashed(store.store_path, copy)
    )
    results: list[PutResult] = []
    while not copy.exists():
        results.append(_put(store, len(results) % 3, bytes(700)))
    failpoints.disarm()
    last_kept = store.read_message(results[-2].commit_log_offsets[0])
    assert last_kept is not None
    end = results[-2].commit_log_offsets[0] + len(last_kept)
    segments = sorted((copy / "commitlog").iterdir())
    assert (copy / "abort").exists() and not segments[-1].read_bytes().strip(b"\0")
    report = verify_store(copy, commit_log_segment_bytes=store.config.commit_log_segment_bytes)
    assert report.ok and report.needs_recovery, report.render()
    assert report.left_to_recovery["empty segments after an unclosed one (deleted)"] == 1
    kept = results[:-1]
    assert report.commit_log_end_offset == end
    recovered = open_store(root=copy)
    assert recovered.max_commit_log_offset == end
    assert sum(len(_bodies(recovered, queue_id)) for queue_id in range(3)) == len(kept)
    assert _put(recovered, 0, b"after").queue_offset == len(kept[0::3])


def test_recovery_blank_record_and_header_fields_survive(open_store: OpenStore, tmp_path: Path) -> None:
    store = open_store()
    results = [_put(store, 0, bytes(3000)) for _ in range(50)]
    copy = _crash(store, tmp_path / "crashed")
    recovered = open_store(root=copy)
    for result in results:
        record = recovered.read_message(result.commit_log_offsets[0])
        assert record is not None
        assert struct.unpack_from(">q", record, 28)[0] == result.commit_log_offsets[0]


def test_recovery_rebuilds_a_queue_with_a_gap(open_store: OpenStore, tmp_path: Path) -> None:
    """Entries lost below the checkpoint's dispatch point make a gap: that queue is rebuilt from the log."""
    store = open_store()
    _fill(store, 60)
    store.close()
    store = open_store()
    _fill(store, 60)
    expected = _bodies(store, 1)
    copy = _crash(store, tmp_path / "crashed")
    queue_file = copy / "consumequeue" / "TopicA" / "1" / "00000000000000000000"
    with open(queue_file, "r+b") as handle:  # entries 5.. of queue 1 never reached the disk
        handle.seek(5 * 20)
        handle.write(bytes(95 * 20))
    recovered = open_store(root=copy)
    assert recovered.recovery_report is not None and recovered.recovery_report.rebuilt_queues == 1
    assert _bodies(recovered, 1) == expected


def test_recovery_drops_stale_entries_of_queues_loaded_later(open_store: OpenStore, tmp_path: Path) -> None:
    """A queue untouched by recovery still has an entry into the torn tail; new records then
    fill that range. When the queue is first read, the stale entry must not serve them."""
    store = open_store()
    _put(store, 2, b"kept" * 50)
    torn = _put(store, 5, b"torn" * 50)
    store.flush_consume_queues(thorough=True)  # queue 5's entry and the checkpoint reach the disk
    copy = _crash(store, tmp_path / "crashed")
    segment = _last_segment(copy)
    with open(segment, "r+b") as handle:  # the record of queue 5 loses its second half
        handle.seek(torn.commit_log_offsets[0] + 150)
        handle.write(bytes(200))
    recovered = open_store(root=copy)
    for _ in range(3):
        _put(recovered, 2, b"new!" * 50)
    assert recovered.max_commit_log_offset > torn.commit_log_offsets[0] + 200
    got = recovered.get_messages("TopicA", 5, 0, 32)
    assert got.status is GetStatus.NO_MESSAGE_IN_QUEUE
    assert recovered.get_max_queue_offset("TopicA", 5) == 0
