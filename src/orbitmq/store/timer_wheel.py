"""TimerWheel and TimerStore: durable pending timers, found by due time without scanning them all.

The wheel is a file of fixed slots, one per ``precision_ms`` of time, covering a window of
``slot_count * precision_ms`` (twice the longest allowed delay, so the slot of any pending
timer is never shared with another period). Slot index = ``(slot_start_ms // precision_ms)
% slot_count``. A slot holds the head of a linked list of TimerLog records (``store.timer_log``)
that fall due within it; the slot's own start time tells a live slot from a stale one left by
the previous turn of the wheel.

Slot layout (big-endian, 20 bytes; the file is ``slot_count`` slots, memory-mapped):

| offset | size | field |
| --- | --- | --- |
| 0 | 8 | slot_start_ms (long): the period the slot currently describes |
| 8 | 8 | newest_log_position (long): head of its TimerLog list, -1 when empty |
| 16 | 4 | count (int): records in the list |

:class:`TimerStore` owns one TimerLog, one TimerWheel and a checkpoint
(``timercheck.json``: ``enqueue_queue_offset``, ``dequeue_ms``, ``log_position``, the latest
due time per log segment, and the wheel's geometry). Its invariants, kept by its owner:

- every timed message below ``enqueue_queue_offset`` of the timer topic has a record in the
  log below ``log_position`` (durable: the log is fsynced before the checkpoint is written);
- every timer due before ``dequeue_ms`` has been delivered.

After a clean stop the files and the checkpoint agree. After a crash the wheel may describe
records that never reached the disk, so :meth:`TimerStore.open` rebuilds: it keeps the log up
to the checkpointed position, drops the records already delivered (due before
``dequeue_ms``), and relinks the rest into a fresh log and wheel; the owner then re-enqueues
the timer topic from ``enqueue_queue_offset`` (at-least-once).

Not thread-safe except where noted: one owner mutates it from one thread.
"""

from __future__ import annotations

import logging
import mmap
import os
import shutil
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from orbitmq.errors import CorruptRecordError
from orbitmq.store._fs import reserve_blocks
from orbitmq.store.timer_log import NO_POSITION, TimerLog, TimerRecord

_log = logging.getLogger(__name__)

SLOT = struct.Struct(">qqi")
SLOT_BYTES = SLOT.size
CHECKPOINT_FILE = "timercheck.json"
ABORT_FILE = "abort"


