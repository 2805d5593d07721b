"""ConsumeQueue write-out: buffered entries to their files from a few threads, then one sync.

Theory of operation. :meth:`QueueWriter.write_pending` snapshots the buffered entries of
each due queue under the store lock, writes the jobs (queue, first queue offset, bytes)
without that lock, and publishes the outcome under it again. The work in between is
almost all system calls. Writing into a file the queue already sized is an open, a pwrite
and a close: a few microseconds, less than what handing the GIL back and forth between
threads would cost, so those jobs run on the calling thread. A job that creates files
(a queue's first write, or a roll to its next file) adds a mkdir, an open(O_CREAT) and an
ftruncate, tens of microseconds of filesystem metadata work (for 50,000 new queues,
100,000 inode creations). ``os`` calls release the GIL, so when many jobs create files the
writer starts ``thread_count - 1`` helper threads that take chunks of them from one
shared list, and the calling thread joins them once its own jobs are done: the kernel
work of several queues runs on several cores while one thread at a time runs the Python
part. The creating jobs are sorted by directory, so that a chunk stays within few topic
directories and threads seldom wait for each other's mkdir in the same parent. Each queue
is written by one thread, and the caller holds ``flush_lock``, which truncation and
deletion take too, so no file changes shape under a writer. The helper threads live for
one write-out only: a store that is never closed leaves none behind.

Durability. After :meth:`QueueWriter.write` and then :meth:`QueueWriter.sync` return,
every entry written is on disk. Few files (at most ``SYNC_EACH_FILE_MAX``) get one
fdatasync each, plus an fsync of each directory that gained an entry (a new queue
directory or file), as POSIX asks for a new name to survive a crash. Many files get one
syncfs(2) of the store's filesystem instead (sync(2) where syncfs is missing): one call
that writes back every dirty page, inode and directory, rather than one journal commit per
file; unlike sync(2), syncfs reports a writeback error, which then stops the checkpoint
from moving. When a sync fails its files stay listed for the next one.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from orbitmq.errors import StoreError
from orbitmq.store._fs import failpoints, fsync_directory
from orbitmq.store._queue_files import ENTRY_BYTES, WriteLog, create_and_write, make_queue_directory

if TYPE_CHECKING:
    from orbitmq.store.consume_queue import ConsumeQueue

_log = logging.getLogger(__name__)

# A queue is written once it buffers WRITE_BATCH_ENTRIES entries or has waited
# WRITE_DELAY_ROUNDS write-outs (unless the write-out is forced).
WRITE_BATCH_ENTRIES = 64
WRITE_DELAY_ROUNDS = 5
SYNC_EACH_FILE_MAX = 256
# A write-out that fails (a full disk fails every queue, every round) is logged this seldom.
_FAILURE_LOG_INTERVAL_S = 60.0
# Jobs per chunk a thread takes at once, and the fewest jobs worth starting threads for
# (below it the thread start costs more than the overlap saves).
CHUNK_JOBS = 64
PARALLEL_JOBS_MIN = 4 * CHUNK_JOBS
# Threads of a write-out that creates many files: one per core (the kernel work is what
# runs in parallel), at most four.
DEFAULT_THREAD_COUNT = min(4, os.cpu_count() or 1)

Job = tuple["ConsumeQueue", int, bytearray]
_Item = TypeVar("_Item")


class _Outcome:
    """One thread's share of a write-out: what it wrote, what failed, what it raised."""

    __slots__ = ("log", "failed", "error")

    def __init__(self) -> None:
        self.log = WriteLog()
        self.failed: list[tuple[ConsumeQueue, OSError]] = []
        self.error: BaseException | None = None


