"""ConsumeQueue: entry layout (golden), buffered tail vs files, reload, truncation, LRU bound."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from orbitmq.protocol.tags import tags_code
from orbitmq.store.consume_queue import ENTRY, ConsumeQueueTable, iterate_consume_queue

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ENTRIES = 10


def _table(root: Path, bounds: tuple[int, int] = (0, 10**12), max_open: int = 8) -> ConsumeQueueTable:
    table = ConsumeQueueTable(root / "consumequeue", ENTRIES, max_open, lambda: bounds)
    table.scan_disk()
    return table


def _fill(table: ConsumeQueueTable, topic: str, queue_id: int, count: int, size: int = 100) -> None:
    queue = table.get_or_create(topic, queue_id)
    for index in range(count):
        queue_offset = queue.max_queue_offset
        queue.put(queue_offset, queue_offset * size, size, index)
    table.dirty.add(queue)


def test_consume_queue_entry_matches_golden_fixture() -> None:
    golden = bytes.fromhex("".join((FIXTURES / "consume_queue_entry.hex").read_text().split()))
    assert ENTRY.pack(4096, 177, tags_code("TagA")) == golden
    assert ENTRY.size == 20


def test_consume_queue_reads_buffered_then_written_entries(tmp_path: Path) -> None:
    table = _table(tmp_path)
    _fill(table, "T", 0, 25)
    queue = table.get_or_create("T", 0)
    assert queue.entry(24) == (2400, 100, 24)
    assert table.write_pending(threading.Lock()) == 25
    assert queue.written_queue_offset == 25
    assert queue.entry(13) == (1300, 100, 13)
    # A read stops at a file end: offsets 8, 9 are the rest of the first file.
    assert [e[0] for e in ENTRY.iter_unpack(queue.read_entries(8, 5))] == [800, 900]
    files = sorted(p.name for p in (tmp_path / "consumequeue" / "T" / "0").iterdir())
    assert files == ["00000000000000000000", "00000000000000000200", "00000000000000000400"]
    table.close()


def test_consume_queue_reload_finds_min_and_max(tmp_path: Path) -> None:
    table = _table(tmp_path)
    _fill(table, "T", 3, 23)
    table.write_pending(threading.Lock())
    table.close()
    reloaded = _table(tmp_path, bounds=(500, 10**12))
    queue = reloaded.get("T", 3)
    assert queue is not None
    assert (queue.min_queue_offset, queue.max_queue_offset) == (5, 23)
    assert reloaded.get("T", 4) is None
    assert list(reloaded.names()) == [("T", 3)]
    reloaded.close()


def test_consume_queue_load_drops_entries_past_commit_log_end(tmp_path: Path) -> None:
    table = _table(tmp_path)
    _fill(table, "T", 0, 30)
    table.write_pending(threading.Lock())
    table.close()
    reloaded = _table(tmp_path, bounds=(0, 1250))  # records 0..11 end at or before 1200
    queue = reloaded.get("T", 0)
    assert queue is not None and queue.max_queue_offset == 12
    assert queue.entry(12) == (0, 0, 0)
    reloaded.close()
    assert [entry[0] for entry in iterate_consume_queue(tmp_path, "T", 0)] == list(range(12))


def test_consume_queue_truncate_inside_buffer_and_files(tmp_path: Path) -> None:
    table = _table(tmp_path)
    _fill(table, "T", 0, 15)
    table.write_pending(threading.Lock())
    _fill(table, "T", 0, 5)
    queue = table.get_or_create("T", 0)
    queue.truncate(18)
    assert queue.max_queue_offset == 18
    queue.truncate(7)
    assert (queue.max_queue_offset, queue.written_queue_offset) == (7, 7)
    assert queue.entry(7) == (0, 0, 0)
    queue.put(7, 99, 1, 0)
    assert queue.entry(7) == (99, 1, 0)
    table.close()


def test_consume_queue_holds_bounded_open_files(tmp_path: Path) -> None:
    table = _table(tmp_path, max_open=3)
    for queue_id in range(20):
        _fill(table, "T", queue_id, 3)
    table.write_pending(threading.Lock())
    assert table.files.open_count <= 3
    for queue_id in range(20):
        queue = table.get("T", queue_id)
        assert queue is not None and queue.entry(2) == (200, 100, 2)
    assert table.files.open_count <= 3
    table.close()


def test_consume_queue_delete_files_below_moves_min(tmp_path: Path) -> None:
    table = _table(tmp_path)
    _fill(table, "T", 0, 35)
    table.write_pending(threading.Lock())
    queue = table.get_or_create("T", 0)
    assert queue.delete_files_below(2150) == 2
    assert queue.min_queue_offset == 22
    assert queue.file_starts() == [20, 30]
    table.close()


def test_consume_queue_write_out_creates_directory_and_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(tmp_path)
    made: list[str] = []
    real_mkdir = os.mkdir

    def counting_mkdir(path: str, *args: Any, **kwargs: Any) -> None:
        made.append(str(path))
        real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", counting_mkdir)
    _fill(table, "T", 0, 4)
    table.write_pending(threading.Lock())
    queue_dir = tmp_path / "consumequeue" / "T" / "0"
    assert str(queue_dir) in made
    made.clear()
    for _ in range(2):  # the second round rolls to a new file in the same directory
        _fill(table, "T", 0, 4)
        table.write_pending(threading.Lock())
    assert made == []
    files = sorted(queue_dir.iterdir())
    assert [path.stat().st_size for path in files] == [ENTRIES * ENTRY.size] * 2
    assert [entry[0] for entry in iterate_consume_queue(tmp_path, "T", 0)] == list(range(12))
    table.close()


def test_consume_queue_write_out_extends_a_short_file_after_reload(tmp_path: Path) -> None:
    table = _table(tmp_path)
    _fill(table, "T", 0, 3)
    table.write_pending(threading.Lock())
    table.close()
    path = tmp_path / "consumequeue" / "T" / "0" / "00000000000000000000"
    os.truncate(path, 3 * ENTRY.size)  # a file whose extension was lost in a crash
    reloaded = _table(tmp_path)
    queue = reloaded.get("T", 0)
    assert queue is not None and queue.max_queue_offset == 3
    _fill(reloaded, "T", 0, 2)
    reloaded.write_pending(threading.Lock())
    assert path.stat().st_size == ENTRIES * ENTRY.size
    assert [entry[0] for entry in iterate_consume_queue(tmp_path, "T", 0)] == list(range(5))
    reloaded.close()


BIG_FILE_ENTRIES = 1000  # 20,000-byte files: several 4 KiB blocks, so loading meets holes


def _big_table(root: Path, bounds: tuple[int, int] = (0, 10**12)) -> ConsumeQueueTable:
    table = ConsumeQueueTable(root / "consumequeue", BIG_FILE_ENTRIES, 8, lambda: bounds)
    table.scan_disk()
    return table


def _queue_file(root: Path, queue_id: int, first_entry: int = 0) -> Path:
    return root / "consumequeue" / "T" / str(queue_id) / f"{first_entry * 20:020d}"


def _written_queue(root: Path, count: int) -> None:
    """Queue T/0 with ``count`` entries (entry i points at offset i * 100), written to its files."""
    table = _big_table(root)
    _fill(table, "T", 0, count)
    table.write_pending(threading.Lock())
    table.close()


def _loaded(root: Path, bounds: tuple[int, int] = (0, 10**12)) -> tuple[int, int, tuple[int, int, int]]:
    """(min, max queue offset, last entry) of T/0 as a fresh table loads it from its files."""
    table = _big_table(root, bounds)
    try:
        queue = table.get("T", 0)
        assert queue is not None
        return queue.min_queue_offset, queue.max_queue_offset, queue.entry(queue.max_queue_offset - 1)
    finally:
        table.close()


def _overwrite(path: Path, file_position: int, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.seek(file_position)
        handle.write(data)


@pytest.mark.parametrize("count", [1, 204, 205, 206, 256, 257, 410, 999, 1000, 1001, 2345])
def test_consume_queue_load_finds_the_end_at_every_block_boundary(tmp_path: Path, count: int) -> None:
    _written_queue(tmp_path, count)
    assert _loaded(tmp_path) == (0, count, ((count - 1) * 100, 100, count - 1))


def test_consume_queue_load_sees_through_zeros_written_past_the_end(tmp_path: Path) -> None:
    # A filesystem without holes, or a tail zeroed by writing: zeros are data, not a hole.
    _written_queue(tmp_path, 300)
    _overwrite(_queue_file(tmp_path, 0), 300 * 20, bytes(10_000))
    assert _loaded(tmp_path)[:2] == (0, 300)


def test_consume_queue_load_ignores_a_torn_last_entry(tmp_path: Path) -> None:
    _written_queue(tmp_path, 500)
    # The offset of an entry, never its size.
    _overwrite(_queue_file(tmp_path, 0), 500 * 20, ENTRY.pack(50_000, 0, 0)[:10])
    assert _loaded(tmp_path)[:2] == (0, 500)


def test_consume_queue_load_of_a_queue_starting_mid_file(tmp_path: Path) -> None:
    # A rebuilt queue whose older entries were gone: its first file starts with zeros.
    path = _queue_file(tmp_path, 0)
    path.parent.mkdir(parents=True)
    with open(path, "wb") as handle:
        handle.truncate(BIG_FILE_ENTRIES * 20)
    _overwrite(path, 600 * 20, b"".join(ENTRY.pack(index * 100, 100, index) for index in range(600, 700)))
    assert _loaded(tmp_path, bounds=(60_000, 10**12))[:2] == (600, 700)
    # Retention has since passed the first 50 of them: the minimum is searched for.
    assert _loaded(tmp_path, bounds=(65_000, 10**12))[:2] == (650, 700)
