"""The CommitLog warmer: pages faulted in ahead of the writer (see ``commit_log``'s "Warming")."""

from __future__ import annotations

import logging
import mmap
import threading
from typing import TYPE_CHECKING

from orbitmq.store._fs import DiskFullError
from orbitmq.store.mapped_file import MappedFile

if TYPE_CHECKING:
    from orbitmq.store.commit_log import CommitLog

_log = logging.getLogger(__name__)


class CommitLogWarmer:
    """Keeps ``window_bytes`` past the log's write position faulted in (see the module docstring).

    The thread sleeps until a write reaches the last segment's ``warm_mark`` (half a window
    before the populated end), then populates up to a window past the write position, one
    ``chunk_bytes`` madvise at a time, each chunk's blocks allocated first (a full disk ends
    the round, and the next write past the mark starts another). Populated pages hold zeros until written; flushes
    sync only written ranges, so they are not written back early. A kernel without
    MADV_POPULATE_WRITE (before 5.14) ends the thread at its first attempt: writes then
    fault pages in themselves, as they do without a warmer.
    """

    def __init__(self, commit_log: CommitLog, window_bytes: int, chunk_bytes: int = 2 << 20) -> None:
        self._commit_log = commit_log
        self._window = max(window_bytes, mmap.PAGESIZE) & ~(mmap.PAGESIZE - 1)
        self._chunk = min(max(chunk_bytes, mmap.PAGESIZE) & ~(mmap.PAGESIZE - 1), self._window)
        self._wake = threading.Event()
        self._stopping = False
        self.populated_bytes = 0  # in all, for tests and metrics
        self.disk_full_rounds = 0  # rounds that stopped because the disk was full
        self._thread = threading.Thread(target=self._run, name="orbitmq-commit-log-warm", daemon=True)

    def start(self) -> None:
        """Attach to the log (new segments get a warm mark) and start the thread."""
        last = self._commit_log.segments.last()
        if last is not None:
            last.warm_mark = 0
        self._commit_log.wake_warmer = self._wake.set
        self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            segment = self._commit_log.segments.last()
            if segment is None:
                continue
            try:
                if not self._warm(segment):
                    _log.info("commit-log warming is not available here (MADV_POPULATE_WRITE)")
                    self._commit_log.wake_warmer = None
                    return
            except DiskFullError:
                # Nothing is faulted in without its blocks: the writer allocates what it
                # needs itself (and refuses puts while the disk is full); warm again later.
                segment.warm_mark = segment.wrote_position + self._window // 2
                self.disk_full_rounds += 1
            except OSError:
                _log.exception("commit-log warming of %s failed; it stops", segment.path)
                self._commit_log.wake_warmer = None
                return

    def _warm(self, segment: MappedFile) -> bool:
        """Populate up to a window past ``segment``'s write position; False when unsupported."""
        size = segment.size_bytes
        position = max(segment.populated_position, segment.wrote_position & ~(mmap.PAGESIZE - 1))
        segments = self._commit_log.segments
        while not self._stopping and segments.last() is segment:
            target = min(segment.wrote_position + self._window, size)
            if position >= target:
                break
            page = mmap.PAGESIZE
            step = min(self._chunk, (target - position + page - 1) // page * page, size - position)
            if not segment.populate(position, step):
                return segment.buffer.closed  # a segment closed meanwhile is no failure
            position += step
            segment.populated_position = position
            self.populated_bytes += step
        # Woken again once writes have used half of what is populated ahead of them.
        mark = position - self._window // 2
        if position < size:
            segment.warm_mark = max(mark, segment.wrote_position + 1)
            if segment.wrote_position >= segment.warm_mark:
                self._wake.set()  # the writer passed it while this was being set
        return True

    def stop(self) -> None:
        """End the thread (waits for the chunk in progress) and detach from the log."""
        self._commit_log.wake_warmer = None
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
