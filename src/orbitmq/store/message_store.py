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

A put on a store that is not open answers SERVICE_NOT_AVAILABLE; reads and lookups on a
store that is not open raise StoreClosedError (API misuse by the caller).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from orbitmq.errors import LocalProtocolError, StoreClosedError
from orbitmq.model.message import SysFlag
from orbitmq.protocol.message_codec import (
    BLANK_RECORD_MIN_BYTES,
    MAX_TOPIC_BYTES,
    body_crc32,
    host_bytes,
    pack_stored_message_into,
    stored_message_size,
)
from orbitmq.protocol.properties import MAX_PROPERTIES_BYTES, encode_properties
from orbitmq.store._fs import failpoints
from orbitmq.store.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from orbitmq.store.commit_log import CommitLog, CommitLogFlusher
from orbitmq.store.config import FlushDiskType, StoreConfig, delay_levels_ms
from orbitmq.store.consume_queue import ENTRY, ConsumeQueue, ConsumeQueueTable
from orbitmq.store.dispatch import Dispatcher, index_keys, is_indexed, record_has_key
from orbitmq.store.index_service import IndexService
from orbitmq.store.recovery import RecoveryReport, recover
from orbitmq.store.retention import Housekeeper, disk_used_percent, segments_to_delete

_log = logging.getLogger(__name__)