class TimerWheel:
    """The memory-mapped slot file."""

    def __init__(self, path: Path, slot_count: int, precision_ms: int) -> None:
        if slot_count < 1 or precision_ms < 1:
            raise ValueError(f"timer wheel needs slots ({slot_count}) and a precision ({precision_ms} ms)")
        self.path = path
        self.slot_count = slot_count
        self.precision_ms = precision_ms
        self._file: int | None = None
        self._map: mmap.mmap | None = None

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        size = self.slot_count * SLOT_BYTES
        try:
            if os.fstat(fd).st_size != size:
                os.ftruncate(fd, 0)  # another geometry: start empty
                os.ftruncate(fd, size)
            # Slots are written anywhere: every one gets its block now, so that no write
            # into the mapping can fault on a full disk (SIGBUS); a full disk fails here.
            reserve_blocks(fd, 0, size, f"timer wheel {self.path.name}")
            self._map = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        self._file = fd

    def close(self) -> None:
        if self._map is not None:
            self._map.flush()
            self._map.close()
            self._map = None
        if self._file is not None:
            os.close(self._file)
            self._file = None

    def clear(self) -> None:
        """Empty every slot."""
        buffer = self._buffer()
        buffer[:] = bytes(len(buffer))

    def slot_start(self, due_ms: int) -> int:
        """Start of the period that ``due_ms`` falls into."""
        return due_ms - due_ms % self.precision_ms

    def get(self, slot_start_ms: int) -> tuple[int, int]:
        """(newest log position, count) of a slot; (-1, 0) when it holds another period."""
        start, newest, count = SLOT.unpack_from(self._buffer(), self._position(slot_start_ms))
        if start != slot_start_ms:
            return NO_POSITION, 0
        return newest, count

    def set(self, slot_start_ms: int, newest_log_position: int, count: int) -> None:
        SLOT.pack_into(
            self._buffer(), self._position(slot_start_ms), slot_start_ms, newest_log_position, count
        )

    def flush(self) -> None:
        """msync the slot file (may run on another thread)."""
        if self._map is not None:
            self._map.flush()

    def _position(self, slot_start_ms: int) -> int:
        return (slot_start_ms // self.precision_ms) % self.slot_count * SLOT_BYTES

    def _buffer(self) -> mmap.mmap:
        if self._map is None:
            raise RuntimeError(f"timer wheel {self.path} is not open")
        return self._map


@dataclass(slots=True)
class TimerCheckpoint:
    """Progress of the timer service as last made durable."""

    enqueue_queue_offset: int = 0
    dequeue_ms: int = 0
    log_position: int = 0
    precision_ms: int = 0
    slot_count: int = 0
    segment_due_max_ms: dict[int, int] = field(default_factory=dict)
    # The order prepare_checkpoint made it in (not written to the file): a write never
    # replaces a checkpoint made after it.
    sequence: int = field(default=0, compare=False)

    def encode(self) -> bytes:
        document = {
            "enqueue_queue_offset": self.enqueue_queue_offset,
            "dequeue_ms": self.dequeue_ms,
            "log_position": self.log_position,
            "precision_ms": self.precision_ms,
            "slot_count": self.slot_count,
            "segment_due_max_ms": {str(start): due for start, due in self.segment_due_max_ms.items()},
        }
        return orjson.dumps(document)

    @classmethod
    def decode(cls, data: bytes, where: str) -> TimerCheckpoint:
        """Raises CorruptRecordError (naming ``where``) when the JSON has another shape."""
        try:
            document = orjson.loads(data)
            return cls(
                int(document["enqueue_queue_offset"]),
                int(document["dequeue_ms"]),
                int(document["log_position"]),
                int(document["precision_ms"]),
                int(document["slot_count"]),
                {int(start): int(due) for start, due in document["segment_due_max_ms"].items()},
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptRecordError(f"{where}: not a timer checkpoint: {exc}") from exc


class TimerStore:
    """TimerLog + TimerWheel + checkpoint under ``directory`` (see the module docstring)."""

    def __init__(self, directory: Path, precision_ms: int, slot_count: int, log_segment_bytes: int) -> None:
        self.directory = directory
        self.log = TimerLog(directory / "timerlog", log_segment_bytes)
        self.wheel = TimerWheel(directory / "timerwheel", slot_count, precision_ms)
        self.checkpoint = TimerCheckpoint(precision_ms=precision_ms, slot_count=slot_count)
        self.recovered_after_crash = False
        # Checkpoint writes take turns (the periodic one runs on a worker thread and may still
        # be running when close() writes the last): one temporary file, never two writers.
        self._write_lock = threading.Lock()
        self._closed = False
        self._prepared = 0  # checkpoints prepared so far
        self._written = 0  # sequence of the last one written

    @property
    def precision_ms(self) -> int:
        return self.wheel.precision_ms

    def open(self) -> TimerCheckpoint:
        """Load (clean path) or rebuild (crash path) and return the checkpoint to resume from."""
        self.directory.mkdir(parents=True, exist_ok=True)
        abort = self.directory / ABORT_FILE
        crashed = abort.exists()
        checkpoint = self._read_checkpoint()
        abort.touch()
        geometry_same = (
            checkpoint is not None
            and checkpoint.precision_ms == self.wheel.precision_ms
            and checkpoint.slot_count == self.wheel.slot_count
        )
        self.log.load()
        self.wheel.open()
        if checkpoint is None:
            checkpoint = TimerCheckpoint(precision_ms=self.precision_ms, slot_count=self.wheel.slot_count)
            self.log.destroy()
            self.wheel.clear()
        elif crashed or not geometry_same or self.log.end_position != checkpoint.log_position:
            self.recovered_after_crash = True
            self._rebuild(checkpoint)
        else:
            self.log.segment_due_max_ms = dict(checkpoint.segment_due_max_ms)
        checkpoint.precision_ms, checkpoint.slot_count = self.precision_ms, self.wheel.slot_count
        self.checkpoint = checkpoint
        return checkpoint

    def close(self, enqueue_queue_offset: int, dequeue_ms: int) -> None:
        """Write a final checkpoint and remove the crash marker.

        A checkpoint write in flight on another thread finishes first; one that has not
        started by then is skipped (this one is newer).
        """
        prepared = self.prepare_checkpoint(enqueue_queue_offset, dequeue_ms)
        with self._write_lock:
            self._write_checkpoint(prepared)
            self._closed = True
            self.log.close()
            self.wheel.close()
        (self.directory / ABORT_FILE).unlink(missing_ok=True)

    def add(self, commit_log_offset: int, size: int, due_ms: int) -> None:
        """Record one pending timer in the log and link it into its slot."""
        slot_start = self.wheel.slot_start(due_ms)
        newest, count = self.wheel.get(slot_start)
        position = self.log.append(commit_log_offset, size, due_ms, newest)
        self.wheel.set(slot_start, position, count + 1)

    def slot_records(self, slot_start_ms: int) -> list[TimerRecord]:
        """Every timer of one slot, newest first (a broken link ends the list, logged)."""
        records: list[TimerRecord] = []
        position, count = self.wheel.get(slot_start_ms)
        while position != NO_POSITION and len(records) < count:
            try:
                record = self.log.read(position)
            except CorruptRecordError:
                _log.error("timer slot %d: link to log position %d is broken", slot_start_ms, position)
                break
            records.append(record)
            position = record.prev_log_position
        return records

    def prepare_checkpoint(self, enqueue_queue_offset: int, dequeue_ms: int) -> TimerCheckpoint:
        """Write buffered records out and describe the state to make durable (owner's thread)."""
        self.log.write_out()
        self.log.delete_segments_due_before(dequeue_ms)
        self._prepared += 1
        return TimerCheckpoint(
            enqueue_queue_offset,
            dequeue_ms,
            self.log.written_position,
            self.precision_ms,
            self.wheel.slot_count,
            dict(self.log.segment_due_max_ms),
            self._prepared,
        )

    def write_checkpoint(self, checkpoint: TimerCheckpoint) -> None:
        """fsync the log and the wheel, then replace the checkpoint file (any thread).

        Writes take turns. Nothing is written after :meth:`close`, nor a checkpoint older than
        the one last written (one prepared earlier whose write lost the race to a later one).
        """
        with self._write_lock:
            if self._closed or checkpoint.sequence < self._written:
                return
            self._write_checkpoint(checkpoint)

    def _write_checkpoint(self, checkpoint: TimerCheckpoint) -> None:
        self.log.sync()
        self.wheel.flush()
        path = self.directory / CHECKPOINT_FILE
        temporary = path.with_name(path.name + ".tmp")
        with open(temporary, "wb") as handle:
            handle.write(checkpoint.encode())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        self.checkpoint = checkpoint
        self._written = checkpoint.sequence

    def disk_bytes(self) -> int:
        """Bytes used by the log segments and the wheel file."""
        total = 0
        for path in self.directory.rglob("*"):
            if path.is_file():
                total += path.stat().st_size
        return total

    def _read_checkpoint(self) -> TimerCheckpoint | None:
        path = self.directory / CHECKPOINT_FILE
        try:
            return TimerCheckpoint.decode(path.read_bytes(), str(path))
        except FileNotFoundError:
            return None
        except CorruptRecordError:
            _log.exception("timer checkpoint unreadable; rebuilding from the timer topic")
            return None

    def _rebuild(self, checkpoint: TimerCheckpoint) -> None:
        """Relink the durable, undelivered records into a fresh log and wheel."""
        durable_end = min(checkpoint.log_position, self.log.written_position)
        survivors = [
            record
            for record in self.log.scan(self.log.min_position, durable_end)
            if record.due_ms >= checkpoint.dequeue_ms
        ]
        self.log.close()
        old = self.log.directory.with_name(self.log.directory.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if self.log.directory.exists():
            self.log.directory.rename(old)
        self.log = TimerLog(self.log.directory, self.log.segment_bytes)
        self.log.load()
        self.wheel.clear()
        for record in survivors:  # log order: each slot's newest record ends up at its head
            self.add(record.commit_log_offset, record.size, record.due_ms)
        self.log.write_out()
        shutil.rmtree(old, ignore_errors=True)
        _log.warning(
            "timer store rebuilt after an unclean stop: %d pending timers kept, resuming the timer topic "
            "at queue offset %d",
            len(survivors),
            checkpoint.enqueue_queue_offset,
        )