class QueueWriter:
    """Writes buffered entries to their files from up to ``thread_count`` threads; syncs them."""

    def __init__(self, root: str, thread_count: int = DEFAULT_THREAD_COUNT) -> None:
        self._root = root
        self.thread_count = max(1, thread_count)
        # Written since the last sync: sets, since a queue written every round of a minute
        # between thorough flushes names the same file each time.
        self._unsynced_paths: set[str] = set()
        self._unsynced_directories: set[str] = set()
        self._round = 0  # write-outs so far
        self._failures_logged_at = [-_FAILURE_LOG_INTERVAL_S]  # when a failed write-out was last logged

    def write_pending(self, dirty: set[ConsumeQueue], store_lock: threading.Lock, force: bool) -> int:
        """Write the buffered entries of the ``dirty`` queues that are due; return the entries written.

        With ``force`` every queue is due. Otherwise a queue is due once it holds
        ``WRITE_BATCH_ENTRIES`` entries or has waited ``WRITE_DELAY_ROUNDS`` rounds: with
        tens of thousands of slow queues this turns one small pwrite (and an open and close
        of its file) per queue per round into a few larger ones. ``store_lock`` guards
        ``dirty`` and the queues' buffers; it is held only to snapshot and to publish.

        A queue whose write fails stays buffered and is retried at the next write-out.

        Raises:
            StoreError: ``force`` and some queue could not be written: a forced write-out
                precedes the checkpoint, which must not claim those entries.
        """
        self._round += 1
        with store_lock:
            candidates = list(dirty)
        # Only this writer (flush_lock held) takes queues out of ``dirty`` and moves what they
        # wrote: the choice needs no lock, and the buffers are taken a chunk of queues per hold
        # of it, so that a request waits for one chunk at most, not for 50,000 queues.
        due = candidates if force else [queue for queue in candidates if self._due(queue)]
        jobs: list[Job] = []
        for chunk in _lock_chunks(due):
            with store_lock:
                dirty.difference_update(chunk)
                jobs += [(queue, *queue.take_pending()) for queue in chunk]
            _let_waiters_in()
        try:
            failures = self.write(jobs)
        except BaseException:
            with store_lock:
                dirty.update(queue for queue, _, _ in jobs)  # written or not, their entries stay buffered
            raise
        failed = {queue for queue, _ in failures}
        written = 0
        for done in _lock_chunks(jobs):
            with store_lock:
                written += _publish(done, failed, dirty)
            _let_waiters_in()
        if failures and force:
            queue, error = failures[0]
            raise StoreError(
                f"{len(failures)} consume queues could not be written; first: "
                f"{queue.topic}/{queue.queue_id} from queue offset {queue.written_queue_offset}: {error}"
            )
        return written

    def _due(self, queue: ConsumeQueue) -> bool:
        if queue.max_queue_offset - queue.written_queue_offset >= WRITE_BATCH_ENTRIES:
            return True
        if not queue.first_dirty_round:
            queue.first_dirty_round = self._round
        return self._round - queue.first_dirty_round >= WRITE_DELAY_ROUNDS

    def write(self, jobs: Sequence[Job]) -> list[tuple[ConsumeQueue, OSError]]:
        """Write every job's entries; return the queues whose write failed, with the error.

        An exception other than OSError (a failpoint's) is raised once every thread is done.
        """
        creating: list[Job] = []
        others: list[Job] = []
        if self.thread_count > 1 and len(jobs) >= PARALLEL_JOBS_MIN:
            for job in jobs:
                (creating if creates_files(job[0], job[1], len(job[2])) else others).append(job)
        if len(creating) < PARALLEL_JOBS_MIN:
            outcomes = [self._drain(iter((jobs,)), threading.Lock())]
        else:
            outcomes = self._write_in_threads(creating, others)
        failures: list[tuple[ConsumeQueue, OSError]] = []
        for outcome in outcomes:
            self._unsynced_paths.update(outcome.log.paths)
            self._unsynced_directories.update(outcome.log.directories)
            failures += outcome.failed
        _report_failures(failures, self._failures_logged_at)
        for outcome in outcomes:
            if outcome.error is not None:
                raise outcome.error
        return failures

    def _write_in_threads(self, creating: list[Job], others: list[Job]) -> list[_Outcome]:
        """Helper threads take chunks of the creating jobs; this thread first writes the others.

        Only the creating jobs are worth other threads: a write into an existing file is a
        few microseconds of system calls, less than what handing the GIL back and forth
        between threads costs, so those stay on one thread.
        """
        helper_count = min(self.thread_count - 1, len(creating) // CHUNK_JOBS)
        chunks = iter(_spread_chunks(creating, helper_count + 1))
        chunk_lock = threading.Lock()
        outcomes = [_Outcome() for _ in range(helper_count + 1)]
        threads = [
            threading.Thread(
                target=self._drain,
                args=(chunks, chunk_lock, outcome),
                name=f"cq-write-out-{number}",
                daemon=True,
            )
            for number, outcome in enumerate(outcomes[1:], start=1)
        ]
        for thread in threads:
            thread.start()
        try:
            self._drain(iter((others,)), threading.Lock(), outcomes[0])
            if outcomes[0].error is None:
                self._drain(chunks, chunk_lock, outcomes[0])
        finally:
            for thread in threads:
                thread.join()
        return outcomes

    @staticmethod
    def _drain(
        chunks: Iterator[Sequence[Job]], chunk_lock: threading.Lock, outcome: _Outcome | None = None
    ) -> _Outcome:
        """Write chunks until none is left (on the calling thread or a helper thread)."""
        if outcome is None:
            outcome = _Outcome()
        log, failed = outcome.log, outcome.failed
        try:
            while True:
                with chunk_lock:
                    chunk = next(chunks, None)
                if chunk is None:
                    return outcome
                for queue, queue_offset, data in chunk:
                    try:
                        write_entries(queue, queue_offset, data, log)
                    except OSError as exc:
                        failed.append((queue, exc))
        except BaseException as exc:  # raised again by write() on the calling thread
            outcome.error = exc
            return outcome

    def sync(self) -> None:
        """Make every file written since the last sync durable (flush_lock held)."""
        paths, directories = self._unsynced_paths, self._unsynced_directories
        self._unsynced_paths, self._unsynced_directories = set(), set()
        try:
            if len(paths) > SYNC_EACH_FILE_MAX:
                sync_filesystem(self._root)
                return
            for path in paths:
                _fdatasync(path)
            for directory in directories:
                fsync_directory(Path(directory))
        except BaseException:
            self._unsynced_paths |= paths
            self._unsynced_directories |= directories
            raise


def creates_files(queue: ConsumeQueue, queue_offset: int, data_bytes: int) -> bool:
    """Whether writing these entries creates (or first sizes) a file or the queue's directory.

    Such a write costs tens of microseconds of filesystem metadata work, against a few for
    a write into a file the queue already sized: the write-out spreads the former over its
    threads.
    """
    if not queue.directory_ready:
        return True
    in_file_entries = queue_offset % queue.entries_per_file
    if queue_offset - in_file_entries != queue.sized_file_start:
        return True
    return in_file_entries * ENTRY_BYTES + data_bytes > queue.file_bytes


def write_entries(queue: ConsumeQueue, queue_offset: int, data: bytearray, log: WriteLog) -> None:
    """Write a queue's entries from ``queue_offset`` to its files; note what changed in ``log``.

    Runs on a write-out thread, without the store lock; the caller holds flush_lock.
    """
    entries_per_file = queue.entries_per_file
    in_file_entries = queue_offset % entries_per_file
    if (
        queue_offset - in_file_entries == queue.sized_file_start
        and in_file_entries * ENTRY_BYTES + len(data) <= queue.file_bytes
    ):
        # The steady state: every entry goes to the file the queue last wrote.
        failpoints.hit("consume_queue.before_write")
        queue.files.write(queue.sized_file_path, data, in_file_entries * ENTRY_BYTES)
        log.paths.append(queue.sized_file_path)
        return
    if not queue.directory_ready:
        make_queue_directory(queue.directory, log)
        queue.directory_ready = True
    position = 0
    while position < len(data):
        current = queue_offset + position // ENTRY_BYTES
        in_file_entries = current % entries_per_file
        file_start = current - in_file_entries
        count = min((entries_per_file - in_file_entries) * ENTRY_BYTES, len(data) - position)
        chunk = data if count == len(data) else data[position : position + count]
        failpoints.hit("consume_queue.before_write")
        if file_start == queue.sized_file_start:
            path = queue.sized_file_path
            queue.files.write(path, chunk, in_file_entries * ENTRY_BYTES)
        else:
            path = queue.path_of(current)
            if create_and_write(path, queue.file_bytes, chunk, in_file_entries * ENTRY_BYTES):
                log.directories.append(queue.directory)
            queue.sized_file_start, queue.sized_file_path = file_start, path
        log.paths.append(path)
        position += count


LOCK_HOLD_QUEUES = 256
"""Queues taken or published per hold of the store lock (well under a millisecond of Python)."""


def _lock_chunks(items: list[_Item]) -> Iterator[list[_Item]]:
    for start in range(0, len(items), LOCK_HOLD_QUEUES):
        yield items[start : start + LOCK_HOLD_QUEUES]


def _let_waiters_in() -> None:
    """Give up the GIL for a moment between two holds of the store lock.

    A thread that releases a lock and takes it again at once, still holding the GIL, nearly
    always wins the race against a thread woken to take it: the event loop's request would wait
    for every chunk anyway. Sleeping lets the woken thread run first.
    """
    time.sleep(0)


def _publish(jobs: list[Job], failed: set[ConsumeQueue], dirty: set[ConsumeQueue]) -> int:
    """Advance what the files hold (store lock held); return the entries written."""
    written = 0
    for queue, queue_offset, data in jobs:
        queue.first_dirty_round = 0
        if queue in failed:
            dirty.add(queue)
            continue
        entry_count = queue.mark_written(queue_offset, len(data))
        written += entry_count
        if queue.max_queue_offset > queue.written_queue_offset:
            dirty.add(queue)  # entries arrived while the file was written
    return written


def _spread_chunks(jobs: list[Job], thread_count: int) -> list[list[Job]]:
    """Chunks of the jobs sorted by directory, in an order that keeps the threads apart.

    The sorted chunks are cut into one run per thread, and the list takes one chunk of each
    run in turn: the threads, taking chunks in turn, then work in different topic
    directories, where their mkdirs do not wait for each other's lock on the parent.
    """
    jobs.sort(key=_job_directory)
    chunks = [jobs[start : start + CHUNK_JOBS] for start in range(0, len(jobs), CHUNK_JOBS)]
    run_chunks = -(-len(chunks) // thread_count)
    return [
        chunks[run * run_chunks + step]
        for step in range(run_chunks)
        for run in range(thread_count)
        if run * run_chunks + step < len(chunks)
    ]


def _job_directory(job: Job) -> str:
    return job[0].directory


def _report_failures(failures: list[tuple[ConsumeQueue, OSError]], logged_at: list[float]) -> None:
    """Log failed writes in one line, at most once a minute (a full disk fails every queue, every round).

    ``logged_at`` holds the writer's last such line (monotonic seconds).
    """
    if not failures:
        return
    now = time.monotonic()
    if now - logged_at[0] < _FAILURE_LOG_INTERVAL_S:
        return
    logged_at[0] = now
    queue, error = failures[0]
    _log.error(
        "writing %d consume queues failed (retried at every write-out, logged once a minute); first: %s/%d: %s",
        len(failures),
        queue.topic,
        queue.queue_id,
        error,
    )


def _fdatasync(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return  # deleted since it was written (retention, a dropped topic)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    """libc's syncfs(2), or None where the platform has none."""
    try:
        function: Callable[[int], int] = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    return function


def sync_filesystem(path: str) -> None:
    """Write back every dirty page and inode of the filesystem holding ``path``; wait for it."""
    syncfs = _syncfs()
    if syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if syncfs(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"syncfs of the filesystem holding {path} failed: {os.strerror(error)}")
    finally:
        os.close(fd)
