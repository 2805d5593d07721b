"""The list of IndexFiles under ``<store>/index``: rolling, queries across files, recovery and retention.

Files are named by their creation time in UTC, ``yyyyMMddHHmmssSSS``, so that name order is creation
order (RocketMQ uses local time; UTC keeps the order through daylight-saving changes). A new name is
always later than the newest existing one, even when two files are created in the same millisecond.

Invariant: entries are appended in non-decreasing commit-log order, across files too. ``put_keys``
keeps it by ignoring a message whose commit-log offset is below the newest indexed one (RocketMQ's
``buildIndex`` does the same), which also makes re-dispatching already indexed messages harmless. The
invariant is what lets :meth:`IndexService.truncate_after` cut a suffix and
:meth:`IndexService.delete_files_before` drop a prefix.

Recovery. After a clean shutdown every file must be consistent, and a file that is not raises
CorruptRecordError. After an unclean stop each file's header and newest entry are checked (and the
newest file's whole slot table); the first inconsistent file and every file after it are deleted,
since the store re-indexes the commit log past :attr:`IndexService.max_commit_log_offset`. A newest
entry whose slot write was lost is relinked instead of dropped.

Write-behind. The put path hands each put's keys to :meth:`IndexService.put_tokens`, which only
queues them; the queue is written to the files in one run when it holds ``PENDING_KEYS_MAX`` keys,
and before any query, flush, truncation, retention or close, so no caller can observe it. A kill
loses the queue, which is harmless: the files then end before the lost keys, and the store's
recovery re-indexes the commit log from :attr:`IndexService.max_commit_log_offset` as read back
from the files. Runs make a key cost a few array operations (hashing, linking, packing) instead of
a Python loop of struct calls.

Thread safety: every public method takes one lock, so puts (from the store's append path), queries
and retention may come from different threads.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from orbitmq.errors import CorruptRecordError, StoreClosedError
from orbitmq.store._fs import DiskFullError
from orbitmq.store._key_hash import (
    index_key_hash,
    index_key_hashes_prefixed,
    load_numpy,
    topic_prefix_hash,
)
from orbitmq.store.index_file import IndexFile

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

logger = logging.getLogger(__name__)

# Queued keys are written out in one run once this many wait (bounds the memory they hold).
PENDING_KEYS_MAX = 8192
_NO_SPACE_LOG_INTERVAL_S = 60.0

_FILE_NAME = re.compile(r"\d{17}")
_KEY_SEPARATOR = " "


def index_file_name(timestamp_ms: int) -> str:
    """The file name for a file created at ``timestamp_ms``: ``yyyyMMddHHmmssSSS`` in UTC."""
    moment = datetime.fromtimestamp(timestamp_ms // 1000, tz=UTC)
    return f"{moment:%Y%m%d%H%M%S}{timestamp_ms % 1000:03d}"


def _file_name_timestamp_ms(name: str) -> int:
    """The creation time a file name encodes, 0 when it is not a valid date."""
    try:
        moment = datetime.strptime(name[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return 0
    return int(moment.timestamp()) * 1000 + int(name[14:])


class IndexService:
    """Key lookups over the index files of one store directory.

    Args:
        index_dir: the directory of the index files; created when missing.
        hash_slot_num: slots per file (RocketMQ ``maxHashSlotNum``, default 5,000,000).
        index_num: entries per file including the unused entry 0 (``maxIndexNum``, 20,000,000).
    """

    def __init__(self, index_dir: Path, hash_slot_num: int, index_num: int) -> None:
        if hash_slot_num <= 0 or index_num <= 1:
            raise ValueError(
                f"index geometry needs slots > 0 and entries > 1, got {hash_slot_num}, {index_num}"
            )
        self._index_dir = index_dir
        self._hash_slot_num = hash_slot_num
        self._index_num = index_num
        self._lock = threading.Lock()
        self._files: list[IndexFile] = []
        self._loaded = False
        self._max_commit_log_offset = -1  # the newest accepted, queued or written
        self._last_update_timestamp_ms = 0
        # Keys accepted but not yet in the files, one item per put:
        # (topic prefix hash, tokens, their commit-log offsets, store time).
        self._pending: list[tuple[int, list[str], list[int], int]] = []
        self._pending_keys = 0
        # Keys a full disk kept out of the files, hashed, oldest first: written before new ones.
        self._held: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
        self._no_space_logged_at = -_NO_SPACE_LOG_INTERVAL_S

    # -- lifecycle ---------------------------------------------------------------------------

    def load(self, clean_shutdown: bool) -> None:
        """Open the existing files, oldest first.

        Raises:
            CorruptRecordError: after a clean shutdown, when a file is inconsistent.
        """
        load_numpy()
        with self._lock:
            self._index_dir.mkdir(parents=True, exist_ok=True)
            self._close_files()
            self._pending, self._pending_keys, self._held = [], 0, None
            paths = sorted(
                p for p in self._index_dir.iterdir() if p.is_file() and _FILE_NAME.fullmatch(p.name)
            )
            try:
                for position, path in enumerate(paths):
                    if not self._load_file(path, clean_shutdown, is_newest=position == len(paths) - 1):
                        self._drop_paths(paths[position:])
                        break
            except BaseException:
                self._close_files()
                raise
            self._loaded = True
            self._refresh_last_update()

    def _load_file(self, path: Path, clean_shutdown: bool, is_newest: bool) -> bool:
        """Open one file and append it; False when it must be dropped (unclean stop only)."""
        try:
            index_file = IndexFile.open(path, self._hash_slot_num, self._index_num)
        except CorruptRecordError:
            if clean_shutdown:
                raise
            logger.warning("dropping index file %s: wrong size after an unclean stop", path)
            return False
        if not clean_shutdown and index_file.repair_slots():
            logger.info("relinked slots of index file %s written past its header", path)
        problem = index_file.find_problem(check_slots=is_newest and not clean_shutdown)
        if problem is None:
            problem = self._order_problem(index_file)
        if problem is not None:
            index_file.close()
            if clean_shutdown:
                raise CorruptRecordError(f"index file {path}: {problem}")
            logger.warning("dropping index file %s after an unclean stop: %s", path, problem)
            return False
        if not clean_shutdown and index_file.repair_tail():
            logger.info("relinked the newest entry of index file %s", path)
        self._files.append(index_file)
        return True

    def _order_problem(self, index_file: IndexFile) -> str | None:
        newest = self._newest_with_entries()
        if newest is None or index_file.entry_count == 0:
            return None
        if index_file.begin_commit_log_offset < newest.end_commit_log_offset:
            return (
                f"begins at commit-log offset {index_file.begin_commit_log_offset}, "
                f"before the end {newest.end_commit_log_offset} of {newest.path.name}"
            )
        return None

    def _drop_paths(self, paths: list[Path]) -> None:
        for path in paths:
            logger.warning("deleting index file %s", path)
            path.unlink(missing_ok=True)

    def flush(self) -> None:
        """Write every file changed since the last flush to disk."""
        with self._lock:
            if self._loaded:
                self._drain()
            for index_file in self._files:
                index_file.flush()

    def close(self) -> None:
        """Flush and unmap every file; the service can be loaded again afterwards."""
        with self._lock:
            if self._loaded:
                self._drain()
            self._close_files()
            self._loaded = False

    def _close_files(self) -> None:
        for index_file in self._files:
            index_file.close()
        self._files = []

    # -- writes ------------------------------------------------------------------------------

    def put_keys(
        self, topic: str, keys: Iterable[str], commit_log_offset: int, store_timestamp_ms: int
    ) -> None:
        """Index each non-empty key of one message stored at ``commit_log_offset``.

        ``keys`` are the UNIQ_KEY and the KEYS tokens; a key that still contains spaces is split.
        A message below the newest indexed commit-log offset was indexed before and is ignored.
        Rolls to a new file when the newest one is full.

        Raises:
            StoreClosedError: before load() or after close().
        """
        if isinstance(keys, str):
            keys = (keys,)
        self.put_keys_batch(topic, [(keys, commit_log_offset)], store_timestamp_ms)

    def put_keys_batch(
        self, topic: str, keyed: Sequence[tuple[Iterable[str], int]], store_timestamp_ms: int
    ) -> None:
        """:meth:`put_keys` for several messages of one put: (keys, commit-log offset), in log order.

        Raises:
            StoreClosedError: before load() or after close().
        """
        tokens: list[str] = []
        offsets: list[int] = []
        for keys, commit_log_offset in keyed:
            for key in keys:
                for token in key.split(_KEY_SEPARATOR) if _KEY_SEPARATOR in key else (key,):
                    if token:
                        tokens.append(token)
                        offsets.append(commit_log_offset)
        if tokens:
            self.put_tokens(topic, tokens, offsets, store_timestamp_ms)
        else:
            self._require_loaded()

    def put_tokens(self, topic: str, tokens: list[str], offsets: list[int], store_timestamp_ms: int) -> None:
        """Index ``tokens[i]`` (non-empty, no spaces) at commit-log offset ``offsets[i]``, in log order.

        The put path's entry point. The tokens are queued and written to the files in runs of
        many puts (:meth:`_drain`): every read, flush and structural change writes the queue out
        first, so callers never see the difference, and a run costs a few array operations per
        key instead of a loop of struct calls. The lists are kept: the caller must not reuse them.

        Raises:
            StoreClosedError: before load() or after close().
        """
        with self._lock:
            if not self._loaded:
                raise StoreClosedError(f"index service {self._index_dir} is not loaded")
            if offsets[0] < self._max_commit_log_offset:
                kept = [
                    (token, offset)
                    for token, offset in zip(tokens, offsets, strict=True)
                    if offset >= self._max_commit_log_offset
                ]
                if not kept:
                    return
                tokens, offsets = [token for token, _ in kept], [offset for _, offset in kept]
            self._pending.append((topic_prefix_hash(topic), tokens, offsets, store_timestamp_ms))
            self._pending_keys += len(tokens)
            self._max_commit_log_offset = offsets[-1]
            self._last_update_timestamp_ms = store_timestamp_ms
            if self._pending_keys >= PENDING_KEYS_MAX:
                self._drain()

    def write_queued(self) -> None:
        """Write every queued key to the files now (reads and flushes do it anyway)."""
        with self._lock:
            self._require_loaded()
            self._drain()

    def _drain(self) -> None:
        """Write every queued key to the files (lock held).

        On a full disk the keys not written are held (in order) for the next drain, and the
        files end before them: a put never fails for its index, and a restart re-indexes the
        log from the files' end anyway.
        """
        import numpy as np

        pending = self._pending
        held = self._held
        if not pending and held is None:
            return
        self._pending = []
        self._pending_keys = 0
        self._held = None
        tokens: list[str] = []
        offsets: list[int] = []
        for _, put_tokens, put_offsets, _ in pending:
            tokens.extend(put_tokens)
            offsets.extend(put_offsets)
        counts = [len(put[1]) for put in pending]
        prefixes = np.repeat(np.array([put[0] for put in pending], dtype=np.uint64), counts)
        times_ms = np.repeat(np.array([put[3] for put in pending], dtype=np.int64), counts)
        key_hashes = index_key_hashes_prefixed(prefixes, tokens) if tokens else np.empty(0, dtype=np.int64)
        commit_log_offsets = np.asarray(offsets, dtype=np.int64)
        if held is not None:
            key_hashes = np.concatenate((held[0], key_hashes))
            commit_log_offsets = np.concatenate((held[1], commit_log_offsets))
            times_ms = np.concatenate((held[2], times_ms))
        written = self._put_hashed(key_hashes, commit_log_offsets, times_ms)
        if written < len(key_hashes):
            self._held = (key_hashes[written:], commit_log_offsets[written:], times_ms[written:])

    def _put_hashed(
        self,
        key_hashes: npt.NDArray[np.int64],
        commit_log_offsets: npt.NDArray[np.int64],
        store_timestamps_ms: npt.NDArray[np.int64],
    ) -> int:
        """Append (key hash, commit-log offset, store time) entries, rolling to new files as they fill.

        Returns how many were written: all of them unless the disk is full.
        """
        files = self._files
        position = 0
        try:
            if files:
                position = files[-1].put_hashes(key_hashes, commit_log_offsets, store_timestamps_ms, 0)
            while position < len(key_hashes):
                # Either no file yet or the newest one is full; a fresh file always has room.
                files.append(self._create_file())
                position = files[-1].put_hashes(key_hashes, commit_log_offsets, store_timestamps_ms, position)
        except DiskFullError as exc:
            now = time.monotonic()
            if now - self._no_space_logged_at >= _NO_SPACE_LOG_INTERVAL_S:
                self._no_space_logged_at = now
                logger.error(
                    "%s: %d keys wait to be indexed until space is freed (queries miss them meanwhile)",
                    exc.strerror,
                    len(key_hashes) - position,
                )
        return position

    def _create_file(self) -> IndexFile:
        timestamp_ms = time.time_ns() // 1_000_000
        if self._files:
            timestamp_ms = max(timestamp_ms, _file_name_timestamp_ms(self._files[-1].path.name) + 1)
        path = self._index_dir / index_file_name(timestamp_ms)
        while path.exists():
            timestamp_ms += 1
            path = self._index_dir / index_file_name(timestamp_ms)
        return IndexFile.create(path, self._hash_slot_num, self._index_num)

    def truncate_after(self, commit_log_offset: int) -> None:
        """Forget every entry whose commit-log offset is >= ``commit_log_offset``.

        Files that begin at or after the point are deleted; the one file that straddles it has its
        tail entries unlinked and zeroed in place (see :meth:`IndexFile.truncate_after`). Empty
        files are kept.
        """
        with self._lock:
            self._require_loaded()
            self._drain()
            if self._held is not None:
                keep = self._held[1] < commit_log_offset
                self._held = (
                    (self._held[0][keep], self._held[1][keep], self._held[2][keep]) if keep.any() else None
                )
            for index_file in reversed(list(self._files)):
                if index_file.entry_count == 0:
                    continue
                if index_file.begin_commit_log_offset >= commit_log_offset:
                    index_file.delete()
                    self._files.remove(index_file)
                    continue
                index_file.truncate_after(commit_log_offset)
                break
            self._refresh_last_update()

    def delete_files_before(self, commit_log_offset: int) -> int:
        """Delete the files whose newest entry is below ``commit_log_offset``; returns how many.

        As in RocketMQ, the newest file is never deleted: it keeps :attr:`max_commit_log_offset`,
        which tells the store where indexing resumes.
        """
        with self._lock:
            self._require_loaded()
            self._drain()
            expired = [f for f in self._files[:-1] if f.end_commit_log_offset < commit_log_offset]
            for index_file in expired:
                index_file.delete()
                self._files.remove(index_file)
            return len(expired)

    # -- reads -------------------------------------------------------------------------------

    def query(
        self, topic: str, key: str, max_num: int, begin_timestamp_ms: int, end_timestamp_ms: int
    ) -> list[int]:
        """Commit-log offsets of messages of ``topic`` carrying ``key``, stored within [begin, end].

        Matches are by hash, so the caller must re-check each message's real key. Stored times have
        one-second granularity, so an entry up to 999 ms before ``begin_timestamp_ms`` may match too;
        none inside the range is missed. Newest first, each offset once, at most ``max_num``.

        Raises:
            StoreClosedError: before load() or after close().
        """
        key_hash = index_key_hash(topic, key)
        found: list[int] = []
        seen: set[int] = set()
        with self._lock:
            self._require_loaded()
            self._drain()
            for index_file in reversed(self._files):
                if len(found) >= max_num:
                    break
                if index_file.time_matches(begin_timestamp_ms, end_timestamp_ms):
                    index_file.select_commit_log_offsets(
                        key_hash, max_num, begin_timestamp_ms, end_timestamp_ms, found, seen
                    )
        return found

    @property
    def max_commit_log_offset(self) -> int:
        """The highest commit-log offset indexed, -1 when nothing is."""
        return self._max_commit_log_offset

    @property
    def last_update_timestamp_ms(self) -> int:
        """The store time of the newest indexed message (its file's end timestamp), 0 when none."""
        return self._last_update_timestamp_ms

    @property
    def last_update_commit_log_offset(self) -> int:
        """The commit-log offset of the newest indexed message, 0 when none (RocketMQ's default)."""
        return max(self._max_commit_log_offset, 0)

    @property
    def file_paths(self) -> list[Path]:
        """The open index files, oldest first."""
        with self._lock:
            if self._loaded:
                self._drain()
            return [index_file.path for index_file in self._files]

    def _newest_with_entries(self) -> IndexFile | None:
        for index_file in reversed(self._files):
            if index_file.entry_count > 0:
                return index_file
        return None

    def _refresh_last_update(self) -> None:
        newest = self._newest_with_entries()
        if newest is None:
            self._max_commit_log_offset = -1
            self._last_update_timestamp_ms = 0
        else:
            self._max_commit_log_offset = newest.end_commit_log_offset
            self._last_update_timestamp_ms = newest.end_timestamp_ms

    def _require_loaded(self) -> None:
        if not self._loaded:
            raise StoreClosedError(f"index service {self._index_dir} is not loaded")
