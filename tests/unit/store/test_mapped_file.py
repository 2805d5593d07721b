"""MappedFile and MappedFileQueue: sparse segments, offsets, truncation, load checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbitmq.errors import StoreError
from orbitmq.store.mapped_file import MappedFile, MappedFileQueue

SIZE = 8192


def test_mapped_file_creates_sparse_file_of_full_size(tmp_path: Path) -> None:
    mapped = MappedFile(tmp_path / "00000000000000000000", 0, SIZE)
    try:
        assert (tmp_path / "00000000000000000000").stat().st_size == SIZE
        assert mapped.remaining_bytes == SIZE
        mapped.buffer[0:5] = b"hello"
        mapped.wrote_position = 5
        assert mapped.read(0, 100) == b"hello"
        assert mapped.flush() == 5
    finally:
        mapped.close()


def test_mapped_file_read_never_passes_wrote_position(tmp_path: Path) -> None:
    mapped = MappedFile(tmp_path / "00000000000000000000", 0, SIZE)
    try:
        mapped.buffer[0:10] = b"0123456789"
        mapped.wrote_position = 4
        assert mapped.read(2, 100) == b"23"
        assert mapped.read(4, 1) == b""
    finally:
        mapped.close()


def test_mapped_file_zero_from_discards_tail(tmp_path: Path) -> None:
    mapped = MappedFile(tmp_path / "00000000000000000000", 0, SIZE)
    try:
        mapped.buffer[0:10] = b"0123456789"
        mapped.wrote_position = 10
        mapped.zero_from(4)
        assert mapped.wrote_position == 4
        assert bytes(mapped.buffer[0:10]) == b"0123" + bytes(6)
        assert (tmp_path / "00000000000000000000").stat().st_size == SIZE
    finally:
        mapped.close()


def test_mapped_file_queue_finds_segment_by_offset(tmp_path: Path) -> None:
    queue = MappedFileQueue(tmp_path, SIZE)
    try:
        queue.create(0)
        queue.create(SIZE)
        assert queue.find(0) is queue.files[0]
        assert queue.find(SIZE - 1) is queue.files[0]
        assert queue.find(SIZE) is queue.files[1]
        assert queue.find(2 * SIZE) is None
        assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000000", "00000000000000008192"]
    finally:
        queue.close()


def test_mapped_file_queue_truncate_after_deletes_later_segments(tmp_path: Path) -> None:
    queue = MappedFileQueue(tmp_path, SIZE)
    try:
        for start in (0, SIZE, 2 * SIZE):
            queue.create(start).wrote_position = SIZE
        queue.truncate_after(SIZE + 100)
        assert [f.start_offset for f in queue.files] == [0, SIZE]
        assert queue.max_offset == SIZE + 100
        assert not (tmp_path / "00000000000000016384").exists()
    finally:
        queue.close()


def test_mapped_file_queue_load_rejects_wrong_size_before_the_last(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000000").write_bytes(bytes(100))
    (tmp_path / "00000000000000008192").write_bytes(bytes(SIZE))
    queue = MappedFileQueue(tmp_path, SIZE)
    with pytest.raises(StoreError, match="00000000000000000000"):
        queue.load()
    queue.close()


def test_mapped_file_queue_load_extends_a_short_last_segment(tmp_path: Path) -> None:
    """A crash while the newest segment was being created leaves it short (even empty)."""
    (tmp_path / "00000000000000000000").write_bytes(bytes(SIZE))
    (tmp_path / "00000000000000008192").write_bytes(b"")
    queue = MappedFileQueue(tmp_path, SIZE)
    try:
        queue.load()
        assert [f.start_offset for f in queue.files] == [0, SIZE]
        assert (tmp_path / "00000000000000008192").stat().st_size == SIZE
    finally:
        queue.close()


def test_mapped_file_queue_load_rejects_a_hole(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000000").write_bytes(bytes(SIZE))
    (tmp_path / "00000000000000016384").write_bytes(bytes(SIZE))
    queue = MappedFileQueue(tmp_path, SIZE)
    with pytest.raises(StoreError, match="does not follow"):
        queue.load()
    queue.close()
