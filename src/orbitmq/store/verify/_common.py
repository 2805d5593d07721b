"""Shared pieces of the store verifier: the report, file listing and mapping helpers."""

from __future__ import annotations

import mmap
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
    notes: list[str] = field(default_factory=list)  # what could not be checked, and why
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0  # may exceed len(problems) when capped
    max_problems: int = 1000

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

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
        if self.abort_marker_present:
            lines.append("note: abort marker present (store open or crashed; reopen it before verifying)")
        lines += [f"note: {note}" for note in self.notes]
        verdict = "OK" if self.ok else f"{self.problem_count} problems"
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
    """The file's bytes, mapped read-only (an empty file cannot be mapped and gives an empty view)."""
    with open(path, "rb") as handle:
        if path.stat().st_size == 0:
            yield memoryview(b"")
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapping:
            view = memoryview(mapping)
            try:
                yield view
            finally:
                # The mapping cannot close while a view of it is alive.
                view.release()


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
