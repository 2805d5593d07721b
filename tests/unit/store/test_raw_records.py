"""A slave's append path: whole, checked records from replicated bytes (raw_records, append_commit_log).

Method: a master store writes records across several 64 KiB segments (so its log holds
end-of-file blanks); its raw log bytes are fed to a slave store in every split a master's
frames may make: all at once, one byte at a time, and in random cuts, always handing the
unappended tail back as the replication slave does. The slave must end byte-identical,
with every report a record boundary. Damaged bytes are appended up to the damage and no
further; a crash during the copy of an append leaves a log that recovery cuts before it.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from orbitmq.store.message_store import AppendStatus, MessageStore, PutMessageRequest, PutStatus
from orbitmq.store.raw_records import split_whole_records
from tests.unit.store.conftest import SEGMENT_BYTES, OpenStore


def _fill(master: MessageStore, count: int = 60) -> bytes:
    rng = random.Random(7)
    for index in range(count):
        body = rng.randbytes(rng.randrange(100, 5000))
        request = PutMessageRequest("TopicR", index % 3, body, properties={"KEYS": f"k{index}"})
        assert master.put_message(request).status is PutStatus.PUT_OK
    chunks = []
    position = 0
    while position < master.max_commit_log_offset:
        chunk = master.read_commit_log(position, 1 << 20)
        chunks.append(chunk)
        position += len(chunk)
    return b"".join(chunks)


def _replicate(slave: MessageStore, log: bytes, cuts: list[int]) -> list[int]:
    """Feed ``log`` in pieces ending at ``cuts``; return every end the slave reached."""
    held = b""
    sent = 0
    ends = []
    for cut in [*cuts, len(log)]:
        data = held + log[sent:cut]
        result = slave.append_commit_log(cut - len(data), data)
        assert result.status is AppendStatus.APPENDED, result.remark
        held = data[result.appended_bytes :]
        sent = cut
        ends.append(slave.max_commit_log_offset)
    assert held == b""
    return ends


def test_replicated_append_whole_bytewise_and_random_cuts_end_identical(
    open_store: OpenStore, tmp_path: Path
) -> None:
    master = open_store()
    log = _fill(master)
    assert len(log) > 2 * SEGMENT_BYTES  # blanks at two segment ends at least
    records = split_whole_records(log, 0, SEGMENT_BYTES).records
    ends = {offset + size for offset, size, _ in records}  # a record's end or a blank's start
    boundaries = ends | {SEGMENT_BYTES * n for n in range(1, len(log) // SEGMENT_BYTES + 1)} | {0}
    rng = random.Random(11)
    splits = {
        "whole": [],
        "bytewise": list(range(1, len(log))),
        "random": sorted(rng.sample(range(1, len(log)), 40)),
    }
    for name, cuts in splits.items():
        slave = open_store(root=tmp_path / name)
        ends = _replicate(slave, log, cuts)
        assert set(ends) <= boundaries, name  # every report is a record or segment boundary
        assert slave.read_commit_log(0, 1 << 20) == master.read_commit_log(0, 1 << 20), name
        assert slave.max_commit_log_offset == master.max_commit_log_offset
        assert slave.get_messages("TopicR", 1, 0, 64).body() == master.get_messages("TopicR", 1, 0, 64).body()


def test_replicated_append_stops_at_a_damaged_record(open_store: OpenStore, tmp_path: Path) -> None:
    master = open_store()
    log = bytearray(_fill(master, 10))
    records = split_whole_records(bytes(log), 0, SEGMENT_BYTES).records
    fifth_offset, fifth_size, _ = records[4]
    log[fifth_offset + fifth_size - 200] ^= 0xFF  # inside the body: its CRC fails
    slave = open_store(root=tmp_path / "slave")
    result = slave.append_commit_log(0, bytes(log))
    assert result.status is AppendStatus.CORRUPT and "fails its checks" in result.remark
    assert result.appended_bytes == fifth_offset == slave.max_commit_log_offset
    assert (
        slave.get_max_queue_offset("TopicR", 0)
        + slave.get_max_queue_offset("TopicR", 1)
        + (slave.get_max_queue_offset("TopicR", 2))
        == 4
    )


def test_replicated_append_refuses_bytes_that_are_no_record(open_store: OpenStore) -> None:
    slave = open_store()
    garbage = os.urandom(300)
    result = slave.append_commit_log(0, b"\x00\x00\x01\x00\x12\x34\x56\x78" + garbage)
    assert result.status is AppendStatus.CORRUPT and "magic code 0x12345678" in result.remark
    assert slave.max_commit_log_offset == 0
    assert slave.append_commit_log(100, b"x" * 50).status is AppendStatus.NOT_AT_END  # not segment-aligned
    wrong_blank = (16).to_bytes(4, "big") + (0xCBD43194).to_bytes(4, "big") + bytes(8)
    blank = slave.append_commit_log(SEGMENT_BYTES, wrong_blank)
    assert blank.status is AppendStatus.CORRUPT and "same segment size" in blank.remark


def test_replicated_append_starts_an_empty_log_at_the_masters_oldest_segment(
    open_store: OpenStore, tmp_path: Path
) -> None:
    master = open_store()
    log = _fill(master)
    slave = open_store(root=tmp_path / "slave", verify=False)  # its log starts past its queues' start
    tail = log[SEGMENT_BYTES:]
    result = slave.append_commit_log(SEGMENT_BYTES, tail)
    assert result.status is AppendStatus.APPENDED and result.appended_bytes == len(tail)
    assert slave.min_commit_log_offset == SEGMENT_BYTES
    assert slave.read_commit_log(SEGMENT_BYTES, 1 << 20) == master.read_commit_log(SEGMENT_BYTES, 1 << 20)


_CRASHING_SLAVE = """
import sys
from pathlib import Path
from orbitmq.store._fs import crash_process, failpoints
from orbitmq.store.message_store import MessageStore
from tests.unit.store.conftest import tiny_config
log = Path(sys.argv[2]).read_bytes()
store = MessageStore(tiny_config(Path(sys.argv[1])))
store.open()
store.append_commit_log(0, log[: int(sys.argv[3])])
failpoints.arm("commit_log.before_raw_head", crash_process)
store.append_commit_log(int(sys.argv[3]), log[int(sys.argv[3]) :])
"""


def test_replicated_append_killed_mid_copy_recovers_to_the_previous_append(
    open_store: OpenStore, tmp_path: Path
) -> None:
    master = open_store()
    log = _fill(master, 20)
    records = split_whole_records(log, 0, SEGMENT_BYTES).records
    first_end = records[6][0]
    (tmp_path / "log").write_bytes(log)
    root = tmp_path / "slave"
    done = subprocess.run(
        [sys.executable, "-c", _CRASHING_SLAVE, str(root), str(tmp_path / "log"), str(first_end)],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
    )
    assert done.returncode == 137, done.stderr.decode()[-2000:]
    # Every byte of the second append but its first TOTALSIZE reached the file: recovery must
    # cut at that record, not keep any of it.
    slave = open_store(root=root)
    assert slave.max_commit_log_offset == first_end
    assert slave.read_commit_log(0, 1 << 20) == log[:first_end]
    result = slave.append_commit_log(first_end, log[first_end:])
    assert result.appended_bytes == len(log) - first_end
