"""Crash and corruption scenarios of the message store.

Goal: after any crash every put acknowledged under SYNC_FLUSH is readable, intact, and no
damaged record is ever served; derived files are rebuilt from the CommitLog.

Method:
* Process kill: ``store_writer.py`` (a child process) puts messages under SYNC_FLUSH and prints
  each acknowledged one; the test SIGKILLs it at a random moment (sometimes during its own crash
  recovery), many times on the same directory. After each kill a copy of the directory is opened
  in this process: every acknowledged message must be there with the same body, and the offline
  verifier must find the copy consistent after close. The original stays crashed, so the next
  child recovers it.
* Failpoints: the child ends itself with os._exit at a named step of the put/flush path.
* Corruption: a flipped byte in the last record, a torn tail (truncated file, zeroed half
  record, garbage after the end), a deleted consumequeue directory (rebuilt byte for byte).

The random schedule is seeded; the seed is printed and can be fixed with ORBITMQ_FAULT_SEED.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.store.message_store import GetStatus, MessageStore, PutMessageRequest, PutStatus
from orbitmq.store.verify import verify_store
from tests.fault.store_writer import (
    INDEX_ENTRIES,
    INDEX_HASH_SLOTS,
    TOPICS,
    body_digest,
    store_config,
)

pytestmark = pytest.mark.fault

WRITER = Path(__file__).with_name("store_writer.py")
SEGMENT_BYTES = 64 * 1024
QUEUE_ENTRIES = 50
KILL_ITERATIONS = 20
READY_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Ack:
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    digest: str


class Writer:
    """One store_writer.py child; stdout is drained by a thread so the child never blocks on it."""

    def __init__(self, directory: Path, seed: int, log_path: Path, extra: list[str] | None = None) -> None:
        args = [sys.executable, str(WRITER), str(directory), "--segment-bytes", str(SEGMENT_BYTES)]
        args += ["--queue-entries", str(QUEUE_ENTRIES), "--seed", str(seed), *(extra or [])]
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if raw.endswith(b"\n"):  # a line cut by the kill is not an acknowledgement
                line = raw.decode().rstrip("\n")
                self.lines.append(line)
                if line == "READY":
                    self.ready.set()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)
        assert self.proc.stdout is not None
        self.proc.stdout.close()

    def acks(self) -> list[Ack]:
        acks = []
        for line in self.lines:
            if line.startswith("ACK "):
                _, topic, queue_id, queue_offset, commit_log_offset, digest = line.split(" ")
                acks.append(Ack(topic, int(queue_id), int(queue_offset), int(commit_log_offset), digest))
        return acks


@pytest.fixture
def seed() -> int:
    value = int(os.environ.get("ORBITMQ_FAULT_SEED", random.randrange(1 << 30)))
    print(f"fault seed {value} (set ORBITMQ_FAULT_SEED={value} to replay)")
    return value


@pytest.fixture
def writers() -> Iterator[list[Writer]]:
    started: list[Writer] = []
    yield started
    for writer in started:
        writer.kill()


def open_store(directory: Path) -> MessageStore:
    store = MessageStore(store_config(directory, SEGMENT_BYTES, QUEUE_ENTRIES))
    store.open()
    return store


def assert_verified(directory: Path) -> None:
    report = verify_store(
        directory,
        commit_log_segment_bytes=SEGMENT_BYTES,
        consume_queue_entries_per_file=QUEUE_ENTRIES,
        index_hash_slot_num=INDEX_HASH_SLOTS,
        index_num=INDEX_ENTRIES,
    )
    assert report.ok, report.render()


def assert_acks_readable(store: MessageStore, acks: dict[tuple[str, int, int], Ack]) -> None:
    """Every acknowledged message is at its queue offset, at its commit-log offset, with its body,
    and the index finds it by its unique key."""
    for (topic, queue_id, queue_offset), ack in acks.items():
        result = store.get_messages(topic, queue_id, queue_offset, 1)
        where = f"acknowledged {topic} queue {queue_id} queue offset {queue_offset}"
        assert result.status is GetStatus.FOUND, f"{where}: {result.status}"
        (message,) = decode_stored_messages(result.body())
        assert (message.topic, message.queue_id, message.queue_offset) == (topic, queue_id, queue_offset), (
            where
        )
        assert message.commit_log_offset == ack.commit_log_offset, where
        assert body_digest(message.body) == ack.digest, f"{where}: body differs"
        unique_key = message.properties["UNIQ_KEY"]
        by_key = decode_stored_messages(b"".join(store.query_messages_by_key(topic, unique_key, 4, 0, 2**62)))
        assert ack.commit_log_offset in {found.commit_log_offset for found in by_key}, f"{where}: not indexed"


def check_copy(directory: Path, copy: Path, acks: dict[tuple[str, int, int], Ack]) -> int:
    """Open a copy of a crashed store, check the acknowledged messages, close, verify offline."""
    shutil.rmtree(copy, ignore_errors=True)
    if not directory.exists():
        # The first writer was killed before it created the store: it acknowledged nothing.
        assert not acks, "messages were acknowledged but the store directory does not exist"
        return 0
    shutil.copytree(directory, copy)
    store = open_store(copy)
    try:
        assert_acks_readable(store, acks)
        stored = sum(store.get_max_queue_offset(topic, queue_id) for topic, queue_id in store.queues())
    finally:
        store.close()
    assert_verified(copy)
    return stored


def test_store_crash_sigkill_keeps_every_acknowledged_message(
    tmp_path: Path, seed: int, writers: list[Writer]
) -> None:
    rng = random.Random(seed)
    directory, copy = tmp_path / "store", tmp_path / "check"
    acks: dict[tuple[str, int, int], Ack] = {}
    kills_during_recovery = 0
    for iteration in range(KILL_ITERATIONS):
        writer = Writer(directory, rng.randrange(1 << 30), tmp_path / "writer.log")
        writers.append(writer)
        if rng.random() < 0.2:
            time.sleep(rng.uniform(0.0, 0.4))  # may land in imports, open or crash recovery
            kills_during_recovery += not writer.ready.is_set()
        else:
            assert writer.ready.wait(READY_TIMEOUT_S), (tmp_path / "writer.log").read_text()
            time.sleep(rng.uniform(0.02, 0.5))
        writer.kill()
        for ack in writer.acks():
            key = (ack.topic, ack.queue_id, ack.queue_offset)
            assert acks.get(key, ack) == ack, f"iteration {iteration}: queue offset {key} acknowledged twice"
            acks[key] = ack
        stored = check_copy(directory, copy, acks)
        assert stored >= len(acks)
    print(
        f"{len(acks)} acknowledged messages over {KILL_ITERATIONS} kills ({kills_during_recovery} before READY)"
    )
    assert len(acks) > KILL_ITERATIONS, "the writers acknowledged too little for the test to mean anything"
    assert {ack.topic for ack in acks.values()} == set(TOPICS)


# failpoint -> how many hits before the crash (drawn from this range). The flush thread
# writes consume queues about once a second and the checkpoint mainly at close, so those
# crash at their first or second hit.
FAILPOINT_HITS = {
    "commit_log.before_write": (1, 80),
    "commit_log.after_write": (1, 80),
    "commit_log.before_fsync": (1, 80),
    "dispatch.after_cq_write": (1, 80),
    "consume_queue.before_write": (1, 2),
    "checkpoint.before_write": (1, 1),
    "index.after_entries": (1, 2),
    "index.after_slots": (1, 2),
}


@pytest.mark.parametrize("failpoint", sorted(FAILPOINT_HITS))
def test_store_crash_at_failpoint_keeps_every_acknowledged_message(
    tmp_path: Path, seed: int, writers: list[Writer], failpoint: str
) -> None:
    rng = random.Random(seed)
    directory = tmp_path / "store"
    acks: dict[tuple[str, int, int], Ack] = {}
    crashes = 0
    for _ in range(2):  # the second writer recovers from the first one's crash
        hits = rng.randint(*FAILPOINT_HITS[failpoint])
        extra = ["--failpoint", failpoint, "--failpoint-hits", str(hits), "--count", "300"]
        writer = Writer(directory, rng.randrange(1 << 30), tmp_path / "writer.log", extra)
        writers.append(writer)
        writer.proc.wait(timeout=120)
        writer.kill()
        assert writer.ready.is_set(), (tmp_path / "writer.log").read_text()
        assert writer.proc.returncode in (0, 137), (tmp_path / "writer.log").read_text()
        crashes += writer.proc.returncode == 137
        for ack in writer.acks():
            acks[(ack.topic, ack.queue_id, ack.queue_offset)] = ack
    assert crashes >= 1, f"failpoint {failpoint} was never hit"
    check_copy(directory, tmp_path / "check", acks)


# -- corruption of a closed store -----------------------------------------------------------------


def _request(serial: int) -> PutMessageRequest:
    """Message ``serial`` of a filled store: queue (serial mod 12), queue offset serial // 12."""
    return PutMessageRequest(
        topic=TOPICS[serial % 3],
        queue_id=serial % 4,
        body=bytes([serial % 256]) * (100 + serial % 700),
        properties={"TAGS": f"t{serial % 2}", "KEYS": f"key{serial}", "UNIQ_KEY": f"UNIQ{serial:012d}"},
    )