class PutStatus(Enum):
    """Outcome of a put."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # set by the broker when flush_future gives False
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"  # a new segment could not be created
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"  # body, topic or batch breaks a size or naming rule
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"  # property string over 32767 bytes
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # the store is not open
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass(slots=True)
class PutMessageRequest:
    """One message as the broker hands it to the store (RocketMQ's MessageExtBrokerInner)."""

    topic: str
    queue_id: int
    body: bytes
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int | None = None  # None: from properties["TAGS"] (delivery time for SCHEDULE_TOPIC_XXXX)


@dataclass(slots=True)
class PutResult:
    """Outcome of a put; offsets are those of the first (or only) message."""

    status: PutStatus
    commit_log_offsets: list[int]
    queue_offset: int
    store_timestamp: int
    wrote_bytes: int
    flush_future: Future[bool] | None
    remark: str = ""


class GetStatus(Enum):
    """Outcome of :meth:`MessageStore.get_messages` (remoting-protocol §2.5)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"  # entries scanned, none passed the tag filter
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"  # entries point below the commit-log minimum
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"  # the entries could not be read
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"  # queue_offset > max
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"  # queue_offset == max: nothing new yet
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"  # queue_offset < min
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"  # the queue does not exist
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"  # the queue exists but is empty


@dataclass(slots=True)
class GetResult:
    """Raw stored records of one queue, in queue order."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[bytes | memoryview] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    commit_log_offsets: list[int] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return len(self.buffers)

    @property
    def total_bytes(self) -> int:
        return sum(len(buffer) for buffer in self.buffers)

    def body(self) -> bytes:
        """The records concatenated: a PULL_MESSAGE response body."""
        return b"".join(self.buffers)


# (born host bytes, store host bytes, IPv6 sysFlag bits) of one host pair.
_Hosts = tuple[bytes, bytes, int]
# (request, record size, record tail, sysFlag, hosts) of one validated message.
_Prepared = tuple[PutMessageRequest, int, bytes, int, _Hosts]
# PREPARED (0x4) and ROLLBACK (0xC) share bit 0x4; NOT (0) and COMMIT (0x8) lack it.
_PREPARED_OR_ROLLBACK = SysFlag.TRANSACTION_PREPARED_TYPE


def _failed(status: PutStatus, remark: str) -> PutResult:
    return PutResult(status, [], 0, 0, 0, None, remark)


class MessageStore:
    """A message store over one directory (see the module docstring)."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._open = False
        self._commit_log = CommitLog(config.commit_log_dir, config.commit_log_segment_bytes)
        self._queues = ConsumeQueueTable(
            config.consume_queue_dir,
            config.consume_queue_entries_per_file,
            config.max_open_consume_queue_files,
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
        self._listeners: list[Callable[[str, int, int], None]] = []
        self._hosts: dict[tuple[tuple[str, int], tuple[str, int]], _Hosts] = {}
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._segment_bytes = config.commit_log_segment_bytes
        self._flusher: CommitLogFlusher | None = None
        self._housekeeper: Housekeeper | None = None
        self._checkpoint = Checkpoint()
        self.recovery_report: RecoveryReport | None = None

    def _queue_load_bounds(self) -> tuple[int, int]:
        end = self._recovered_end_offset
        return self._commit_log.min_offset, self._commit_log.max_offset if end is None else end

    # -- lifecycle ----------------------------------------------------------------------------

    def open(self) -> None:
        """Load the directory, recover (clean or crash path) and start the store threads."""
        if self._open:
            return
        root = Path(self.config.store_path_root_dir)
        root.mkdir(parents=True, exist_ok=True)
        clean_shutdown = not self.config.abort_path.exists()
        self.config.abort_path.touch()
        checkpoint = read_checkpoint(self.config.checkpoint_path)
        rebuild_all = not self.config.consume_queue_dir.is_dir()
        self.config.consume_queue_dir.mkdir(exist_ok=True)
        self._commit_log.load()
        self._queues.scan_disk()
        if self._index is not None:
            self._index.load(clean_shutdown)
        with self._queues.flush_lock, self._lock:
            self.recovery_report = recover(
                self._commit_log, self._dispatcher, checkpoint, clean_shutdown, rebuild_all
            )
            self._dispatched_offset = self._recovered_end_offset = self._commit_log.max_offset
        self._checkpoint = checkpoint or Checkpoint()
        self._flusher = CommitLogFlusher(
            self._commit_log,
            self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH,
            self.config.flush_interval_commit_log_ms,
            self.config.sync_flush_timeout_ms,
        )
        self._flusher.start()
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
        # Final commit-log flush; puts still waiting on it resolve.
        if self._flusher is not None:
            self._flusher.stop()
        # Every buffered ConsumeQueue entry to disk, then the checkpoint.
        self.flush_consume_queues(thorough=True)
        with self._lock:
            self._commit_log.close()
            self._queues.close()
        if self._index is not None:
            self._index.close()
        self.config.abort_path.unlink(missing_ok=True)

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def store_path(self) -> Path:
        return Path(self.config.store_path_root_dir)

    def add_arrival_listener(self, callback: Callable[[str, int, int], None]) -> None:
        """Call ``callback(topic, queue_id, max_queue_offset)`` after each put, on the putting thread."""
        self._listeners.append(callback)

    # -- put ----------------------------------------------------------------------------------

    def put_message(self, request: PutMessageRequest) -> PutResult:
        """Append one message (see :meth:`put_messages`; this is its one-message fast path)."""
        if not self._open:
            return _failed(PutStatus.SERVICE_NOT_AVAILABLE, f"store {self.store_path} is not open")
        prepared = self._prepare((request,))
        if isinstance(prepared, PutResult):
            return prepared
        _, size, tail, sys_flag, hosts = prepared[0]
        if size + BLANK_RECORD_MIN_BYTES > self._segment_bytes:
            return self.put_messages([request])  # the batch path words the refusal
        try:
            with self._lock:
                if not self._open:
                    return _failed(PutStatus.SERVICE_NOT_AVAILABLE, f"store {self.store_path} is closing")
                queue = self._queues.get_or_create(request.topic, request.queue_id)
                store_timestamp = time.time_ns() // 1_000_000
                segment = self._commit_log.reserve(size)
                position = segment.wrote_position
                commit_log_offset = segment.start_offset + position
                in_queue = not sys_flag & _PREPARED_OR_ROLLBACK
                queue_offset = queue.max_queue_offset if in_queue else 0
                failpoints.hit("commit_log.before_write")
                end = pack_stored_message_into(
                    segment.buffer, position, size, body_crc32(request.body), request.queue_id, request.flag,
                    queue_offset, commit_log_offset, sys_flag, request.born_timestamp,
                    hosts[0], request.born_host[1], store_timestamp, hosts[1], request.store_host[1],
                    request.reconsume_times, request.prepared_transaction_offset, request.body, tail,
                )  # fmt: skip
                CommitLog.commit(segment, end)
                self._dispatch_new(queue, prepared, [commit_log_offset], queue_offset, store_timestamp)
                self._dispatched_offset = commit_log_offset + size
                max_queue_offset = queue.max_queue_offset
        except OSError as exc:
            _log.exception("put to %s/%d failed", request.topic, request.queue_id)
            return _failed(PutStatus.CREATE_MAPPED_FILE_FAILED, f"{request.topic}/{request.queue_id}: {exc}")
        result = PutResult(PutStatus.PUT_OK, [commit_log_offset], queue_offset, store_timestamp, size, None)
        if self._sync_flush and self._flusher is not None:
            result.flush_future = self._flusher.request(commit_log_offset + size)
        for listener in self._listeners:
            listener(request.topic, request.queue_id, max_queue_offset)
        return result

    def put_messages(self, requests: list[PutMessageRequest]) -> PutResult:
        """Append messages of one topic and queue as one contiguous write.

        They get consecutive queue offsets; the result carries every commit-log offset and
        the first queue offset. Invalid input is a status (MESSAGE_ILLEGAL,
        PROPERTIES_SIZE_EXCEEDED) with a remark, never an exception.
        """
        if not self._open:
            return _failed(PutStatus.SERVICE_NOT_AVAILABLE, f"store {self.store_path} is not open")
        if not requests:
            return _failed(PutStatus.MESSAGE_ILLEGAL, "empty batch")
        prepared = self._prepare(requests)
        if isinstance(prepared, PutResult):
            return prepared
        total_bytes = sum(record[1] for record in prepared)
        if total_bytes + BLANK_RECORD_MIN_BYTES > self.config.commit_log_segment_bytes:
            return _failed(
                PutStatus.MESSAGE_ILLEGAL,
                f"{total_bytes} bytes do not fit one commit-log segment of {self.config.commit_log_segment_bytes}",
            )
        first = requests[0]
        try:
            with self._lock:
                if not self._open:
                    return _failed(PutStatus.SERVICE_NOT_AVAILABLE, f"store {self.store_path} is closing")
                result, max_queue_offset = self._append(prepared, total_bytes)
        except OSError as exc:
            _log.exception("put to %s/%d failed", first.topic, first.queue_id)
            return _failed(PutStatus.CREATE_MAPPED_FILE_FAILED, f"{first.topic}/{first.queue_id}: {exc}")
        if self._sync_flush and self._flusher is not None:
            result.flush_future = self._flusher.request(result.commit_log_offsets[-1] + prepared[-1][1])
        for listener in self._listeners:
            listener(first.topic, first.queue_id, max_queue_offset)
        return result

    def _prepare(self, requests: Sequence[PutMessageRequest]) -> list[_Prepared] | PutResult:
        """Validate and pre-encode what does not depend on offsets: sizes, flags, record tails."""
        first = requests[0]
        topic_bytes = first.topic.encode("utf-8")
        if len(topic_bytes) > MAX_TOPIC_BYTES or not topic_bytes:
            return _failed(PutStatus.MESSAGE_ILLEGAL, f"topic {first.topic!r} must be 1..127 bytes")
        topic_len = len(topic_bytes)
        body_max = self.config.max_message_size_bytes
        prepared: list[_Prepared] = []
        for request in requests:
            if request.topic != first.topic or request.queue_id != first.queue_id:
                return _failed(PutStatus.MESSAGE_ILLEGAL, f"a batch must target one queue ({first.topic})")
            body_len = len(request.body)
            if body_len > body_max:
                return _failed(
                    PutStatus.MESSAGE_ILLEGAL,
                    f"body of {body_len} bytes exceeds {body_max} ({first.topic}/{first.queue_id})",
                )
            try:
                properties_bytes = encode_properties(request.properties).encode("utf-8")
                hosts = self._hosts.get((request.born_host, request.store_host))
                if hosts is None:
                    hosts = self._resolve_hosts(request.born_host, request.store_host)
            except LocalProtocolError as exc:
                return _failed(PutStatus.MESSAGE_ILLEGAL, f"{first.topic}: {exc}")
            properties_len = len(properties_bytes)
            if properties_len > MAX_PROPERTIES_BYTES:
                return _failed(
                    PutStatus.PROPERTIES_SIZE_EXCEEDED,
                    f"properties of {properties_len} bytes exceed {MAX_PROPERTIES_BYTES} ({first.topic})",
                )
            sys_flag = request.sys_flag | hosts[2]
            tail = bytes((topic_len,)) + topic_bytes + properties_len.to_bytes(2, "big") + properties_bytes
            size = stored_message_size(body_len, topic_len, properties_len, sys_flag)
            prepared.append((request, size, tail, sys_flag, hosts))
        return prepared

    def _resolve_hosts(self, born_host: tuple[str, int], store_host: tuple[str, int]) -> _Hosts:
        born_bytes, store_bytes = host_bytes(born_host[0]), host_bytes(store_host[0])
        flags = (SysFlag.BORNHOST_V6 if len(born_bytes) == 16 else 0) | (
            SysFlag.STOREHOST_V6 if len(store_bytes) == 16 else 0
        )
        hosts = (born_bytes, store_bytes, flags)
        if len(self._hosts) > 4096:
            self._hosts.clear()
        self._hosts[(born_host, store_host)] = hosts
        return hosts

    def _append(self, prepared: list[_Prepared], total_bytes: int) -> tuple[PutResult, int]:
        """Pack, publish and dispatch the records (put lock held); also return the new max offset."""
        first = prepared[0][0]
        queue = self._queues.get_or_create(first.topic, first.queue_id)
        store_timestamp = time.time_ns() // 1_000_000
        segment = self._commit_log.reserve(total_bytes)
        buffer = segment.buffer
        base_offset = segment.start_offset
        position = segment.wrote_position
        queue_offset = first_queue_offset = queue.max_queue_offset
        commit_log_offsets: list[int] = []
        failpoints.hit("commit_log.before_write")
        for request, size, tail, sys_flag, hosts in prepared:
            commit_log_offsets.append(base_offset + position)
            in_queue = not sys_flag & _PREPARED_OR_ROLLBACK
            position = pack_stored_message_into(
                buffer, position, size, body_crc32(request.body), request.queue_id, request.flag,
                queue_offset if in_queue else 0, base_offset + position, sys_flag, request.born_timestamp,
                hosts[0], request.born_host[1], store_timestamp, hosts[1], request.store_host[1],
                request.reconsume_times, request.prepared_transaction_offset, request.body, tail,
            )  # fmt: skip
            if in_queue:
                queue_offset += 1
        CommitLog.commit(segment, position)
        self._dispatch_new(queue, prepared, commit_log_offsets, first_queue_offset, store_timestamp)
        self._dispatched_offset = base_offset + position
        result = PutResult(
            PutStatus.PUT_OK, commit_log_offsets, first_queue_offset, store_timestamp, total_bytes, None
        )
        return result, queue.max_queue_offset

    def _dispatch_new(
        self,
        queue: ConsumeQueue,
        prepared: list[_Prepared],
        commit_log_offsets: list[int],
        queue_offset: int,
        store_timestamp: int,
    ) -> None:
        """Buffer the ConsumeQueue entries and index the keys of freshly written records."""
        dispatcher = self._dispatcher
        for (request, size, _, sys_flag, _), commit_log_offset in zip(
            prepared, commit_log_offsets, strict=True
        ):
            if not sys_flag & _PREPARED_OR_ROLLBACK:
                tags = request.tags_code
                if tags is None:
                    tags = dispatcher.tags_code_for(request.topic, request.properties, store_timestamp)
                queue.put(queue_offset, commit_log_offset, size, tags)
                queue_offset += 1
            if is_indexed(sys_flag):
                keys = index_keys(request.properties)
                dispatcher.index_put(request.topic, keys, commit_log_offset, store_timestamp)
        self._queues.dirty.add(queue)

    # -- reads --------------------------------------------------------------------------------

    def _require_open(self) -> None:
        if not self._open:
            raise StoreClosedError(f"store {self.store_path} is not open")

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_msg_nums: int,
        max_total_bytes: int = 256 * 1024,
        tag_filter: Callable[[int], bool] | None = None,
    ) -> GetResult:
        """Up to ``max_msg_nums`` raw records of a queue from ``queue_offset`` (remoting-protocol §2.5).

        ``tag_filter`` receives each entry's tags code; ``next_begin_offset`` is
        ``queue_offset`` plus the entries scanned, matched or not.

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
            scan_max = (
                max_msg_nums if tag_filter is None else max(max_msg_nums, self.config.max_filter_scan_entries)
            )
            entries = queue.read_entries(queue_offset, scan_max)
            result = GetResult(GetStatus.FOUND, queue_offset, min_offset, max_offset)
            if not entries:
                result.status = GetStatus.OFFSET_FOUND_NULL
                result.next_begin_offset = queue_offset + 1
                return result
            self._collect(result, entries, queue_offset, max_msg_nums, max_total_bytes, tag_filter)
            return result

    def _collect(
        self,
        result: GetResult,
        entries: bytes,
        queue_offset: int,
        max_msg_nums: int,
        max_total_bytes: int,
        tag_filter: Callable[[int], bool] | None,
    ) -> None:
        """Fill ``result`` from consume-queue entries (store lock held)."""
        commit_log = self._commit_log
        commit_log_min = commit_log.min_offset
        buffers, queue_offsets, commit_log_offsets = (
            result.buffers,
            result.queue_offsets,
            result.commit_log_offsets,
        )
        scanned = removed = filtered = 0
        total_bytes = 0
        for commit_log_offset, size, tags in ENTRY.iter_unpack(entries):
            if len(buffers) >= max_msg_nums or (buffers and total_bytes + size > max_total_bytes):
                break
            scanned += 1
            if commit_log_offset < commit_log_min or size <= 0:
                removed += 1
                continue
            if tag_filter is not None and not tag_filter(tags):
                filtered += 1
                continue
            record = commit_log.read(commit_log_offset, size)
            if record is None:
                removed += 1
                continue
            buffers.append(record)
            queue_offsets.append(queue_offset + scanned - 1)
            commit_log_offsets.append(commit_log_offset)
            total_bytes += size
        result.next_begin_offset = queue_offset + scanned
        if not buffers:
            result.status = GetStatus.NO_MATCHED_MESSAGE if filtered else GetStatus.MESSAGE_WAS_REMOVING

    def get_max_queue_offset(self, topic: str, queue_id: int) -> int:
        """The next queue offset to be written (0 for an unknown queue)."""
        with self._lock:
            self._require_open()
            queue = self._queues.get(topic, queue_id)
            return queue.max_queue_offset if queue is not None else 0

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
        """Every (topic, queue id) that has a ConsumeQueue."""
        with self._lock:
            self._require_open()
            names = list(self._queues.names())
        return iter(names)

    def delete_topic(self, topic: str) -> None:
        """Drop every ConsumeQueue of ``topic`` (its records stay in the log until retention)."""
        self._require_open()
        with self._queues.flush_lock, self._lock:
            self._queues.delete_topic(topic)

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

    def read_commit_log(self, commit_log_offset: int, size_max: int) -> bytes:
        """Raw log bytes from ``commit_log_offset`` (within one segment), for replication."""
        with self._lock:
            self._require_open()
            return self._commit_log.read_raw(commit_log_offset, size_max)

    def append_commit_log(self, commit_log_offset: int, data: bytes) -> bool:
        """Append replicated bytes at exactly the current end and dispatch the complete records.

        Returns False (and changes nothing) when ``commit_log_offset`` is not the end.
        """
        with self._lock:
            self._require_open()
            if not self._commit_log.append_raw(commit_log_offset, data):
                return False
            if self._dispatched_offset < self._commit_log.min_offset:
                self._dispatched_offset = self._commit_log.min_offset
            self._dispatched_offset, touched = self._dispatcher.dispatch_appended(
                self._commit_log, self._dispatched_offset
            )
        for topic, queue_id, max_offset in touched:
            for listener in self._listeners:
                listener(topic, queue_id, max_offset)
        return True

    # -- background work ----------------------------------------------------------------------

    def flush_consume_queues(self, thorough: bool) -> None:
        """Write buffered ConsumeQueue entries; ``thorough`` also fsyncs and moves the checkpoint."""
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
