"""MessageStore: the facade the broker uses to put, read and look up messages.

Threading. Public methods may be called from any thread (the broker's event loop, its
executors). One lock serialises puts, reads and structural changes; it is held only for
memory work (copying records into the mapped CommitLog, buffering ConsumeQueue entries,
slicing records out), never across an fsync. Disk waits happen on the store's own
threads: the CommitLog flusher and the housekeeping thread, which writes buffered
ConsumeQueue entries, advances the checkpoint and runs retention.

A put is complete once it returns: its records are readable and dispatched (ConsumeQueue
entries are buffered in memory and written to their files in the background). Under
SYNC_FLUSH its ``flush_future`` resolves True once the records are on disk (False on
timeout); under ASYNC_FLUSH it is None. Reads return raw stored records (remoting-protocol
§3.1) sliced from the log, never re-encoded.

Request and result types live in ``results.py`` (re-exported here) and the encoding and
packing of records in ``put_path.py``. This class holds the lifecycle, puts and reads; its
fields and background work (write-out, checkpoint, retention) are ``store_base.StoreBase``'s,
its offsets and replication (append, cut, refuse puts) ``replica_log.ReplicaLog``'s.

A put on a store that is not open answers SERVICE_NOT_AVAILABLE; reads and lookups on a
store that is not open raise StoreClosedError (API misuse by the caller).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from orbitmq.errors import StoreError
from orbitmq.protocol.message_codec import BLANK_RECORD_MIN_BYTES
from orbitmq.store._fs import DiskFullError, failpoints
from orbitmq.store.batch_put import BatchPut, PreparedBatch, prepare_batch
from orbitmq.store.checkpoint import Checkpoint, read_checkpoint
from orbitmq.store.commit_log_flush import CommitLogFlusher
from orbitmq.store.commit_log_warmer import CommitLogWarmer
from orbitmq.store.config import FlushDiskType
from orbitmq.store.dir_lock import lock_store_dir
from orbitmq.store.dispatch import record_has_key
from orbitmq.store.put_path import PreparedRequests, dispatch_new, pack_one
from orbitmq.store.read_path import RecordFilter, collect_records
from orbitmq.store.recovery import recover
from orbitmq.store.replica_log import ReplicaLog
from orbitmq.store.results import (
    AppendResult,
    AppendStatus,
    GetResult,
    GetStatus,
    PutMessageRequest,
    PutResult,
    PutStatus,
    failed_put,
)
from orbitmq.store.retention import Housekeeper
from orbitmq.store.store_base import open_queue_files_limit

_log = logging.getLogger(__name__)

__all__ = [
    "AppendResult",
    "AppendStatus",
    "GetResult",
    "GetStatus",
    "MessageStore",
    "PutMessageRequest",
    "PutResult",
    "PutStatus",
    "open_queue_files_limit",
]


class MessageStore(ReplicaLog):
    """A message store over one directory (see the module docstring)."""

    # -- lifecycle ----------------------------------------------------------------------------

    def open(self) -> None:
        """Load the directory, recover (clean or crash path) and start the store threads."""
        if self._open:
            return
        root = Path(self.config.store_path_root_dir)
        # First of all: a second process on this directory must not recover it, nor later
        # remove the abort marker of the one running.
        self._dir_lock = lock_store_dir(root)
        try:
            self._open_locked()
        except BaseException:
            self._dir_lock.release()
            raise

    def _open_locked(self) -> None:
        self.disk.check()  # a store opened on a full disk refuses puts from the first one
        clean_shutdown = not self.config.abort_path.exists()
        self.config.abort_path.touch()
        checkpoint = read_checkpoint(self.config.checkpoint_path)
        manifest = self._manifest.load()
        rebuild_all = not self.config.consume_queue_dir.is_dir()
        self.config.consume_queue_dir.mkdir(exist_ok=True)
        self._commit_log.load()
        self._queues.scan_disk()
        if self._index is not None:
            self._index.load(clean_shutdown)
        with self._queues.flush_lock, self._lock:
            self.recovery_report = recover(
                self._commit_log, self._dispatcher, checkpoint, clean_shutdown, rebuild_all, manifest
            )
            self._dispatched_offset = self._recovered_end_offset = self._commit_log.max_offset
        report = self.recovery_report
        found_losses = report.lost_queues or report.rebuilt_queues or report.index_rebuilt
        if manifest is not None and not found_losses:
            # Queues not loaded yet load from the bounds close() wrote, when they still hold.
            self._queues.known_bounds = manifest.trusted_bounds(
                clean_shutdown, self._commit_log.min_offset, self._recovered_end_offset
            )
        # The manifest now describes what recovery left (queues rebuilt, cut or gone).
        self._manifest.recovered(self._recovered_end_offset)
        with self._queues.flush_lock:
            self._manifest.save(self._queues, self._index, self._commit_log, self._lock, bool(found_losses))
        self._checkpoint = checkpoint or Checkpoint()
        if report.rebuilt_queues or report.index_rebuilt:
            # Make what was rebuilt durable now, not at the first thorough flush.
            self.flush_consume_queues(thorough=True)
        self._flusher = CommitLogFlusher(
            self._commit_log,
            self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH,
            self.config.flush_interval_commit_log_ms,
            self.config.sync_flush_timeout_ms,
        )
        self._flusher.start()
        if self.config.warm_mapped_file_enable:
            self._warmer = CommitLogWarmer(self._commit_log, self.config.warm_mapped_file_window_bytes)
            self._warmer.start()
        self._housekeeper = Housekeeper(self, self.config)
        self._housekeeper.start()
        self._open = True

    def close(self) -> None:
        """Flush everything, stop the threads, write the checkpoint, remove the abort marker."""
        if not self._open:
            return
        # Stop retention first: it needs the store open.
        if self._housekeeper is not None:
            self._housekeeper.stop()
        # Refuse new puts and reads; one already inside the lock finishes first.
        with self._lock:
            self._open = False
            self._moved = None
        if self._warmer is not None:
            self._warmer.stop()
            self._warmer = None
        # Final commit-log flush; puts still waiting on it resolve.
        if self._flusher is not None:
            self._flusher.stop()
        # Every buffered ConsumeQueue entry to disk, then the checkpoint and the exact manifest.
        try:
            self.flush_consume_queues(thorough=True, final=True)
            complete = True
        except (OSError, StoreError) as exc:
            # A full disk, say: the commit log is flushed, and the next open recovers what
            # could not be written from it, as after a crash (the abort marker stays).
            _log.error("closing %s: %s; the next start recovers from the commit log", self.store_path, exc)
            complete = False
        with self._lock:
            self._commit_log.close()
            self._queues.close()
        if self._index is not None:
            self._index.close()
        if complete:
            self.config.abort_path.unlink(missing_ok=True)
        if self._dir_lock is not None:
            self._dir_lock.release()
            self._dir_lock = None

    # -- put ----------------------------------------------------------------------------------

    def put_message(self, request: PutMessageRequest, wake_flusher: bool = True) -> PutResult:
        """Append one message (see :meth:`put_messages`; this is its one-message fast path)."""
        if not self._open or self._puts_refused is not None or self.disk.refusal is not None:
            return self._refused_put()
        prepared = self._builder.prepare((request,))
        if isinstance(prepared, PutResult):
            return prepared
        size = prepared[0][1]
        if size + BLANK_RECORD_MIN_BYTES > self._segment_bytes:
            return self.put_messages((request,), wake_flusher)  # the batch path words the refusal
        try:
            with self._lock:
                if not self._open:
                    return failed_put(PutStatus.SERVICE_NOT_AVAILABLE, f"store {self.store_path} is closing")
                queue = self._queues.get_or_create(request.topic, request.queue_id)
                store_timestamp = time.time_ns() // 1_000_000
                segment = self._commit_log.reserve(size)
                position = segment.wrote_position
                commit_log_offset = segment.start_offset + position
                queue_offset = queue.max_queue_offset
                failpoints.hit("commit_log.before_write")
                end = pack_one(
                    segment.buffer, position, commit_log_offset, prepared[0], queue_offset, store_timestamp
                )
                self._commit_log.commit(segment, end)
                dispatch_new(self._dispatcher, queue, prepared, [commit_log_offset], store_timestamp)
                self._queues.dirty.add(queue)
                if self._moved is not None:
                    self._moved.add(queue)
                self._dispatched_offset = commit_log_offset + size
                max_queue_offset = queue.max_queue_offset
        except DiskFullError as exc:
            return self._no_space(exc)
        except OSError as exc:
            _log.exception("put to %s/%d failed", request.topic, request.queue_id)
            return failed_put(
                PutStatus.CREATE_MAPPED_FILE_FAILED, f"{request.topic}/{request.queue_id}: {exc}"
            )
        if self._sync_flush and self._flusher is not None:
            flush_future = self._flusher.request(commit_log_offset + size, wake_flusher)
        else:
            flush_future = None
        for listener in self._listeners:
            listener(request.topic, request.queue_id, max_queue_offset)
        return PutResult(
            PutStatus.PUT_OK, [commit_log_offset], queue_offset, store_timestamp, size, flush_future
        )

    def wake_flusher(self) -> None:
        """Tell the flush thread about puts made with ``wake_flusher`` False."""
        if self._flusher is not None:
            self._flusher.wake()

    def flush_here(self, end_offset: int) -> bool:
        """SYNC_FLUSH: flush in the calling thread unless the flush thread is flushing now.

        True once the commit log is durable up to ``end_offset``; False when the flush
        thread was busy, the sync failed, the store is not SYNC_FLUSH or not open: the
        caller waits for its put's ``flush_future`` instead. For a caller with nothing else
        to do meanwhile (a lone put on the broker's event loop), this saves waking the
        flush thread and being woken by it. See :class:`CommitLogFlusher`.
        """
        if not self._sync_flush or self._flusher is None or not self._open:
            return False
        return self._flusher.flush_here(end_offset)

    def put_messages(self, requests: Sequence[PutMessageRequest], wake_flusher: bool = True) -> PutResult:
        """Append messages of one topic and queue as one contiguous write.

        They get consecutive queue offsets; the result carries every commit-log offset and
        the first queue offset. Invalid input is a status (MESSAGE_ILLEGAL,
        PROPERTIES_SIZE_EXCEEDED) with a remark, never an exception.

        Under SYNC_FLUSH the result's ``flush_future`` resolves once the records are on
        disk. With ``wake_flusher`` False the flush thread is not told at once: the caller
        then calls :meth:`flush_here` or :meth:`wake_flusher` (every put method takes it).
        """
        if not self._open or self._puts_refused is not None or self.disk.refusal is not None:
            return self._refused_put()
        if not requests:
            return failed_put(PutStatus.MESSAGE_ILLEGAL, "empty batch")
        prepared = self._builder.prepare(requests)
        if isinstance(prepared, PutResult):
            return prepared
        first = requests[0]
        return self._put_prepared(first.topic, first.queue_id, PreparedRequests(prepared), wake_flusher)

    def put_batch(self, batch: BatchPut, wake_flusher: bool = True) -> PutResult:
        """:meth:`put_messages` for a batch send held as columns (``batch_put.py``).

        The same records, checks and answers as ``put_messages(batch.requests())``, without
        an object per message.
        """
        if not self._open or self._puts_refused is not None or self.disk.refusal is not None:
            return self._refused_put()
        prepared = prepare_batch(self._builder, batch)
        if isinstance(prepared, PutResult):
            return prepared
        return self._put_prepared(batch.topic, batch.queue_id, prepared, wake_flusher)

    def _put_prepared(
        self, topic: str, queue_id: int, prepared: PreparedRequests | PreparedBatch, wake_flusher: bool
    ) -> PutResult:
        total_bytes = prepared.total_bytes
        if total_bytes + BLANK_RECORD_MIN_BYTES > self._segment_bytes:
            return failed_put(
                PutStatus.MESSAGE_ILLEGAL,
                f"{total_bytes} bytes do not fit one commit-log segment of {self._segment_bytes}",
            )
        try:
            with self._lock:
                if not self._open:
                    return failed_put(PutStatus.SERVICE_NOT_AVAILABLE, f"store {self.store_path} is closing")
                result, max_queue_offset = self._append(topic, queue_id, prepared)
        except DiskFullError as exc:
            return self._no_space(exc)
        except OSError as exc:
            _log.exception("put to %s/%d failed", topic, queue_id)
            return failed_put(PutStatus.CREATE_MAPPED_FILE_FAILED, f"{topic}/{queue_id}: {exc}")
        if self._sync_flush and self._flusher is not None:
            end_offset = result.commit_log_offsets[-1] + prepared.last_size
            result.flush_future = self._flusher.request(end_offset, wake_flusher)
        for listener in self._listeners:
            listener(topic, queue_id, max_queue_offset)
        return result

    def _refused_put(self) -> PutResult:
        if self._puts_refused is not None:
            return failed_put(PutStatus.SERVICE_NOT_AVAILABLE, self._puts_refused)
        refusal = self.disk.refusal
        if refusal is not None and self._open:
            return failed_put(PutStatus.SERVICE_NOT_AVAILABLE, refusal)
        return failed_put(PutStatus.SERVICE_NOT_AVAILABLE, f"store {self.store_path} is not open")

    def _no_space(self, error: DiskFullError) -> PutResult:
        """A put refused before a byte was written: the disk has no block for it."""
        self.disk.note_no_space("a put")
        return failed_put(
            PutStatus.SERVICE_NOT_AVAILABLE,
            f"disk full: {error.strerror}; sends are accepted again once space is freed",
        )

    def _append(
        self, topic: str, queue_id: int, prepared: PreparedRequests | PreparedBatch
    ) -> tuple[PutResult, int]:
        """Pack, publish and dispatch the records (put lock held); also return the new max offset."""
        queue = self._queues.get_or_create(topic, queue_id)
        store_timestamp = time.time_ns() // 1_000_000
        total_bytes = prepared.total_bytes
        segment = self._commit_log.reserve(total_bytes)
        base_offset = segment.start_offset
        first_queue_offset = queue.max_queue_offset
        failpoints.hit("commit_log.before_write")
        position, commit_log_offsets = prepared.pack(
            segment.buffer, segment.wrote_position, base_offset, first_queue_offset, store_timestamp
        )
        self._commit_log.commit(segment, position)
        prepared.dispatch(self._dispatcher, queue, commit_log_offsets, store_timestamp)
        self._queues.dirty.add(queue)
        if self._moved is not None:
            self._moved.add(queue)
        self._dispatched_offset = base_offset + position
        result = PutResult(
            PutStatus.PUT_OK, commit_log_offsets, first_queue_offset, store_timestamp, total_bytes, None
        )
        return result, queue.max_queue_offset

    # -- reads --------------------------------------------------------------------------------

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_msg_nums: int,
        max_total_bytes: int = 256 * 1024,
        tag_filter: Callable[[int], bool] | None = None,
        record_filter: RecordFilter | None = None,
        *,
        whole_runs: bool = False,
    ) -> GetResult:
        """Up to ``max_msg_nums`` raw records of a queue from ``queue_offset`` (remoting-protocol §2.5).

        ``tag_filter`` receives each entry's tags code, ``record_filter`` each raw record that
        passed it (a property filter; it runs under the store lock, so it must be pure and
        quick); ``next_begin_offset`` is ``queue_offset`` plus the entries scanned, matched or
        not. ``whole_runs``: records adjacent in the commit log come as one buffer (a pull
        sends them concatenated anyway), and ``record_filter`` is asked about blocks of records
        where they lie (its ``matches_in``; see ``orbitmq.store.read_path``).

        Raises:
            StoreClosedError: the store is not open.
        """
        with self._lock:
            self._require_open()
            queue = self._queues.get(topic, queue_id)
            if queue is None:
                return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
            min_offset, max_offset = queue.min_queue_offset, queue.max_queue_offset
            if max_offset == 0:
                return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
            if queue_offset < min_offset:
                return GetResult(GetStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
            if queue_offset == max_offset:
                return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, queue_offset, min_offset, max_offset)
            if queue_offset > max_offset:
                return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
            filtering = tag_filter is not None or record_filter is not None
            scan_max = max(max_msg_nums, self.config.max_filter_scan_entries) if filtering else max_msg_nums
            entries = queue.read_entries(queue_offset, scan_max)
            result = GetResult(GetStatus.FOUND, queue_offset, min_offset, max_offset)
            if not entries:
                result.status = GetStatus.OFFSET_FOUND_NULL
                result.next_begin_offset = queue_offset + 1
                return result
            collect_records(
                self._commit_log,
                result,
                entries,
                queue_offset,
                max_msg_nums,
                max_total_bytes,
                tag_filter,
                record_filter,
                self.read_limit,
                whole_runs=whole_runs,
            )
            return result

    def get_max_queue_offset(self, topic: str, queue_id: int) -> int:
        """The next queue offset to be written (0 for an unknown queue)."""
        with self._lock:
            self._require_open()
            queue = self._queues.get(topic, queue_id)
            return queue.max_queue_offset if queue is not None else 0

    def get_max_queue_offsets(self, keys: Sequence[tuple[str, int]]) -> list[int]:
        """:meth:`get_max_queue_offset` of each (topic, queue id), under one hold of the lock.

        For a reader of many queues on another thread (a /metrics scrape): taking the lock once
        per queue hands it back and forth with the event loop's own store calls, and a loop
        call that loses that race waits behind the reader's whole pass.
        """
        with self._lock:
            self._require_open()
            table = self._queues
            found = [table.get(topic, queue_id) for topic, queue_id in keys]
            return [queue.max_queue_offset if queue is not None else 0 for queue in found]

    def consume_queue_entries(
        self, topic: str, queue_id: int, queue_offset: int, count_max: int
    ) -> list[tuple[int, int, int]] | None:
        """Up to ``count_max`` consume queue entries (commit-log offset, size, tags code) from
        ``queue_offset`` on, within the readable range; None for a queue the store does not have."""
        with self._lock:
            self._require_open()
            queue = self._queues.get(topic, queue_id)
            if queue is None:
                return None
            start = max(queue_offset, queue.min_queue_offset)
            end = min(queue_offset + max(count_max, 0), queue.max_queue_offset)
            return [queue.entry(offset) for offset in range(start, end)]

    def get_min_queue_offset(self, topic: str, queue_id: int) -> int:
        """The oldest queue offset still readable (0 for an unknown queue)."""
        with self._lock:
            self._require_open()
            queue = self._queues.get(topic, queue_id)
            return queue.min_queue_offset if queue is not None else 0

    def _queue_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        queue = self._queues.get(topic, queue_id)
        if queue is None or not queue.min_queue_offset <= queue_offset < queue.max_queue_offset:
            return -1
        commit_log_offset, size, _ = queue.entry(queue_offset)
        if size <= 0 or commit_log_offset < self._commit_log.min_offset:
            return -1
        return self._commit_log.store_timestamp_at(commit_log_offset)

    def get_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """The store time of one queued message, -1 when there is none."""
        with self._lock:
            self._require_open()
            return self._queue_timestamp(topic, queue_id, queue_offset)

    def get_earliest_store_timestamp(self, topic: str, queue_id: int) -> int:
        """The store time of the oldest readable message of a queue, -1 when there is none."""
        with self._lock:
            self._require_open()
            queue = self._queues.get(topic, queue_id)
            if queue is None:
                return -1
            return self._queue_timestamp(topic, queue_id, queue.min_queue_offset)

    def get_queue_offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after ``timestamp_ms`` (binary search).

        Returns the max queue offset when every message is older, and 0 for an unknown queue.
        """
        with self._lock:
            self._require_open()
            queue = self._queues.get(topic, queue_id)
            if queue is None:
                return 0
            low, high = queue.min_queue_offset, queue.max_queue_offset
            while low < high:
                middle = (low + high) // 2
                if self._queue_timestamp(topic, queue_id, middle) >= timestamp_ms:
                    high = middle
                else:
                    low = middle + 1
            return low

    def read_message(self, commit_log_offset: int, size: int | None = None) -> bytes | None:
        """One raw record by commit-log offset, None when there is no record there."""
        with self._lock:
            self._require_open()
            if size is None:
                return self._commit_log.read_record(commit_log_offset)
            return self._commit_log.read(commit_log_offset, size)

    def query_messages_by_key(
        self, topic: str, key: str, max_num: int, begin_timestamp_ms: int, end_timestamp_ms: int
    ) -> list[bytes]:
        """Raw records of ``topic`` whose UNIQ_KEY or a KEYS token is ``key``, newest first."""
        self._require_open()
        if self._index is None:
            return []
        found: list[bytes] = []
        for commit_log_offset in self._index.query(topic, key, max_num, begin_timestamp_ms, end_timestamp_ms):
            record = self.read_message(commit_log_offset)
            if record is not None and record_has_key(record, topic, key):
                found.append(record)
        return found

    def queues(self) -> Iterator[tuple[str, int]]:
        """Every (topic, queue id) that has a ConsumeQueue, sorted.

        Sorted after the lock is released: with 50,000 queues the sort held the store (so every
        request of the event loop that reads it) for a good part of a second on a loaded machine.
        """
        return iter(sorted(self.queue_set()))

    def queue_set(self) -> set[tuple[str, int]]:
        """Every (topic, queue id) that has a ConsumeQueue, unsorted (a copy).

        For a reader of every queue that needs no order: sorting 50,000 names is one call that
        holds the GIL, so every other thread (the event loop too) waits for all of it.
        """
        with self._lock:
            self._require_open()
            return self._queues.name_set()

    def take_moved_queues(self) -> dict[tuple[str, int], int] | None:
        """The max offset of every queue that moved since the last call; None: read every queue.

        For one reader that keeps each queue's max offset current (a /metrics scrape) without
        reading 50,000 of them each time. None at the first call and after the store changed
        shape (a topic deleted, the log truncated, the store reopened): the caller then reads
        them all (:meth:`queues`, :meth:`get_max_queue_offsets`), and the queues that move from
        this call on come with the next. The lock is held to swap one set; the offsets are read
        after it is released (each at least what it was at the swap).
        """
        with self._lock:
            self._require_open()
            moved, self._moved = self._moved, set()
        if moved is None:
            return None
        return {(queue.topic, queue.queue_id): queue.max_queue_offset for queue in moved}

    def delete_topic(self, topic: str) -> None:
        """Empty every ConsumeQueue of ``topic`` (its records stay in the log until retention).

        Each queue keeps its next queue offset (see ``ConsumeQueueTable.delete_topic``); the
        manifest says so from the next thorough flush on. A crash before it brings the queues
        back from the log, numbered as they were, never mixed with a re-created topic's.
        """
        self._require_open()
        with self._queues.flush_lock, self._lock:
            self._queues.delete_topic(topic)
            self._manifest.forget_topic(topic)
            self._moved = None
