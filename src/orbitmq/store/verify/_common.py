"""Shared pieces of the store verifier: the report, file listing and mapping helpers."""

from __future__ import annotations

import errno
import mmap
import os
import re
import struct
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from orbitmq.store.dispatch import takes_queue_offset

COMMIT_LOG_DIR = "commitlog"
CONSUME_QUEUE_DIR = "consumequeue"
INDEX_DIR = "index"
ABORT_MARKER = "abort"
CHECKPOINT_FILE = "checkpoint"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

CQ_ENTRY = struct.Struct(">qiq")  # commit-log offset, record size, tags code
INDEX_HEADER = struct.Struct(">qqqqii")  # begin/end timestamp, begin/end commit-log offset, slots, count
INDEX_ENTRY = struct.Struct(">iqii")  # key hash, commit-log offset, seconds delta, previous index
INDEX_SLOT = struct.Struct(">i")
RECORD_HEAD = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE
RECORD_SIZE_MIN = 88 + 1 + 2  # fixed IPv4 part, topic length byte, properties length short

FILE_NAME = re.compile(r"^\d{20}$")
# RocketMQ fills the positions before a queue's first entry with (0, INT32_MAX, 0) entries.
CQ_PRE_BLANK_SIZE = (1 << 31) - 1


@dataclass(slots=True)
class VerifyReport:
    """What :func:`verify_store` found. ``ok`` is true when ``problems`` is empty."""

    store_path: Path
    commit_log_segment_bytes: int = 0
    consume_queue_entries_per_file: int = 0
    segments: int = 0
    records: int = 0
    blank_records: int = 0
    commit_log_min_offset: int = 0
    commit_log_end_offset: int = 0  # end of the valid written data
    consume_queues: int = 0
    consume_queue_entries: int = 0
    expired_consume_queue_entries: int = 0  # entries below the commit-log minimum (retention)
    index_files: int = 0
    index_entries: int = 0
    index_entries_checked: int = 0
    abort_marker_present: bool = False
    # With the abort marker: recovery re-dispatches every record from this commit-log offset
    # (see verify_store), so what is missing past it is left to recovery, not a problem.
    recovery_redispatch_from: int | None = None
    left_to_recovery: Counter[str] = field(default_factory=Counter)  # what recovery redoes or drops
    notes: list[str] = field(default_factory=list)  # what could not be checked, and why
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0  # may exceed len(problems) when capped
    max_problems: int = 1000

    @property
    def ok(self) -> bool:
        """No problem found (on a store that needs recovery: none that recovery would not fix)."""
        return self.problem_count == 0

    @property
    def needs_recovery(self) -> bool:
        """The store was not closed cleanly (abort marker): its next open runs crash recovery."""
        return self.recovery_redispatch_from is not None

    def leave_to_recovery(self, offset: int, what: str) -> bool:
        """Count ``what`` at commit-log ``offset`` as recovery's work when recovery redoes it."""
        start = self.recovery_redispatch_from
        if start is None or offset < start:
            return False
        self.left_to_recovery[what] += 1
        return True

    def problem(self, text: str) -> None:
        """Record one problem (kept up to max_problems, always counted)."""
        self.problem_count += 1
        if len(self.problems) < self.max_problems:
            self.problems.append(text)

    def summary(self) -> str:
        """A few lines of counts, then the verdict."""
        lines = [
            f"store {self.store_path}",
            f"commitlog: {self.segments} segments of {self.commit_log_segment_bytes} bytes, "
            f"{self.records} records, {self.blank_records} blank, "
            f"commit-log offsets [{self.commit_log_min_offset}, {self.commit_log_end_offset})",
            f"consumequeue: {self.consume_queues} queues, {self.consume_queue_entries} entries "
            f"({self.expired_consume_queue_entries} below the commit-log minimum), "
            f"{self.consume_queue_entries_per_file} entries per file",
            f"index: {self.index_files} files, {self.index_entries} entries, "
            f"{self.index_entries_checked} checked",
        ]
        if self.needs_recovery:
            lines.append(
                "needs recovery: abort marker present (the store is open, or was not closed cleanly); "
                f"its next open re-dispatches from commit-log offset {self.recovery_redispatch_from}"
            )
            lines += [
                f"to be re-dispatched by recovery: {count} {what}"
                for what, count in sorted(self.left_to_recovery.items())
            ]
        lines += [f"note: {note}" for note in self.notes]
        verdict = "OK" if self.ok else f"{self.problem_count} problems"
        if self.needs_recovery and self.ok:
            verdict = "OK once recovered (exit status 3)"
        if len(self.problems) < self.problem_count:
            verdict += f" (first {len(self.problems)} listed)"
        lines.append(verdict)
        return "\n".join(lines)

    def render(self) -> str:
        """The summary followed by one line per problem."""
        return "\n".join([self.summary(), *self.problems])


