"""A store's offsets, and its log as a replica reads, appends and cuts it (``MessageStore``'s part).

A master's replication reads raw log bytes (:meth:`ReplicaLog.read_commit_log`); a slave appends
them at exactly its log's end and dispatches every whole record (:meth:`ReplicaLog.append_commit_log`);
a replica whose log diverged from its new master's cuts its tail first (:meth:`ReplicaLog.truncate_to`);
a slave refuses puts (:meth:`ReplicaLog.refuse_puts`). Threading is the facade's
(``message_store``): the store lock for memory work, both locks for a cut.
"""

from __future__ import annotations

import logging

from orbitmq.store._fs import DiskFullError
from orbitmq.store.raw_records import split_whole_records
from orbitmq.store.results import AppendResult, AppendStatus
from orbitmq.store.store_base import StoreBase

_log = logging.getLogger(__name__)

__all__ = ["ReplicaLog"]


class ReplicaLog(StoreBase):
    """Offsets and replication of a store (module docstring)."""

    # -- offsets and replication --------------------------------------------------------------

    @property
    def max_commit_log_offset(self) -> int:
        return self._commit_log.max_offset

    @property
    def min_commit_log_offset(self) -> int:
        return self._commit_log.min_offset

    @property
    def flushed_commit_log_offset(self) -> int:
        return self._commit_log.flushed_offset

    @property
    def confirm_commit_log_offset(self) -> int:
        """The end of the dispatched (consumable) log; on a slave it lags raw appends."""
        return self._dispatched_offset

    def store_timestamp_at(self, commit_log_offset: int) -> int:
        """STORETIMESTAMP of the message record at ``commit_log_offset``; -1 when none starts there."""
        with self._lock:
            self._require_open()
            if self._commit_log.read_record(commit_log_offset) is None:
                return -1
            return self._commit_log.store_timestamp_at(commit_log_offset)

    def read_commit_log(self, commit_log_offset: int, size_max: int) -> bytes:
        """Raw log bytes from ``commit_log_offset`` (within one segment), for replication."""
        with self._lock:
            self._require_open()
            return self._commit_log.read_raw(commit_log_offset, size_max)

    def append_commit_log(self, commit_log_offset: int, data: bytes | memoryview) -> AppendResult:
        """Append the whole records at the start of replicated ``data`` at exactly the log's end.

        ``data`` may end inside a record (a master's frames are not record-aligned): that
        tail is not appended, and ``appended_bytes`` tells the caller where it starts, to be
        given again with the bytes that complete it (``raw_records``). Every record is checked
        before a byte is written, then dispatched to its ConsumeQueue and the index. An empty
        log accepts a segment-aligned offset as its start (a slave copying from a master's
        oldest segment).
        """
        with self._lock:
            self._require_open()
            log = self._commit_log
            if log.segments.files and commit_log_offset != log.max_offset:
                return AppendResult(
                    AppendStatus.NOT_AT_END,
                    0,
                    f"bytes at commit-log offset {commit_log_offset}, the log ends at {log.max_offset}",
                )
            if not log.segments.files and commit_log_offset % self._segment_bytes:
                return AppendResult(
                    AppendStatus.NOT_AT_END,
                    0,
                    f"an empty log starts at a segment boundary, not at {commit_log_offset}",
                )
            found = split_whole_records(data, commit_log_offset, self._segment_bytes)
            touched: dict[tuple[str, int], int] = {}
            if found.whole_bytes:
                try:
                    log.append_raw(commit_log_offset, memoryview(data)[: found.whole_bytes])
                except DiskFullError as exc:
                    self.disk.note_no_space("replicated bytes")
                    return AppendResult(AppendStatus.DISK_FULL, 0, exc.strerror or "disk full")
                for offset, size, message in found.records:
                    self._dispatcher.redispatch(message, offset, size)
                    queue = self._queues.get(message.topic, message.queue_id)
                    if queue is not None:
                        touched[(message.topic, message.queue_id)] = queue.max_queue_offset
                        if self._moved is not None:
                            self._moved.add(queue)
                self._dispatched_offset = commit_log_offset + found.whole_bytes
        for (topic, queue_id), max_offset in touched.items():
            for listener in self._listeners:
                listener(topic, queue_id, max_offset)
        status = AppendStatus.CORRUPT if found.problem else AppendStatus.APPENDED
        return AppendResult(status, found.whole_bytes, found.problem)

    def truncate_to(self, commit_log_offset: int) -> int:
        """Cut the log, its ConsumeQueues and its index back to ``commit_log_offset``.

        A replica whose log diverged from its new master's (it was master once, with bytes
        nobody acknowledged) drops its tail before it copies again. Crash-safe: the log's tail
        is zeroed and fsynced first, so a crash at any point leaves a log that ends at the cut
        or (recovery's torn-tail path) before nothing else; ConsumeQueue entries past the cut
        are dropped as recovery drops them. Returns the bytes dropped (0: nothing past the cut).
        """
        with self._queues.flush_lock, self._lock:
            self._require_open()
            log = self._commit_log
            end = log.max_offset
            if commit_log_offset >= end:
                return 0
            if commit_log_offset < log.min_offset:
                commit_log_offset = log.min_offset
            log.truncate_after(commit_log_offset)
            for queue in self._queues.loaded():
                queue.truncate_past(commit_log_offset)
            self._moved = None
            # Queues not loaded yet load bounded by the log's end as of now.
            self._queues.known_bounds = {}
            if self._recovered_end_offset is not None:
                self._recovered_end_offset = min(self._recovered_end_offset, commit_log_offset)
            if self._index is not None:
                self._index.truncate_after(commit_log_offset)
            self._dispatched_offset = min(self._dispatched_offset, commit_log_offset)
        self.flush_consume_queues(thorough=True)
        _log.warning(
            "log truncated from %d back to %d (%d bytes dropped)",
            end,
            commit_log_offset,
            end - commit_log_offset,
        )
        return end - commit_log_offset

    def refuse_puts(self, reason: str | None) -> None:
        """Refuse every put with SERVICE_NOT_AVAILABLE and ``reason`` (a slave); None accepts again.

        Replicated appends are not puts: they go on.
        """
        self._puts_refused = reason
