"""The offline verifier finds every kind of disagreement between CommitLog, ConsumeQueues and index.

Method: a small hand-built store (records encoded with the stored-message codec, consume-queue
entries and one index file packed with struct) is first shown to verify clean, then damaged one
way per test; the report must name the damage. Stores written by the real MessageStore must
verify clean, and the command line must exit 0 / 1 / 2 (3 for a store left as a kill leaves it). A smoke run of the store benchmark's
quick mode lives here too (marked slow).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orbitmq.model.message import MessageExt, SysFlag
from orbitmq.protocol.message_codec import BLANK_MAGIC_CODE, PHYSICALOFFSET_POSITION, encode_stored_message
from orbitmq.protocol.tags import java_string_hash, tags_code
from orbitmq.store.checkpoint import Checkpoint, write_checkpoint
from orbitmq.store.verify import main, verify_store

SEGMENT_BYTES = 4096
ENTRIES_PER_FILE = 8
INDEX_SLOTS = 64
INDEX_ENTRIES = 256
STORE_TIMESTAMP_MS = 1_700_000_000_000


@dataclass
class BuiltStore:
    """Where each hand-built record landed."""

    root: Path
    offsets: list[int] = field(default_factory=list)  # commit-log offset of each record, in put order
    sizes: list[int] = field(default_factory=list)
    queue_of: list[tuple[str, int, int]] = field(default_factory=list)  # topic, queue id, queue offset


def _message(index: int, topic: str, queue_id: int, sys_flag: int = 0) -> MessageExt:
    body = bytes([index % 251]) * (50 + 37 * index % 400)
    properties = {"TAGS": f"tag{index % 3}", "KEYS": f"key{index} other{index}", "UNIQ_KEY": f"U{index:08d}"}
    return MessageExt(
        topic=topic,
        body=body,
        properties=properties,
        queue_id=queue_id,
        sys_flag=sys_flag,
        store_timestamp=STORE_TIMESTAMP_MS + index * 10,
        born_timestamp=STORE_TIMESTAMP_MS,
    )


def build_store(root: Path, count: int = 30, sys_flags: dict[int, int] | None = None) -> BuiltStore:
    """Write ``count`` records over two topics x two queues, their consume queues and one index file."""
    built = BuiltStore(root)
    segments: list[bytearray] = [bytearray(SEGMENT_BYTES)]
    position = 0
    queues: dict[tuple[str, int], bytearray] = {}
    index_keys: list[tuple[int, int, int]] = []  # hash, commit-log offset, store time
    for index in range(count):
        topic, queue_id = ("TopicA", "TopicB")[index % 2], (index // 2) % 2
        message = _message(index, topic, queue_id, (sys_flags or {}).get(index, 0))
        entries = queues.setdefault((topic, queue_id), bytearray())
        message.queue_offset = (
            len(entries) // 20 if not message.sys_flag & SysFlag.TRANSACTION_PREPARED_TYPE else 0
        )
        size = len(encode_stored_message(message))
        if position + size + 8 > SEGMENT_BYTES:
            struct.pack_into(">ii", segments[-1], position, SEGMENT_BYTES - position, BLANK_MAGIC_CODE)
            segments.append(bytearray(SEGMENT_BYTES))
            position = 0
        message.commit_log_offset = (len(segments) - 1) * SEGMENT_BYTES + position
        record = encode_stored_message(message)
        segments[-1][position : position + size] = record
        position += size
        built.offsets.append(message.commit_log_offset)
        built.sizes.append(size)
        built.queue_of.append((topic, queue_id, message.queue_offset))
        if message.sys_flag & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_PREPARED_TYPE:
            continue
        entries += struct.pack(">qiq", message.commit_log_offset, size, tags_code(message.tags))
        for key in [message.properties["UNIQ_KEY"], *message.keys]:
            index_keys.append(
                (abs(java_string_hash(f"{topic}#{key}")), message.commit_log_offset, message.store_timestamp)
            )
    (root / "commitlog").mkdir(parents=True)
    for number, segment in enumerate(segments):
        (root / "commitlog" / f"{number * SEGMENT_BYTES:020d}").write_bytes(segment)
    file_bytes = ENTRIES_PER_FILE * 20
    for (topic, queue_id), entries in queues.items():
        queue_dir = root / "consumequeue" / topic / str(queue_id)
        queue_dir.mkdir(parents=True)
        for start in range(0, max(len(entries), 1), file_bytes):
            chunk = entries[start : start + file_bytes]
            (queue_dir / f"{start:020d}").write_bytes(bytes(chunk) + bytes(file_bytes - len(chunk)))
    _write_index(root / "index" / "20240101000000000", index_keys)
    return built


def _write_index(path: Path, keys: list[tuple[int, int, int]]) -> None:
    """One RocketMQ-layout index file holding ``keys`` (hash, commit-log offset, store time)."""
    data = bytearray(40 + INDEX_SLOTS * 4 + INDEX_ENTRIES * 20)
    begin_ms = keys[0][2]
    struct.pack_into(
        ">qqqqii", data, 0, begin_ms, keys[-1][2], keys[0][1], keys[-1][1], INDEX_SLOTS, len(keys) + 1
    )
    for number, (key_hash, commit_log_offset, store_ms) in enumerate(keys, start=1):
        slot_position = 40 + (key_hash % INDEX_SLOTS) * 4
        (previous,) = struct.unpack_from(">i", data, slot_position)
        entry_position = 40 + INDEX_SLOTS * 4 + number * 20
        struct.pack_into(
            ">iqii",
            data,
            entry_position,
            key_hash,
            commit_log_offset,
            (store_ms - begin_ms) // 1000,
            previous,
        )
        struct.pack_into(">i", data, slot_position, number)
    path.parent.mkdir(parents=True)
    path.write_bytes(bytes(data))


def _patch(path: Path, position: int, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.seek(position)
        handle.write(data)


def _segment_of(built: BuiltStore, record: int) -> tuple[Path, int]:
    commit_log_offset = built.offsets[record]
    start = commit_log_offset - commit_log_offset % SEGMENT_BYTES
    return built.root / "commitlog" / f"{start:020d}", commit_log_offset - start


def _problems(root: Path) -> str:
    report = verify_store(root)
    assert not report.ok, report.render()
    return "\n".join(report.problems)


def test_verify_hand_built_store_is_clean(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    report = verify_store(tmp_path)
    assert report.ok, report.render()
    assert report.records == 30
    assert report.segments >= 3, "the fixture must roll segments to exercise blank records"
    assert report.blank_records == report.segments - 1
    assert report.commit_log_segment_bytes == SEGMENT_BYTES
    assert report.consume_queue_entries_per_file == ENTRIES_PER_FILE
    assert report.consume_queues == 4
    assert report.consume_queue_entries == 30
    assert report.index_entries == 90
    assert report.index_entries_checked == 90
    assert report.commit_log_end_offset == built.offsets[-1] + built.sizes[-1]


def test_verify_reports_flipped_body_byte(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    path, file_offset = _segment_of(built, 29)
    _patch(path, file_offset + 100, b"\xff")
    assert f"record at commit-log offset {built.offsets[29]}: body CRC" in _problems(tmp_path)


def test_verify_reports_wrong_physical_offset_field(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    path, file_offset = _segment_of(built, 5)
    _patch(path, file_offset + PHYSICALOFFSET_POSITION, struct.pack(">q", 12345))
    problems = _problems(tmp_path)
    assert "PHYSICALOFFSET field says 12345" in problems
    # Records after the broken one are unknown, so their consume-queue entries are reported too.
    assert "no valid record in the commit log" in problems


def test_verify_reports_garbage_after_last_record(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    path, file_offset = _segment_of(built, 29)
    end = file_offset + built.sizes[29]
    _patch(path, end + 30, b"\x01\x02")
    assert (
        f"non-zero bytes after the last record, at commit-log offset {built.offsets[29] + built.sizes[29]}"
        in (_problems(tmp_path))
    )


def test_verify_reports_torn_last_record(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    path, file_offset = _segment_of(built, 29)
    _patch(path, file_offset + 20, bytes(built.sizes[29] - 20))
    problems = _problems(tmp_path)
    assert f"record at commit-log offset {built.offsets[29]}" in problems
    assert "TopicB' queue 0 queue offset 7" in problems


def test_verify_reports_blank_record_inside_segment(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    path, file_offset = _segment_of(built, 1)
    _patch(path, file_offset, struct.pack(">ii", 100, BLANK_MAGIC_CODE))
    assert f"blank record at commit-log offset {built.offsets[1]} of size 100 does not end its segment" in (
        _problems(tmp_path)
    )


def test_verify_reports_segment_without_blank_tail(tmp_path: Path) -> None:
    build_store(tmp_path)
    first = tmp_path / "commitlog" / f"{0:020d}"
    data = bytearray(first.read_bytes())
    blank_position = max(
        i for i in range(0, SEGMENT_BYTES - 8) if data[i + 4 : i + 8] == struct.pack(">i", BLANK_MAGIC_CODE)
    )
    data[blank_position:] = bytes(SEGMENT_BYTES - blank_position)
    first.write_bytes(bytes(data))
    assert "segment 0 ends at commit-log offset" in _problems(tmp_path)


def test_verify_reports_an_unclosed_segment_before_an_empty_one_in_a_closed_store(tmp_path: Path) -> None:
    """Only a kill leaves a roll-over half done: a store closed cleanly with one is damaged."""
    build_store(tmp_path)
    segments = sorted((tmp_path / "commitlog").iterdir())
    (tmp_path / "commitlog" / f"{len(segments) * SEGMENT_BYTES:020d}").write_bytes(bytes(SEGMENT_BYTES))
    assert f"segment {(len(segments) - 1) * SEGMENT_BYTES} ends at commit-log offset" in _problems(tmp_path)


def test_verify_reports_wrong_segment_size_and_gap(tmp_path: Path) -> None:
    build_store(tmp_path, count=60)
    segments = sorted((tmp_path / "commitlog").iterdir())
    segments[1].unlink()
    with open(segments[-1], "r+b") as handle:
        handle.truncate(SEGMENT_BYTES - 100)
    problems = _problems(tmp_path)
    assert f"gap or overlap between {segments[0].name} and {segments[2].name}" in problems
    assert f"file {segments[-1].name} is {SEGMENT_BYTES - 100} bytes, expected {SEGMENT_BYTES}" in problems


def test_verify_reports_missing_consume_queue_entry(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    topic, queue_id, queue_offset = built.queue_of[29]
    queue_file = tmp_path / "consumequeue" / topic / str(queue_id) / f"{0:020d}"
    _patch(queue_file, queue_offset * 20, bytes(20))
    assert f"entry for topic {topic!r} queue {queue_id} queue offset {queue_offset}" in _problems(tmp_path)


def test_verify_reports_consume_queue_entry_mismatch(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    topic, queue_id, _ = built.queue_of[0]
    queue_file = tmp_path / "consumequeue" / topic / str(queue_id) / f"{0:020d}"
    _patch(queue_file, 8, struct.pack(">i", built.sizes[0] + 1))  # size of queue offset 0
    _patch(queue_file, 20 + 12, struct.pack(">q", 99))  # tags code of queue offset 1
    problems = _problems(tmp_path)
    assert (
        f"'TopicA' queue 0 queue offset 0 (commit-log offset 0, size {built.sizes[0] + 1}): record size is"
        in problems
    )
    assert "queue offset 1" in problems and "tags code 99 != record's" in problems


def test_verify_reports_entry_beyond_commit_log_end(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    queue_file = tmp_path / "consumequeue" / "TopicA" / "1" / f"{0:020d}"
    count = sum(1 for topic, queue_id, _ in built.queue_of if (topic, queue_id) == ("TopicA", 1))
    assert count < ENTRIES_PER_FILE
    _patch(queue_file, count * 20, struct.pack(">qiq", 10 * SEGMENT_BYTES, 100, 0))
    assert (
        f"'TopicA' queue 1 queue offset {count} (commit-log offset {10 * SEGMENT_BYTES}, size 100): beyond"
        in (_problems(tmp_path))
    )


def test_verify_reports_deleted_consume_queue(tmp_path: Path) -> None:
    build_store(tmp_path)
    shutil.rmtree(tmp_path / "consumequeue" / "TopicB")
    assert "no consume queue for topic 'TopicB' queue 0 queue offset 0" in _problems(tmp_path)


def test_verify_accepts_undispatched_prepared_transaction(tmp_path: Path) -> None:
    build_store(tmp_path, sys_flags={3: SysFlag.TRANSACTION_PREPARED_TYPE})
    report = verify_store(tmp_path)
    assert report.ok, report.render()
    assert report.consume_queue_entries == 29


def test_verify_reports_index_entry_with_wrong_hash(tmp_path: Path) -> None:
    build_store(tmp_path)
    index_file = tmp_path / "index" / "20240101000000000"
    entry_position = 40 + INDEX_SLOTS * 4 + 5 * 20
    (key_hash,) = struct.unpack_from(">i", index_file.read_bytes(), entry_position)
    # Same slot, different hash: the chain stays valid but the key does not match.
    _patch(index_file, entry_position, struct.pack(">i", key_hash + INDEX_SLOTS))
    problems = _problems(tmp_path)
    assert (
        "index number 5 (commit-log offset" in problems
        and f"hash {key_hash + INDEX_SLOTS} matches no key" in problems
    )


def test_verify_reports_unindexed_key_and_broken_chain(tmp_path: Path) -> None:
    build_store(tmp_path)
    index_file = tmp_path / "index" / "20240101000000000"
    data = index_file.read_bytes()
    last = 90
    key_hash = struct.unpack_from(">i", data, 40 + INDEX_SLOTS * 4 + last * 20)[0]
    _patch(index_file, 40 + INDEX_SLOTS * 4 + last * 20 + 16, struct.pack(">i", last))  # links to itself
    problems = _problems(tmp_path)
    assert f"index number {last} links forward to {last}" in problems
    _patch(index_file, 40 + (key_hash % INDEX_SLOTS) * 4, struct.pack(">i", 0))
    _patch(index_file, 36, struct.pack(">i", last))  # forget the last entry
    problems = _problems(tmp_path)
    assert "is not indexed" in problems


def test_verify_problem_count_is_capped_but_counted(tmp_path: Path) -> None:
    build_store(tmp_path)
    shutil.rmtree(tmp_path / "consumequeue")
    report = verify_store(tmp_path, max_problems=3)
    assert report.problem_count == 30
    assert len(report.problems) == 3
    assert "30 problems (first 3 listed)" in report.summary()


def test_verify_main_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_store(tmp_path / "store")
    assert main([str(tmp_path)]) == 0
    assert "OK" in capsys.readouterr().out
    assert main([str(tmp_path / "store"), "--segment-bytes", str(SEGMENT_BYTES), "--index-sample", "3"]) == 0
    capsys.readouterr()
    shutil.rmtree(tmp_path / "store" / "consumequeue" / "TopicA")
    assert main([str(tmp_path / "store")]) == 1
    out = capsys.readouterr().out
    assert "15 problems" in out and "no consume queue for topic 'TopicA'" in out
    assert main([str(tmp_path / "missing")]) == 2
    assert main([str(tmp_path), "--segment-bytes", "0"]) == 2
    assert main(["--no-such-option"]) == 2


def test_verify_module_runs_as_a_command(tmp_path: Path) -> None:
    build_store(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "orbitmq.store.verify", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "30 records" in done.stdout


def test_verify_index_geometry_inferred_or_given(tmp_path: Path) -> None:
    build_store(tmp_path)
    index_file = tmp_path / "index" / "20240101000000000"
    with open(index_file, "ab") as handle:
        handle.write(bytes(20))  # one more entry: no longer RocketMQ's four entries per slot
    report = verify_store(tmp_path)
    assert report.ok and report.index_entries_checked == 0
    assert "geometry unknown" in report.notes[0]
    report = verify_store(tmp_path, index_hash_slot_num=INDEX_SLOTS, index_num=INDEX_ENTRIES + 1)
    assert report.ok, report.render()
    assert report.index_entries_checked == 90
    report = verify_store(tmp_path, index_hash_slot_num=INDEX_SLOTS, index_num=INDEX_ENTRIES)
    assert "bytes, expected" in "\n".join(report.problems)


def test_verify_accepts_queue_starting_after_zero_entries(tmp_path: Path) -> None:
    """A queue rebuilt after retention starts mid-file: the slots before its first entry stay zero."""
    built = build_store(tmp_path)
    for segment in sorted((tmp_path / "commitlog").iterdir())[:1]:
        segment.unlink()
    first_kept = SEGMENT_BYTES
    queue_file = tmp_path / "consumequeue" / "TopicA" / "0" / f"{0:020d}"
    data = bytearray(queue_file.read_bytes())
    expired = [
        q
        for (t, q_id, q), offset in zip(built.queue_of, built.offsets, strict=True)
        if (t, q_id) == ("TopicA", 0) and offset < first_kept
    ]
    data[: len(expired) * 20] = bytes(len(expired) * 20)
    queue_file.write_bytes(bytes(data))
    report = verify_store(tmp_path)
    assert report.ok, report.render()
    assert report.commit_log_min_offset == first_kept
    assert report.expired_consume_queue_entries > 0, "other queues still hold entries below the minimum"


@pytest.mark.slow
def test_verify_store_bench_quick_mode_prints_every_figure(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from orbitmq.bench.__main__ import main as bench_main

    assert bench_main(["store", "--quick", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for label in (
        "put_message: puts only",
        "disk baseline",
        "record loop 1024 B: the store's pack loop alone, + flush",
        "ceiling: 1 KiB record loop + flush / disk baseline",
        "get_messages x32",
        "64 writers",
        "64 in flight",
        "1st pass, new queues: puts",
        "1st pass: puts + flush (creates files)",
        "steady state, files exist: puts",
        "steady state pass + close",
        "with background write-out: puts",
        "queues, sustained, background write-out included",
        "after a restart: first puts (load queues)",
    ):
        assert label in out
    assert out.count("target >=") == 9
    assert list(tmp_path.iterdir()) == [], "the benchmark must delete its directory"


def _index_keys(built: BuiltStore, count: int) -> list[tuple[int, int, int]]:
    """The index keys build_store wrote for its first ``count`` records."""
    keys = []
    for index in range(count):
        topic, queue_id, _ = built.queue_of[index]
        message = _message(index, topic, queue_id)
        for key in [message.properties["UNIQ_KEY"], *message.keys]:
            keys.append(
                (abs(java_string_hash(f"{topic}#{key}")), built.offsets[index], message.store_timestamp)
            )
    return keys


def _as_if_killed(built: BuiltStore, kept: int) -> None:
    """What a SIGKILL leaves: consume-queue entries and index keys only for the first ``kept``
    records (the checkpoint says so), the abort marker, and a torn record after the last one."""
    root = built.root
    for index in range(kept, len(built.offsets)):
        topic, queue_id, queue_offset = built.queue_of[index]
        file_start = queue_offset // ENTRIES_PER_FILE * ENTRIES_PER_FILE * 20
        _patch(
            root / "consumequeue" / topic / str(queue_id) / f"{file_start:020d}",
            queue_offset % ENTRIES_PER_FILE * 20,
            bytes(20),
        )
    shutil.rmtree(root / "index")
    _write_index(root / "index" / "20240101000000000", _index_keys(built, kept))
    cut = built.offsets[kept]
    write_checkpoint(
        root / "checkpoint",
        Checkpoint(
            commit_log_flushed_offset=cut, consume_queue_dispatched_offset=cut, index_dispatched_offset=cut
        ),
    )
    path, position = _segment_of(built, len(built.offsets) - 1)
    _patch(path, position + built.sizes[-1], struct.pack(">ii", 500, 0x0DAA320A))  # a torn next record
    (root / "abort").touch()


def test_verify_store_after_kill_says_it_needs_recovery_and_checks_what_recovery_keeps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = build_store(tmp_path)
    _as_if_killed(built, kept=20)
    report = verify_store(tmp_path)
    assert report.ok, report.render()
    assert report.needs_recovery
    # The newest indexed record is indexed again: a kill may have cut its keys halfway.
    assert report.recovery_redispatch_from == built.offsets[19]
    assert report.left_to_recovery == {
        "consume-queue entries (written)": 10,
        "index keys (indexed)": 30,
        "torn commit-log tails (cut)": 1,
    }
    assert main([str(tmp_path)]) == 3
    out = capsys.readouterr().out
    assert "needs recovery: abort marker present" in out
    assert "to be re-dispatched by recovery: 30 index keys (indexed)" in out
    assert "is not indexed" not in out and "OK once recovered (exit status 3)" in out


def test_verify_store_after_kill_still_reports_damage_recovery_keeps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Below the re-dispatch point a missing entry is the store's problem, abort marker or not."""
    built = build_store(tmp_path)
    _as_if_killed(built, kept=20)
    topic, queue_id, queue_offset = built.queue_of[5]
    _patch(tmp_path / "consumequeue" / topic / str(queue_id) / f"{0:020d}", queue_offset * 20, bytes(20))
    assert main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"consumequeue: entry for topic {topic!r} queue {queue_id} queue offset {queue_offset}" in out


