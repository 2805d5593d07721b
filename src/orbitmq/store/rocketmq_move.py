"""Moving a closed store between RocketMQ's broker and OrbitMQ's (``orbitmq store import-rocketmq``).

The two brokers share the formats of what a store holds: CommitLog records (message version 1,
the only one RocketMQ writes for topics of up to 127 bytes, OrbitMQ's limit), ConsumeQueue
20-byte units, IndexFiles (RocketMQ 5 adds one ``<topic>#T#<tags>`` key per message, which
OrbitMQ's reader simply never asks for), and ``config/``'s ``topics.json``,
``subscriptionGroup.json``, ``consumerOffset.json`` and ``delayOffset.json`` (RocketMQ writes
them in fastjson's dialect, numeric keys unquoted; OrbitMQ's broker reads both). Each broker
can therefore start on the other's directory as it is. What differs on purpose, and what this
module does about it:

* ``checkpoint``: RocketMQ's StoreCheckpoint is a 4 KiB page of five longs (CommitLog,
  ConsumeQueue and index flush *times*, ``masterFlushedOffset``, ``confirmPhyOffset``);
  OrbitMQ's is 56 bytes of flushed *offsets* with a CRC. OrbitMQ ignores a checkpoint whose
  CRC fails and recovers from the first segment, which is correct; RocketMQ would read
  OrbitMQ's offsets as times and a time as its ``confirmPhyOffset``. The export writes
  RocketMQ's layout (:func:`rocketmq_checkpoint`); the import writes none, so that OrbitMQ's
  first start re-dispatches the whole log (its safe path: time, never correctness).
* Each broker's private state is left behind: OrbitMQ's ``queue_manifest.json`` (rebuilt),
  ``timer/`` and POP state; RocketMQ's ``rocksdbstore/``, ``timerwheel``, ``timerlog``,
  ``compaction/``, ``config/timercheck`` and the ``*.bak`` copies. Timed messages not yet due
  (a deliver time, not a delay level) therefore do not move; delay-level messages do
  (``SCHEDULE_TOPIC_XXXX`` and ``delayOffset.json``).

Both directions copy rather than share files (two brokers must never write one file), read
sparse files by their data ranges so an index file stays sparse, refuse a source with an
``abort`` marker (a store not stopped cleanly: its own broker must recover it first) or one
in use (OrbitMQ's flock and the POSIX lock RocketMQ's ``FileChannel.tryLock`` takes), and
check the source with the offline verifier before writing anything.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from orbitmq.errors import StoreError, StoreLockedError
from orbitmq.store._fs import list_segments
from orbitmq.store.commit_log import RecordCheck, check_record
from orbitmq.store.dir_lock import LOCK_FILE_NAME, StoreDirLock, lock_store_dir
from orbitmq.store.verify import verify_store

__all__ = [
    "CONFIG_FILES",
    "MoveReport",
    "StoreMoveError",
    "export_rocketmq",
    "import_rocketmq",
    "rocketmq_checkpoint",
]

# The config files both brokers keep in the same shape (RocketMQ's names).
CONFIG_FILES = ("topics.json", "subscriptionGroup.json", "consumerOffset.json", "delayOffset.json")
DATA_DIRS = ("commitlog", "consumequeue", "index")
ABORT_MARKER = "abort"
ROCKETMQ_CHECKPOINT_BYTES = 4096  # one OS page, as StoreCheckpoint maps it
_ROCKETMQ_CHECKPOINT = struct.Struct(">qqqqq")
# Index entries checked per file by the pre-move verification (a full check reads them all).
_INDEX_SAMPLE_PER_FILE = 10_000
_COPY_CHUNK_BYTES = 1 << 20


class StoreMoveError(StoreError):
    """The move cannot be done; the message is one line naming what is wrong."""


@dataclass(frozen=True, slots=True)
class MoveReport:
    """What was moved."""

    records: int
    commit_log_end_offset: int
    segment_bytes: int
    consume_queues: int
    config_files: tuple[str, ...]

    def summary(self, verb: str, source: Path, target: Path) -> str:
        return (
            f"{verb} {self.records} messages (CommitLog offsets up to {self.commit_log_end_offset}, "
            f"segments of {self.segment_bytes} bytes), {self.consume_queues} consume queues and "
            f"{', '.join(self.config_files) or 'no config files'} from {source} to {target}; start its "
            f"broker with storePathRootDir={target} and mapedFileSizeCommitLog={self.segment_bytes}"
        )


def rocketmq_checkpoint(last_store_timestamp_ms: int, commit_log_end_offset: int) -> bytes:
    """RocketMQ's StoreCheckpoint page for a store flushed up to its end.

    Five big-endian longs at the start of a 4 KiB page: physicMsgTimestamp, logicsMsgTimestamp,
    indexMsgTimestamp (all the store time of the newest record: everything is flushed),
    masterFlushedOffset (0: not a slave's) and confirmPhyOffset (the end of the CommitLog).
    """
    head = _ROCKETMQ_CHECKPOINT.pack(
        last_store_timestamp_ms, last_store_timestamp_ms, last_store_timestamp_ms, 0, commit_log_end_offset
    )
    return head + bytes(ROCKETMQ_CHECKPOINT_BYTES - len(head))


def import_rocketmq(source: Path | str, target: Path | str, *, force: bool = False) -> MoveReport:
    """Copy the closed RocketMQ store ``source`` into a new OrbitMQ store ``target``.

    Raises:
        StoreMoveError: a bad source or target, the source in use, or (unless ``force``) not
            consistent by the offline verifier.
    """
    return _move(Path(source), Path(target), force=force, to_rocketmq=False)


def export_rocketmq(source: Path | str, target: Path | str, *, force: bool = False) -> MoveReport:
    """Copy the closed OrbitMQ store ``source`` into a new RocketMQ store ``target``.

    Raises:
        StoreMoveError: a bad source or target, the source in use, or (unless ``force``) not
            consistent by the offline verifier.
    """
    return _move(Path(source), Path(target), force=force, to_rocketmq=True)


def _move(source: Path, target: Path, *, force: bool, to_rocketmq: bool) -> MoveReport:
    _check_paths(source, target)
    created = not target.exists()
    locks = [_lock(source, "source store")]
    try:
        locks.append(_lock(target, "target store"))
        report = _copy_store(source, target, force=force, to_rocketmq=to_rocketmq)
    except BaseException:
        if created and len(locks) == 2:
            shutil.rmtree(target, ignore_errors=True)  # a half-written target is no store
        raise
    finally:
        for lock in reversed(locks):
            lock.release()
    return report


def _copy_store(source: Path, target: Path, *, force: bool, to_rocketmq: bool) -> MoveReport:
    if (source / ABORT_MARKER).exists():
        raise StoreMoveError(
            f"{source} was not stopped cleanly (its {ABORT_MARKER} marker is present): start the "
            "broker that wrote it once and stop it, so that it recovers its own store first"
        )
    report = verify_store(source, index_sample_per_file=_INDEX_SAMPLE_PER_FILE, max_problems=1)
    if report.problem_count and not force:
        raise StoreMoveError(
            f"{source} is not consistent ({report.problem_count} problems, the first: {report.problems[0]}); "
            f"python -m orbitmq.store.verify {source} lists them; --force moves it as it is"
        )
    for name in DATA_DIRS:
        if (source / name).is_dir():
            _copy_tree(source / name, target / name)
    copied = []
    (target / "config").mkdir(exist_ok=True)
    for name in CONFIG_FILES:
        if (source / "config" / name).is_file():
            shutil.copyfile(source / "config" / name, target / "config" / name)
            copied.append(name)
    if to_rocketmq:
        newest_ms = _newest_store_timestamp_ms(source)
        _write_new(target / "checkpoint", rocketmq_checkpoint(newest_ms, report.commit_log_end_offset))
    _sync_tree(target)
    return MoveReport(
        records=report.records,
        commit_log_end_offset=report.commit_log_end_offset,
        segment_bytes=report.commit_log_segment_bytes,
        consume_queues=report.consume_queues,
        config_files=tuple(copied),
    )


def _check_paths(source: Path, target: Path) -> None:
    if not (source / "commitlog").is_dir():
        raise StoreMoveError(f"{source} is not a store directory (it has no commitlog/)")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise StoreMoveError(f"{target} exists and is not an empty directory: the target must be a new one")
    if target.resolve().is_relative_to(source.resolve()) or source.resolve().is_relative_to(target.resolve()):
        raise StoreMoveError(f"{source} and {target} overlap: the target must be a directory of its own")


class _HeldLocks:
    """OrbitMQ's flock of a store directory plus the POSIX lock RocketMQ's broker takes."""

    def __init__(self, dir_lock: StoreDirLock, posix_fd: int) -> None:
        self._dir_lock = dir_lock
        self._posix_fd = posix_fd

    def release(self) -> None:
        os.close(self._posix_fd)
        self._dir_lock.release()


def _lock(directory: Path, what: str) -> _HeldLocks:
    try:
        dir_lock = lock_store_dir(directory, what)
    except StoreLockedError as exc:
        raise StoreMoveError(str(exc)) from None
    except OSError as exc:
        raise StoreMoveError(f"cannot lock {directory}: {exc.strerror or exc}") from None
    fd = os.open(directory / LOCK_FILE_NAME, os.O_RDWR | os.O_CLOEXEC)
    try:
        # RocketMQ's broker holds FileChannel.tryLock on the same file: fcntl's record lock.
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        dir_lock.release()
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            raise StoreMoveError(
                f"the {what} directory {directory} is in use by a running broker: stop it first"
            ) from None
        raise StoreMoveError(f"cannot lock {directory}: {exc.strerror or exc}") from None
    return _HeldLocks(dir_lock, fd)


def _copy_tree(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.iterdir()):
        if entry.is_dir():
            _copy_tree(entry, target / entry.name)
        elif entry.is_file():
            _copy_sparse(entry, target / entry.name)


def _copy_sparse(source: Path, target: Path) -> None:
    """Copy a file's data ranges only, so that holes (a fresh index file's) stay holes."""
    with open(source, "rb") as reader, open(target, "xb") as writer:
        size = os.fstat(reader.fileno()).st_size
        position = 0
        while position < size:
            try:
                data_start = os.lseek(reader.fileno(), position, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # nothing but a hole up to the end
                    break
                raise
            data_end = os.lseek(reader.fileno(), data_start, os.SEEK_HOLE)
            reader.seek(data_start)
            writer.seek(data_start)
            remaining = data_end - data_start
            while remaining > 0:
                chunk = reader.read(min(remaining, _COPY_CHUNK_BYTES))
                if not chunk:
                    break
                writer.write(chunk)
                remaining -= len(chunk)
            position = data_end
        writer.truncate(size)


def _newest_store_timestamp_ms(source: Path) -> int:
    """The store time of the last record of the newest segment that holds one (0: none)."""
    for start_offset, path in reversed(list_segments(source / "commitlog")):
        newest = 0
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                continue
            with mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) as buffer:
                position = 0
                while position < size:
                    found, record_size, message = check_record(buffer, position, start_offset, size, False)
                    if found is not RecordCheck.MESSAGE or message is None:
                        break
                    newest = message.store_timestamp
                    position += record_size
        if newest:
            return newest
    return 0


def _write_new(path: Path, data: bytes) -> None:
    with open(path, "xb") as writer:
        writer.write(data)


def _sync_tree(root: Path) -> None:
    for directory, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
