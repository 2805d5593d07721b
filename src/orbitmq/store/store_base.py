"""The state a MessageStore is made of, and its background work: the write-out, the checkpoint,
retention.

``message_store.MessageStore`` is the facade; its state and the subjects that only maintain it
live in the classes it derives from: :class:`StoreBase` here (the fields, and what the store's
housekeeping thread runs), ``replica_log.ReplicaLog`` (offsets, and the log as a replica reads,
appends and cuts it). Threading is the facade's (its module docstring): one lock, ``_lock``,
serialises puts, reads and structural changes, and the ConsumeQueue table's ``flush_lock`` keeps
a write-out and a change of the queues' shape apart.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from orbitmq.errors import StoreClosedError
from orbitmq.store.checkpoint import Checkpoint, write_checkpoint
from orbitmq.store.commit_log import CommitLog
from orbitmq.store.commit_log_flush import CommitLogFlusher
from orbitmq.store.commit_log_warmer import CommitLogWarmer
from orbitmq.store.config import FlushDiskType, StoreConfig, delay_levels_ms
from orbitmq.store.consume_queue import ConsumeQueue, ConsumeQueueTable
from orbitmq.store.dir_lock import StoreDirLock
from orbitmq.store.disk_space import DiskLevel, DiskSpaceMonitor
from orbitmq.store.dispatch import Dispatcher
from orbitmq.store.index_service import IndexService
from orbitmq.store.put_path import RecordBuilder
from orbitmq.store.queue_manifest import ManifestKeeper
from orbitmq.store.recovery import RecoveryReport
from orbitmq.store.retention import Housekeeper, disk_used_percent, segments_to_delete

_log = logging.getLogger(__name__)

__all__ = ["StoreBase", "open_queue_files_limit"]


def open_queue_files_limit(configured: int) -> int:
    """``maxOpenConsumeQueueFiles``, capped at half the process's descriptor limit.

    The other half stays for sockets, CommitLog segments and index files: a host whose soft
    RLIMIT_NOFILE is 1,024 would otherwise run out of descriptors under many queues.
    """
    try:
        import resource
    except ImportError:  # not Unix
        return configured
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or configured <= soft // 2:
        return configured
    limit = max(soft // 2, 1)
    _log.warning(
        "maxOpenConsumeQueueFiles=%d exceeds half the open-file limit (%d); using %d",
        configured,
        soft,
        limit,
    )
    return limit


class StoreBase:
    """The fields of a store over one directory, and its background work (module docstring)."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._open = False
        self._puts_refused: str | None = None
        # Reads never return a record ending past this commit-log offset (None: no limit). The
        # broker of a replicated group sets its confirm offset here (controller mode).
        self.read_limit: int | None = None
        self._commit_log = CommitLog(config.commit_log_dir, config.commit_log_segment_bytes)
        self._queues = ConsumeQueueTable(
            config.consume_queue_dir,
            config.consume_queue_entries_per_file,
            open_queue_files_limit(config.max_open_consume_queue_files),
            self._queue_load_bounds,
        )
        # The log's end right after recovery. A queue first loaded later has on-disk entries
        # from before that moment only, so any pointing past it are from a torn tail, even if
        # new records have since been written over that range.
        self._recovered_end_offset: int | None = None
        self._index: IndexService | None = None
        if config.message_index_enable:
            self._index = IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num)
        self._dispatcher = Dispatcher(self._queues, self._index, delay_levels_ms(config.message_delay_level))
        self._dispatched_offset = 0  # records below it are dispatched
        # Queues whose max offset moved since the last take_moved_queues(); None until that is
        # first called, and again after the store changed shape (its caller then reads every queue).
        self._moved: set[ConsumeQueue] | None = None
        self._listeners: list[Callable[[str, int, int], None]] = []
        self._builder = RecordBuilder(config.max_message_size_bytes)
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._segment_bytes = config.commit_log_segment_bytes
        self._flusher: CommitLogFlusher | None = None
        self._warmer: CommitLogWarmer | None = None
        self._housekeeper: Housekeeper | None = None
        self._checkpoint = Checkpoint()
        self._manifest = ManifestKeeper(Path(config.store_path_root_dir))
        self.recovery_report: RecoveryReport | None = None
        self._dir_lock: StoreDirLock | None = None
        self.disk = DiskSpaceMonitor(Path(config.store_path_root_dir), config)

    def _queue_load_bounds(self) -> tuple[int, int]:
        end = self._recovered_end_offset
        return self._commit_log.min_offset, self._commit_log.max_offset if end is None else end

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def store_path(self) -> Path:
        return Path(self.config.store_path_root_dir)

    def add_arrival_listener(self, callback: Callable[[str, int, int], None]) -> None:
        """Call ``callback(topic, queue_id, max_queue_offset)`` after each put, on the putting thread."""
        self._listeners.append(callback)

    def _require_open(self) -> None:
        if not self._open:
            raise StoreClosedError(f"store {self.store_path} is not open")

    # -- background work ----------------------------------------------------------------------

    def flush_consume_queues(self, thorough: bool, final: bool = False) -> None:
        """Write buffered ConsumeQueue entries; ``thorough`` also fsyncs and moves the checkpoint.

        ``final`` (close, puts already refused) writes the exact manifest, bounds included,
        which the next open may load queues from; a routine thorough flush rewrites it only
        when the store's shape changed.
        """
        with self._queues.flush_lock:
            dispatched = self._dispatched_offset
            self._queues.write_pending(self._lock, force=thorough)
            if not thorough:
                return
            self._queues.sync_written()
            now_ms = time.time_ns() // 1_000_000
            checkpoint = self._checkpoint
            checkpoint.consume_queue_dispatched_offset = dispatched
            checkpoint.consume_queue_flushed_timestamp_ms = now_ms
            if self._index is not None:
                self._index.flush()
            checkpoint.index_dispatched_offset = dispatched
            checkpoint.index_flushed_timestamp_ms = now_ms
            checkpoint.commit_log_flushed_offset = self._commit_log.flushed_offset
            checkpoint.commit_log_flushed_timestamp_ms = now_ms
            write_checkpoint(self.config.checkpoint_path, checkpoint)
            self._manifest.save(
                self._queues, self._index, self._commit_log, self._lock, final=final, exact=final
            )

    def check_disk_space(self) -> DiskLevel:
        """Measure the disk and refuse or accept puts by its level (module ``disk_space``)."""
        return self.disk.check()

    def run_retention(self, now_ms: int, force: bool = False) -> int:
        """Delete expired CommitLog segments (module retention); return how many were deleted.

        ``force`` ignores the deleteWhen hour (the age rule still applies).
        """
        self._require_open()
        with self._queues.flush_lock, self._lock:
            safe_offset = min(self._commit_log.flushed_offset, self._dispatched_offset)
            doomed = segments_to_delete(
                self.config,
                self._commit_log.segments.files,
                now_ms,
                safe_offset,
                force,
                disk_used_percent(self.store_path),
            )
            for segment in doomed:
                self._commit_log.segments.files.remove(segment)
                segment.delete()
            names = list(self._queues.names()) if doomed else []
        if not doomed:
            return 0
        commit_log_min = self._commit_log.min_offset
        for topic, queue_id in names:
            with self._queues.flush_lock, self._lock:
                queue = self._queues.get(topic, queue_id)
                if queue is not None:
                    queue.delete_files_below(commit_log_min)
        if self._index is not None:
            self._index.delete_files_before(commit_log_min)
        _log.info("retention deleted %d commit-log segments; minimum is now %d", len(doomed), commit_log_min)
        return len(doomed)
