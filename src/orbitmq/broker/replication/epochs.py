"""The epoch file (``epochFileCheckpoint``) and the consistent point of two replicas' logs.

Controller mode (ha-replication.md §5.6, §5.8). Every mastership has an *epoch*, given by the
controller; a master appends ``(epoch, startOffset)`` to its epoch file when it takes office,
so the file says which master wrote which bytes: an entry ends where the next one starts, the
last at the log's end. A slave keeps its master's entries. The file is RocketMQ's text format:
line 1 the entry count, line 2 the CRC32 of the entry lines, then ``epoch-startOffset`` per line;
it is replaced atomically (temp file, fsync, rename) and a ``.bak`` copy is kept.

:func:`consistent_point` is pure: a replica that rejoins compares its entries with its new
master's and keeps the longest prefix both wrote under the same epoch; bytes after it are a
divergent tail (written by an old master and never acknowledged under ``allAckInSyncStateSet``).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable
from pathlib import Path

__all__ = ["EpochEntry", "EpochFile", "consistent_point", "decode_entries", "encode_entries"]

logger = logging.getLogger(__name__)

EpochEntry = tuple[int, int]  # (epoch, start offset)

FILE_NAME = "epochFileCheckpoint"


def encode_entries(entries: list[EpochEntry]) -> bytes:
    lines = "".join(f"{epoch}-{start}\n" for epoch, start in entries)
    return f"{len(entries)}\n{zlib.crc32(lines.encode())}\n{lines}".encode()


def decode_entries(data: bytes) -> list[EpochEntry] | None:
    """The entries of an epoch file; None when the file is torn or corrupt."""
    try:
        text = data.decode()
        count_text, crc_text, rest = text.split("\n", 2)
        if zlib.crc32(rest.encode()) != int(crc_text):
            return None
        entries = []
        for line in rest.splitlines():
            epoch, _, start = line.partition("-")
            entries.append((int(epoch), int(start)))
        return entries if len(entries) == int(count_text) else None
    except (UnicodeDecodeError, ValueError):
        return None


def consistent_point(
    local: list[EpochEntry], local_max: int, master: list[EpochEntry], master_max: int
) -> int | None:
    """Where a replica's log stops agreeing with its master's (§5.8); None when nothing matches.

    Walking the local epochs newest first, the first one the master also has with the same
    start offset gives ``min(local end, master end)`` of that epoch. An empty local list is a
    new replica: its log is trusted as far as the master's reaches.
    """
    if not local:
        return min(local_max, master_max)
    master_ends = _ends(master, master_max)
    local_ends = _ends(local, local_max)
    for (epoch, start), local_end in zip(reversed(local), reversed(local_ends), strict=True):
        for (master_epoch, master_start), master_end in zip(master, master_ends, strict=True):
            if master_epoch == epoch and master_start == start:
                return min(local_end, master_end)
    return None


def _ends(entries: list[EpochEntry], max_offset: int) -> list[int]:
    return [entries[i + 1][1] for i in range(len(entries) - 1)] + [max_offset]


class EpochFile:
    """The epoch entries of one broker, persisted under its store root."""

    def __init__(self, store_root: Path, write_file: Callable[[Path, bytes], None]) -> None:
        self.path = store_root / FILE_NAME
        self._backup = store_root / (FILE_NAME + ".bak")
        self._write_file = write_file
        self.entries: list[EpochEntry] = []

    def load(self) -> None:
        for path in (self.path, self._backup):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            entries = decode_entries(data)
            if entries is not None:
                self.entries = entries
                return
            logger.warning("epoch file %s is corrupt; trying its backup", path)
        self.entries = []

    @property
    def last_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def append(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (dropping entries it supersedes)."""
        kept = [(e, s) for e, s in self.entries if e < epoch and s <= start_offset]
        self.replace([*kept, (epoch, start_offset)])

    def replace(self, entries: list[EpochEntry]) -> None:
        data = encode_entries(entries)
        self._write_file(self.path, data)
        self._write_file(self._backup, data)
        self.entries = list(entries)

    def truncate_after(self, offset: int) -> None:
        """Drop entries that start after ``offset`` (the log was cut there)."""
        kept = [(e, s) for e, s in self.entries if s <= offset]
        if kept != self.entries:
            self.replace(kept)