def test_verify_store_after_kill_without_checkpoint_leaves_the_whole_log_to_recovery(tmp_path: Path) -> None:
    """Without a checkpoint recovery re-dispatches the whole log: nothing missing is a problem."""
    built = build_store(tmp_path)
    _as_if_killed(built, kept=20)
    (tmp_path / "checkpoint").unlink()
    report = verify_store(tmp_path)
    assert report.ok and report.recovery_redispatch_from == 0, report.render()


def test_verify_reads_sparse_and_short_segments_as_they_are(tmp_path: Path) -> None:
    """The last segment holed after its records (as the store leaves it) verifies clean; cut short
    inside a record, it is reported, not read past its end."""
    built = build_store(tmp_path)
    path, file_offset = _segment_of(built, 29)
    end = file_offset + built.sizes[29]
    data = path.read_bytes()[:end]
    path.unlink()
    with open(path, "wb") as handle:
        handle.write(data)
        handle.truncate(SEGMENT_BYTES)  # the rest is a hole
    assert verify_store(tmp_path).ok
    with open(path, "r+b") as handle:
        handle.truncate(end - 10)
    problems = _problems(tmp_path)
    assert f"file {path.name} is {end - 10} bytes, expected {SEGMENT_BYTES}" in problems
    assert f"record at commit-log offset {built.offsets[29]}: total size" in problems
