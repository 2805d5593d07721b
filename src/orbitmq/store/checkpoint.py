"""The store checkpoint file (``store/checkpoint``): how far each part is known durable.

Layout (big-endian, 56 bytes; replaced atomically by write-temp-then-rename)::

    pos  size  field
    0    8     commit_log_flushed_timestamp_ms      when the commit log was last flushed
    8    8     commit_log_flushed_offset            commit log bytes below it are on disk
    16   8     consume_queue_flushed_timestamp_ms
    24   8     consume_queue_dispatched_offset      records below it are in fsync'd CQ files
    32   8     index_flushed_timestamp_ms
    40   8     index_dispatched_offset              records below it are in the flushed index
    48   4     version (1)
    52   4     CRC32 of bytes 0..51

A missing, short or CRC-failing file reads as "no checkpoint", which sends recovery to
the slow, safe path (re-scan from the first segment).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from orbitmq.store._fs import failpoints, write_file_durably

_LAYOUT = struct.Struct(">qqqqqqi")
_CRC = struct.Struct(">I")
_VERSION = 1


@dataclass(slots=True)
class Checkpoint:
    """Durability points; offsets are commit-log offsets at record boundaries."""

    commit_log_flushed_timestamp_ms: int = 0
    commit_log_flushed_offset: int = 0
    consume_queue_flushed_timestamp_ms: int = 0
    consume_queue_dispatched_offset: int = 0
    index_flushed_timestamp_ms: int = 0
    index_dispatched_offset: int = 0

    def encode(self) -> bytes:
        body = _LAYOUT.pack(
            self.commit_log_flushed_timestamp_ms,
            self.commit_log_flushed_offset,
            self.consume_queue_flushed_timestamp_ms,
            self.consume_queue_dispatched_offset,
            self.index_flushed_timestamp_ms,
            self.index_dispatched_offset,
            _VERSION,
        )
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def decode(cls, data: bytes) -> Checkpoint | None:
        """The checkpoint in ``data``, or None when it is short, damaged or of another version."""
        if len(data) < _LAYOUT.size + _CRC.size:
            return None
        body = data[: _LAYOUT.size]
        (crc,) = _CRC.unpack_from(data, _LAYOUT.size)
        if zlib.crc32(body) != crc:
            return None
        *fields, version = _LAYOUT.unpack(body)
        if version != _VERSION:
            return None
        return cls(*fields)

    @property
    def dispatch_safe_offset(self) -> int:
        """Every derived file is complete below this commit-log offset."""
        return min(self.consume_queue_dispatched_offset, self.index_dispatched_offset)


def read_checkpoint(path: Path) -> Checkpoint | None:
    """The checkpoint at ``path``, or None when there is no usable one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return Checkpoint.decode(data)


def write_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Durably replace the checkpoint file."""
    failpoints.hit("checkpoint.before_write")
    write_file_durably(path, checkpoint.encode())