def _fill(directory: Path, count: int) -> list[tuple[int, int]]:
    """Put ``count`` messages under SYNC_FLUSH and close; returns (commit-log offset, size) of each."""
    store = open_store(directory)
    placed = []
    try:
        for serial in range(count):
            result = store.put_message(_request(serial))
            assert result.status is PutStatus.PUT_OK
            assert result.flush_future is not None and result.flush_future.result(timeout=10)
            placed.append((result.commit_log_offsets[0], result.wrote_bytes))
    finally:
        store.close()
    assert_verified(directory)
    return placed


def _segment_path(directory: Path, commit_log_offset: int) -> tuple[Path, int]:
    start = commit_log_offset - commit_log_offset % SEGMENT_BYTES
    return directory / "commitlog" / f"{start:020d}", commit_log_offset - start


def _patch(path: Path, file_position: int, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.seek(file_position)
        handle.write(data)


def _assert_last_record_gone(directory: Path, count: int, placed: list[tuple[int, int]]) -> None:
    """The last message is not served, the ones before it are, and the next put reuses its place."""
    last = count - 1
    topic, queue_id, last_queue_offset = TOPICS[last % 3], last % 4, last // 12
    store = open_store(directory)
    try:
        assert store.max_commit_log_offset == placed[-1][0]
        assert store.get_max_queue_offset(topic, queue_id) == last_queue_offset
        result = store.get_messages(topic, queue_id, last_queue_offset, 1)
        assert result.status is not GetStatus.FOUND and result.message_count == 0
        assert store.read_message(placed[-1][0]) is None
        before = decode_stored_messages(store.get_messages(topic, queue_id, 0, 1000).body())
        assert [message.body for message in before] == [
            _request(last % 12 + 12 * queue_offset).body for queue_offset in range(last_queue_offset)
        ]
        again = store.put_message(PutMessageRequest(topic=topic, queue_id=queue_id, body=b"again"))
        assert again.status is PutStatus.PUT_OK
        assert (again.commit_log_offsets[0], again.queue_offset) == (placed[-1][0], last_queue_offset)
    finally:
        store.close()
    assert_verified(directory)


@pytest.mark.parametrize(
    "crashed",
    [
        True,
        False,
    ],
    ids=["abort-marker", "clean-shutdown"],
)
def test_store_crash_flipped_byte_in_last_record_is_truncated(tmp_path: Path, crashed: bool) -> None:
    count = 40
    placed = _fill(tmp_path, count)
    path, file_position = _segment_path(tmp_path, placed[-1][0])
    _patch(path, file_position + 100, b"\xee")  # inside the body: only the CRC can tell
    if crashed:
        (tmp_path / "abort").touch()
    _assert_last_record_gone(tmp_path, count, placed)


@pytest.mark.parametrize(
    "tear",
    [
        "truncated-file",
        "zeroed-half",
        "garbage-after-end",
    ],
)
def test_store_crash_torn_tail_is_cut(tmp_path: Path, tear: str) -> None:
    count = 40
    placed = _fill(tmp_path, count)
    last_offset, last_size = placed[-1]
    path, file_position = _segment_path(tmp_path, last_offset)
    if tear == "truncated-file":
        with open(path, "r+b") as handle:
            handle.truncate(file_position + last_size // 2)
    elif tear == "zeroed-half":
        _patch(path, file_position + last_size // 2, bytes(last_size - last_size // 2))
    else:
        _patch(path, file_position + last_size, random.Random(7).randbytes(300))
    (tmp_path / "abort").touch()
    if tear != "garbage-after-end":
        _assert_last_record_gone(tmp_path, count, placed)
        return
    store = open_store(tmp_path)
    try:
        assert store.max_commit_log_offset == last_offset + last_size
        assert store.read_message(last_offset) is not None
    finally:
        store.close()
    assert_verified(tmp_path)


def test_store_crash_deleted_consume_queue_dir_is_rebuilt_identically(tmp_path: Path) -> None:
    _fill(tmp_path, 300)
    store = open_store(tmp_path)
    try:
        for serial in range(700):  # about 83 entries per queue: two files of 50 each
            result = store.put_message(
                PutMessageRequest(topic=TOPICS[serial % 3], queue_id=serial % 4, body=b"x" * 50)
            )
            assert result.status is PutStatus.PUT_OK
    finally:
        store.close()
    before = {
        path.relative_to(tmp_path): path.read_bytes()
        for path in (tmp_path / "consumequeue").rglob("*")
        if path.is_file()
    }
    assert len(before) >= 12 * 2
    shutil.rmtree(tmp_path / "consumequeue")
    store = open_store(tmp_path)
    try:
        assert sum(store.get_max_queue_offset(topic, queue_id) for topic, queue_id in store.queues()) == 1000
    finally:
        store.close()
    after = {
        path.relative_to(tmp_path): path.read_bytes()
        for path in (tmp_path / "consumequeue").rglob("*")
        if path.is_file()
    }
    assert sorted(after) == sorted(before)
    for relative_path, data in before.items():
        assert after[relative_path] == data, f"{relative_path} differs after the rebuild"
    assert_verified(tmp_path)