@dataclass(slots=True)
class Record:
    commit_log_offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    tags_code: int
    sys_flag: int
    store_timestamp_ms: int
    keys: tuple[str, ...]
    # Index keys a writer may add beyond ``keys`` (RocketMQ 5's tag key ``T#<tags>``).
    optional_keys: tuple[str, ...] = ()

    @property
    def dispatchable(self) -> bool:
        return takes_queue_offset(self.sys_flag)

    def where(self) -> str:
        return (
            f"topic {self.topic!r} queue {self.queue_id} queue offset {self.queue_offset} "
            f"(commit-log offset {self.commit_log_offset})"
        )


@dataclass(slots=True)
class CommitLogScan:
    records: dict[int, Record] = field(default_factory=dict)
    min_offset: int = 0
    end_offset: int = 0


def resolve_root(path: Path) -> Path:
    if not (path / COMMIT_LOG_DIR).is_dir() and (path / "store" / COMMIT_LOG_DIR).is_dir():
        return path / "store"
    return path


@contextmanager
def mapped_file(path: Path) -> Iterator[memoryview]:
    """The file's bytes as they are, read into private memory (never a mapping of the file).

    A shared mapping of a store file can kill the reader with SIGBUS: on tmpfs a read fault
    on a hole allocates a page, which a full file system refuses, and a file cut while
    mapped faults past its new end. So the data ranges (SEEK_DATA/SEEK_HOLE) are read with
    pread into an anonymous mapping of the file's size whose other pages, the holes, stay
    untouched zeros: memory costs what the file holds, not its size.
    """
    with open(path, "rb") as handle:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        if size == 0:
            yield memoryview(b"")
            return
        with mmap.mmap(-1, size) as private:
            view = memoryview(private)
            try:
                for start, end in _data_ranges(fd, size):
                    _read_into(fd, view[start:end], start)
                yield view
            finally:
                # The mapping cannot close while a view of it is alive.
                view.release()


def _data_ranges(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each range of the file that may hold data; the rest reads as zeros."""
    position = 0
    while position < size:
        try:
            start = os.lseek(fd, position, os.SEEK_DATA)
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return  # no data past position
            yield position, size  # no SEEK_DATA here: read it all
            return
        if start >= size:
            return
        yield start, end
        position = end


def _read_into(fd: int, target: memoryview, file_position: int) -> None:
    """Fill ``target`` from ``file_position``; a file cut meanwhile leaves the rest zeros."""
    done = 0
    while done < len(target):
        count = os.preadv(fd, [target[done:]], file_position + done)
        if count <= 0:
            return
        done += count


def numbered_files(directory: Path, what: str, report: VerifyReport) -> list[tuple[int, Path]]:
    """Files named by a 20-digit number, sorted; anything else in the directory is a problem."""
    files = []
    for entry in sorted(directory.iterdir()):
        if entry.is_file() and FILE_NAME.match(entry.name):
            files.append((int(entry.name), entry))
        else:
            report.problem(f"{what}: unexpected entry {entry}")
    return files


def infer_file_bytes(files: list[tuple[int, Path]]) -> int:
    """The fixed file size: the most common size (the largest on a tie), else the name spacing."""
    sizes = Counter(path.stat().st_size for _, path in files)
    size, count = max(sizes.items(), key=lambda item: (item[1], item[0]), default=(0, 0))
    if count * 2 > len(files) or len(files) < 2:
        return size
    spacings = [files[index + 1][0] - files[index][0] for index in range(len(files) - 1)]
    return min(spacings)


def check_file_sequence(
    files: list[tuple[int, Path]], file_bytes: int, what: str, report: VerifyReport
) -> bool:
    """Names must be multiples of the file size without gaps; sizes must equal it."""
    if file_bytes <= 0:
        report.problem(f"{what}: cannot determine the file size")
        return False
    good = True
    for index, (start, path) in enumerate(files):
        if start % file_bytes:
            report.problem(f"{what}: file {path.name} does not start at a multiple of {file_bytes}")
            good = False
        if index and start != files[index - 1][0] + file_bytes:
            report.problem(f"{what}: gap or overlap between {files[index - 1][1].name} and {path.name}")
            good = False
        size = path.stat().st_size
        if size != file_bytes:
            report.problem(f"{what}: file {path.name} is {size} bytes, expected {file_bytes}")
            good = False
    return good
