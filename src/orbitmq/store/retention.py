"""Retention: which CommitLog segments may be deleted now.

A segment is deleted when all of these hold:

* it is not the segment being written (the last one);
* every byte of it is flushed and dispatched, so nothing derived still needs it;
* it is older than ``file_reserved_time_hours`` (by its file's modification time), unless
  the disk is past ``diskSpaceCleanForciblyRatio`` (or the warning level) and
  ``cleanFileForciblyEnable`` is on: then the oldest segments go whatever their age;
* it is a ``delete_when`` hour, or the caller forces it, or the disk is fuller than
  ``disk_max_used_space_ratio_percent`` (RocketMQ's "clean immediately").

The levels are those of ``disk_space``. Segments go oldest first and the first one that
must stay stops the run, so the log stays contiguous. After the segments, the store moves
ConsumeQueue minimums and deletes index and ConsumeQueue files wholly below the new
CommitLog minimum.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from orbitmq.errors import StoreError
from orbitmq.store.config import StoreConfig, delete_hours
from orbitmq.store.disk_space import DiskLevel, disk_level
from orbitmq.store.disk_space import disk_used_percent as disk_used_percent
from orbitmq.store.mapped_file import MappedFile

_log = logging.getLogger(__name__)

_MS_PER_HOUR = 3_600_000
# On a disk past diskMaxUsedSpaceRatio retention runs at least this often.
_FULL_DISK_RETENTION_MS = 1000
_IO_ERROR_LOG_INTERVAL_S = 60.0
_T = TypeVar("_T")


def is_delete_hour(now_ms: int, delete_when: str) -> bool:
    """Whether ``now_ms`` falls in one of the deleteWhen hours (local time, as RocketMQ)."""
    return time.localtime(now_ms / 1000).tm_hour in delete_hours(delete_when)


def segments_to_delete(
    config: StoreConfig,
    segments: Sequence[MappedFile],
    now_ms: int,
    safe_offset: int,
    force: bool,
    disk_used: float,
) -> list[MappedFile]:
    """The oldest segments that may go now (see the module docstring for the rules).

    ``safe_offset`` is the lowest of the flushed and dispatched commit-log offsets.
    """
    level = disk_level(config, disk_used)
    if not (force or level >= DiskLevel.CLEAN or is_delete_hour(now_ms, config.delete_when)):
        return []
    forcibly = level >= DiskLevel.CLEAN_FORCIBLY and config.clean_file_forcibly_enable
    reserved_ms = config.file_reserved_time_hours * _MS_PER_HOUR
    chosen: list[MappedFile] = []
    for segment in segments[:-1]:
        if segment.end_offset > safe_offset:
            break
        if not forcibly and now_ms - segment.modified_time_ms() < reserved_ms:
            break
        chosen.append(segment)
    return chosen


class _Maintained(Protocol):
    def flush_consume_queues(self, thorough: bool) -> None: ...

    def check_disk_space(self) -> DiskLevel: ...

    def run_retention(self, now_ms: int, force: bool = False) -> int: ...


class Housekeeper:
    """The store's periodic thread: ConsumeQueue write-out, checkpoint, retention."""

    def __init__(self, store: _Maintained, config: StoreConfig) -> None:
        self._store = store
        self._config = config
        self._stop = threading.Event()
        self._io_error_logged_at: dict[str, float] = {}
        self._thread = threading.Thread(target=self._run, name="orbitmq-store-housekeeping", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        config = self._config
        last_thorough = last_retention = time.monotonic()
        while not self._stop.wait(config.flush_interval_consume_queue_ms / 1000):
            now = time.monotonic()
            thorough = (now - last_thorough) * 1000 >= config.flush_consume_queue_thorough_interval_ms
            # Each step on its own: a full disk that fails the write-out must not stop the
            # disk check or the retention that frees it.
            level = self._step("disk check", self._store.check_disk_space)
            full = level is not None and level >= DiskLevel.CLEAN
            if full and (now - last_retention) * 1000 >= _FULL_DISK_RETENTION_MS:
                last_retention = now - config.retention_interval_ms / 1000
            written = self._step("consume-queue write-out", functools.partial(self._flush, thorough))
            if written and thorough:
                last_thorough = now
            if (now - last_retention) * 1000 >= config.retention_interval_ms:
                last_retention = now
                self._step("retention", lambda: self._store.run_retention(time.time_ns() // 1_000_000))

    def _flush(self, thorough: bool) -> bool:
        self._store.flush_consume_queues(thorough)
        return True

    def _step(self, name: str, step: Callable[[], _T]) -> _T | None:
        """Run one step; log a failure (I/O ones once a minute, in one line) and keep the thread alive.

        The next round retries, and close() flushes anyway.
        """
        try:
            return step()
        except (OSError, StoreError) as exc:
            now = time.monotonic()
            if (
                now - self._io_error_logged_at.get(name, -_IO_ERROR_LOG_INTERVAL_S)
                >= _IO_ERROR_LOG_INTERVAL_S
            ):
                self._io_error_logged_at[name] = now
                _log.error("store %s failed (retried every round, logged once a minute): %s", name, exc)
        except Exception:
            _log.exception("store %s failed", name)
        return None

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
