"""Tests of one IndexFile: its byte layout, chains, time filtering, truncation and consistency checks.

Method: golden fixtures pin the header and entry encodings; tiny files (64 slots, 16 entries) on
tmp_path exercise the mapped layout byte for byte, bucket collisions, the one-second time slack and
the in-place truncation, which must leave the same slots and entries as never having put the suffix.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.errors import CorruptRecordError
from orbitmq.store.index_file import (
    ENTRY_SIZE_BYTES,
    HEADER_SIZE_BYTES,
    IndexEntry,
    IndexFile,
    IndexHeader,
    decode_entry,
    decode_header,
    encode_entry,
    encode_header,
    index_file_size_bytes,
    index_key_hash,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SLOTS = 64
ENTRIES = 16
BEGIN_MS = 1_700_000_000_000


def _fixture(name: str) -> bytes:
    return bytes.fromhex((FIXTURES / name).read_text())


def _find(index_file: IndexFile, key_hash: int, begin_ms: int = 0, end_ms: int = 2**62) -> list[int]:
    found: list[int] = []
    index_file.select_commit_log_offsets(key_hash, 100, begin_ms, end_ms, found, set())
    return found


@pytest.fixture
def index_file(tmp_path: Path) -> Iterator[IndexFile]:
    created = IndexFile.create(tmp_path / "20231114221320000", SLOTS, ENTRIES)
    yield created
    created.close()


def test_index_header_encoding_matches_golden_fixture() -> None:
    header = IndexHeader(1_700_000_000_000, 1_700_000_065_432, 4096, 0x123456789A, 3, 5)
    assert encode_header(header) == _fixture("index_header.hex")
    assert decode_header(_fixture("index_header.hex")) == header


def test_index_entry_encoding_matches_golden_fixture() -> None:
    entry = IndexEntry(index_key_hash("TopicTest", "order-42"), 4_294_967_312, 65, 2)
    assert encode_entry(entry) == _fixture("index_entry.hex")
    assert decode_entry(_fixture("index_entry.hex")) == entry


def test_index_decode_rejects_wrong_lengths() -> None:
    with pytest.raises(CorruptRecordError, match="39 bytes"):
        decode_header(bytes(39))
    with pytest.raises(CorruptRecordError, match="21 bytes"):
        decode_entry(bytes(21))


def test_index_key_hash_is_abs_java_hash_code() -> None:
    # Java: "TopicTest#order-42".hashCode() == -870421153.
    assert index_key_hash("TopicTest", "order-42") == 870_421_153
    # "T#k78853_oi".hashCode() == Integer.MIN_VALUE, whose Math.abs stays negative: RocketMQ uses 0.
    assert index_key_hash("T", "k78853_oi") == 0


@settings(max_examples=100, deadline=None)
@given(topic=st.text(min_size=1, max_size=20), key=st.text(max_size=40))
def test_index_key_hash_matches_reference_loop(topic: str, key: str) -> None:
    # The topic prefix's hash is cached and extended by the key's; the result must equal
    # abs() of Java's loop over the whole "<topic>#<key>".
    units = f"{topic}#{key}".encode("utf-16-be")
    value = 0
    for index in range(0, len(units), 2):
        value = (value * 31 + int.from_bytes(units[index : index + 2], "big")) & 0xFFFFFFFF
    signed = value - (1 << 32) if value >= 1 << 31 else value
    expected = 0 if signed == -(1 << 31) else abs(signed)
    assert index_key_hash(topic, key) == expected
    assert index_key_hash(topic, key) == expected  # again, from the cached prefix


def test_index_file_create_default_size_is_sparse(tmp_path: Path) -> None:
    path = tmp_path / "20231114221320000"
    created = IndexFile.create(path, 5_000_000, 20_000_000)
    try:
        assert created.put_key(index_key_hash("t", "k"), 0, BEGIN_MS)
        stat = os.stat(path)
        assert stat.st_size == 420_000_040
        assert stat.st_blocks * 512 < 1_000_000
    finally:
        created.close()


def test_index_file_put_writes_rocketmq_layout(index_file: IndexFile) -> None:
    key_hash = index_key_hash("TopicTest", "order-42")
    assert index_file.put_key(key_hash, 4096, BEGIN_MS)
    assert index_file.put_key(key_hash, 8192, BEGIN_MS + 65_400)
    index_file.close()
    raw = index_file.path.read_bytes()
    assert len(raw) == index_file_size_bytes(SLOTS, ENTRIES)
    assert raw[:HEADER_SIZE_BYTES] == encode_header(
        IndexHeader(BEGIN_MS, BEGIN_MS + 65_400, 4096, 8192, 1, 3)
    )
    slot_position = HEADER_SIZE_BYTES + (key_hash % SLOTS) * 4
    assert raw[slot_position : slot_position + 4] == (2).to_bytes(4, "big")
    entries_base = HEADER_SIZE_BYTES + SLOTS * 4
    second = raw[entries_base + 2 * ENTRY_SIZE_BYTES : entries_base + 3 * ENTRY_SIZE_BYTES]
    assert second == encode_entry(IndexEntry(key_hash, 8192, 65, 1))
    assert raw[entries_base : entries_base + ENTRY_SIZE_BYTES] == bytes(ENTRY_SIZE_BYTES)


def test_index_file_bucket_collision_keeps_keys_apart(index_file: IndexFile) -> None:
    # Two hashes in the same bucket share one chain; each query returns only its own hash.
    first_hash, second_hash = 5, 5 + SLOTS
    index_file.put_key(first_hash, 100, BEGIN_MS)
    index_file.put_key(second_hash, 200, BEGIN_MS)
    index_file.put_key(first_hash, 300, BEGIN_MS)
    assert index_file.slot(first_hash) == 3
    assert [index_file.entry(n).prev_entry_number for n in (1, 2, 3)] == [0, 1, 2]
    assert index_file.hash_slot_count == 1
    assert _find(index_file, first_hash) == [300, 100]
    assert _find(index_file, second_hash) == [200]
    assert _find(index_file, 6) == []


def test_index_file_equal_hash_returns_all_candidates(index_file: IndexFile) -> None:
    index_file.put_key(42, 100, BEGIN_MS)
    index_file.put_key(42, 200, BEGIN_MS)
    assert _find(index_file, 42) == [200, 100]


def test_index_file_full_refuses_put(index_file: IndexFile) -> None:
    for number in range(ENTRIES - 1):
        assert index_file.put_key(number, number, BEGIN_MS)
    assert index_file.is_full
    assert not index_file.put_key(1, 999, BEGIN_MS)
    assert index_file.entry_count == ENTRIES - 1


def test_index_file_time_range_filters_entries(index_file: IndexFile) -> None:
    for commit_log_offset, store_ms in ((100, BEGIN_MS), (200, BEGIN_MS + 5_000), (300, BEGIN_MS + 10_000)):
        index_file.put_key(7, commit_log_offset, store_ms)
    assert _find(index_file, 7, BEGIN_MS + 4_000, BEGIN_MS + 6_000) == [200]
    assert _find(index_file, 7, BEGIN_MS + 5_000, BEGIN_MS + 5_000) == [200]
    assert _find(index_file, 7, BEGIN_MS + 10_001, BEGIN_MS + 20_000) == [300]
    assert _find(index_file, 7, BEGIN_MS + 11_000, BEGIN_MS + 20_000) == []
    assert _find(index_file, 7, BEGIN_MS - 5_000, BEGIN_MS - 1) == []
    assert index_file.time_matches(BEGIN_MS + 10_000, BEGIN_MS + 20_000)
    assert not index_file.time_matches(BEGIN_MS + 10_001, BEGIN_MS + 20_000)


def test_index_file_time_range_never_misses_sub_second_store_time(index_file: IndexFile) -> None:
    # Stored as 1 whole second after the file's begin, although the real time is 1.999 s after it.
    index_file.put_key(7, 100, BEGIN_MS)
    index_file.put_key(7, 200, BEGIN_MS + 1_999)
    assert index_file.entry(2).time_delta_s == 1
    assert _find(index_file, 7, BEGIN_MS + 1_999, BEGIN_MS + 1_999) == [200]
    assert _find(index_file, 7, BEGIN_MS + 1_500, BEGIN_MS + 1_600) == [200]


def test_index_file_clamps_store_time_before_begin(index_file: IndexFile) -> None:
    index_file.put_key(7, 100, BEGIN_MS)
    index_file.put_key(8, 200, BEGIN_MS - 5_000)
    assert index_file.entry(2).time_delta_s == 0


def test_index_file_truncate_after_equals_never_putting_the_suffix(tmp_path: Path) -> None:
    puts = [(n % 5 + (n % 3) * SLOTS, 100 * (n // 2), BEGIN_MS + 1_000 * n) for n in range(12)]
    truncated = IndexFile.create(tmp_path / "20231114221320000", SLOTS, ENTRIES)
    reference = IndexFile.create(tmp_path / "20231114221320001", SLOTS, ENTRIES)
    try:
        for key_hash, commit_log_offset, store_ms in puts:
            truncated.put_key(key_hash, commit_log_offset, store_ms)
        for key_hash, commit_log_offset, store_ms in puts:
            if commit_log_offset < 300:
                reference.put_key(key_hash, commit_log_offset, store_ms)
        assert truncated.truncate_after(300) == 6
        assert truncated.header == IndexHeader(
            reference.begin_timestamp_ms,
            reference.end_timestamp_ms + 999,
            reference.begin_commit_log_offset,
            reference.end_commit_log_offset,
            reference.hash_slot_count,
            reference.index_count,
        )
        truncated.close()
        reference.close()
        truncated_bytes = truncated.path.read_bytes()
        reference_bytes = reference.path.read_bytes()
        assert truncated_bytes[HEADER_SIZE_BYTES:] == reference_bytes[HEADER_SIZE_BYTES:]
    finally:
        truncated.close()
        reference.close()


def test_index_file_truncate_after_everything_empties_the_file(index_file: IndexFile) -> None:
    index_file.put_key(3, 100, BEGIN_MS)
    index_file.put_key(3 + SLOTS, 200, BEGIN_MS)
    assert index_file.truncate_after(0) == 2
    assert index_file.header == IndexHeader()
    assert index_file.slot(3) == 0
    assert index_file.truncate_after(0) == 0
    assert index_file.put_key(3, 50, BEGIN_MS + 7)
    assert _find(index_file, 3) == [50]


def test_index_file_reopen_reads_header_and_entries(index_file: IndexFile) -> None:
    index_file.put_key(9, 100, BEGIN_MS)
    index_file.put_key(9, 200, BEGIN_MS + 2_000)
    index_file.close()
    reopened = IndexFile.open(index_file.path, SLOTS, ENTRIES)
    try:
        assert reopened.header == IndexHeader(BEGIN_MS, BEGIN_MS + 2_000, 100, 200, 1, 3)
        assert _find(reopened, 9) == [200, 100]
        assert reopened.find_problem(check_slots=True) is None
    finally:
        reopened.close()


def test_index_file_open_rejects_wrong_size(tmp_path: Path) -> None:
    path = tmp_path / "20231114221320000"
    path.write_bytes(bytes(100))
    with pytest.raises(CorruptRecordError, match="20231114221320000 is 100 bytes"):
        IndexFile.open(path, SLOTS, ENTRIES)


def test_index_file_find_problem_reports_bad_header(index_file: IndexFile) -> None:
    index_file.put_key(9, 100, BEGIN_MS)
    index_file.index_count = ENTRIES + 5
    assert "index_count 21" in (index_file.find_problem(check_slots=False) or "")
    index_file.index_count = 2
    index_file.end_commit_log_offset = 150
    assert "header says 150" in (index_file.find_problem(check_slots=False) or "")


def test_index_file_find_problem_reports_slot_beyond_count(index_file: IndexFile) -> None:
    index_file.put_key(9, 100, BEGIN_MS)
    index_file.put_key(10, 200, BEGIN_MS)
    # A header older than the slot table: it counts one entry, the slots already link two.
    index_file.index_count = 2
    index_file.hash_slot_count = 1
    index_file.end_commit_log_offset = 100
    assert index_file.find_problem(check_slots=False) is None
    assert "slot table" in (index_file.find_problem(check_slots=True) or "")


def test_index_file_repair_tail_relinks_unwritten_slot(index_file: IndexFile) -> None:
    index_file.put_key(9, 100, BEGIN_MS)
    index_file.put_key(9, 200, BEGIN_MS)
    # A stop between the header write and the slot write leaves the slot at the predecessor.
    index_file._mapped[HEADER_SIZE_BYTES + 9 * 4 : HEADER_SIZE_BYTES + 10 * 4] = (1).to_bytes(4, "big")
    assert _find(index_file, 9) == [100]
    assert index_file.find_problem(check_slots=True) is None
    assert index_file.repair_tail()
    assert _find(index_file, 9) == [200, 100]
    assert not index_file.repair_tail()


def test_index_file_select_stops_on_looping_chain(index_file: IndexFile) -> None:
    index_file.put_key(9, 100, BEGIN_MS)
    index_file.put_key(9, 200, BEGIN_MS)
    entry_position = HEADER_SIZE_BYTES + SLOTS * 4 + 1 * ENTRY_SIZE_BYTES
    # Entry 1 pointing at entry 2 would loop forever if chains were followed blindly.
    index_file._mapped[entry_position + 16 : entry_position + 20] = (2).to_bytes(4, "big")
    assert _find(index_file, 9) == [200, 100]


@settings(max_examples=60, deadline=None)
@given(
    puts=st.lists(st.tuples(st.integers(0, 4 * SLOTS), st.integers(0, 3)), min_size=1, max_size=ENTRIES + 4),
    split=st.integers(0, ENTRIES + 4),
)
def test_index_file_runs_write_the_same_bytes_as_single_puts(
    tmp_path_factory: pytest.TempPathFactory, puts: list[tuple[int, int]], split: int
) -> None:
    """Keys written as two runs (colliding buckets, a full file) equal the same keys put one by one."""
    import numpy as np

    directory = tmp_path_factory.mktemp("runs")
    hashes = np.array([key_hash for key_hash, _ in puts], dtype=np.int64)
    offsets = np.arange(len(puts), dtype=np.int64) * 100
    times_ms = BEGIN_MS + np.cumsum([seconds * 1_000 for _, seconds in puts]).astype(np.int64)
    in_runs = IndexFile.create(directory / "20231114221320000", SLOTS, ENTRIES)
    one_by_one = IndexFile.create(directory / "20231114221320001", SLOTS, ENTRIES)
    try:
        first_stop = in_runs.put_hashes(hashes[:split], offsets[:split], times_ms[:split], 0)
        stop = in_runs.put_hashes(hashes, offsets, times_ms, first_stop)
        single_stop = 0
        for key_hash, commit_log_offset, store_ms in zip(hashes, offsets, times_ms, strict=True):
            if not one_by_one.put_key(int(key_hash), int(commit_log_offset), int(store_ms)):
                break
            single_stop += 1
        assert stop == single_stop == min(len(puts), ENTRIES - 1)
        assert in_runs.header == one_by_one.header
        in_runs.close()
        one_by_one.close()
        assert in_runs.path.read_bytes() == one_by_one.path.read_bytes()
    finally:
        in_runs.close()
        one_by_one.close()


def test_index_file_repair_slots_restores_buckets_after_a_torn_run(index_file: IndexFile) -> None:
    """Slots written for a run whose header never was: each is walked back to its bucket's old head."""
    import numpy as np

    index_file.put_key(7, 100, BEGIN_MS)
    index_file.put_key(7 + SLOTS, 200, BEGIN_MS)
    before = [index_file.slot(key_hash) for key_hash in range(SLOTS)]
    # A run the header does not count yet: entries and slots written, header rolled back.
    header = index_file.header
    index_file.put_hashes(
        np.array([7, 9, 7 + 2 * SLOTS, 9], dtype=np.int64),
        np.array([300, 400, 500, 600], dtype=np.int64),
        np.full(4, BEGIN_MS, dtype=np.int64),
        0,
    )
    assert index_file.slot(7) == 5 and index_file.slot(9) == 6
    for field in ("end_timestamp_ms", "end_commit_log_offset", "hash_slot_count", "index_count"):
        setattr(index_file, field, getattr(header, field))
    assert index_file.repair_slots() == 2
    assert [index_file.slot(key_hash) for key_hash in range(SLOTS)] == before
    assert index_file.find_problem(check_slots=True) is None
    assert _find(index_file, 7) == [100]
