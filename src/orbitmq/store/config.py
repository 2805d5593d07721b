"""StoreConfig: every tunable of the message store, with RocketMQ's broker.conf key for each.

Each field's metadata carries its ``broker.conf`` key so that a config loader can map an
operator's existing file onto this dataclass. ``mapedFileSizeConsumeQueue`` is bytes in
RocketMQ (entries x 20); :func:`consume_queue_entries_from_bytes` converts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from orbitmq.errors import ConfigError

CONSUME_QUEUE_ENTRY_BYTES = 20


class FlushDiskType(Enum):
    """When a put counts as durable."""

    ASYNC_FLUSH = "ASYNC_FLUSH"  # a background thread flushes every flush_interval_commit_log_ms
    SYNC_FLUSH = "SYNC_FLUSH"  # a put's flush_future resolves once its bytes are on disk


def _key(name: str) -> dict[str, str]:
    return {"key": name}


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Configuration of one :class:`~orbitmq.store.message_store.MessageStore`."""

    # Root directory holding commitlog/, consumequeue/, index/, checkpoint and abort.
    store_path_root_dir: Path = field(metadata=_key("storePathRootDir"))
    # Size of one CommitLog segment file (RocketMQ 5 spells the key mappedFileSizeCommitLog).
    commit_log_segment_bytes: int = field(
        default=1 << 30, metadata={"key": "mapedFileSizeCommitLog", "aliases": ("mappedFileSizeCommitLog",)}
    )
    # Entries per ConsumeQueue file (RocketMQ's key is in bytes: entries * 20).
    consume_queue_entries_per_file: int = field(default=300_000, metadata=_key("mapedFileSizeConsumeQueue"))
    # Largest accepted message body.
    max_message_size_bytes: int = field(default=4 * 1024 * 1024, metadata=_key("maxMessageSize"))
    # ASYNC_FLUSH or SYNC_FLUSH (group commit).
    flush_disk_type: FlushDiskType = field(default=FlushDiskType.ASYNC_FLUSH, metadata=_key("flushDiskType"))
    # Period of the background CommitLog flush under ASYNC_FLUSH.
    flush_interval_commit_log_ms: int = field(default=500, metadata=_key("flushIntervalCommitLog"))
    # Period at which buffered ConsumeQueue entries are written to their files.
    flush_interval_consume_queue_ms: int = field(default=1000, metadata=_key("flushIntervalConsumeQueue"))
    # Period at which ConsumeQueue files are also fsync'd and the checkpoint advanced.
    flush_consume_queue_thorough_interval_ms: int = field(
        default=60_000, metadata=_key("flushConsumeQueueThoroughInterval")
    )
    # How long a SYNC_FLUSH put waits for its flush before its future resolves False.
    sync_flush_timeout_ms: int = field(default=5000, metadata=_key("syncFlushTimeout"))
    # Age after which a CommitLog segment may be deleted.
    file_reserved_time_hours: int = field(default=72, metadata=_key("fileReservedTime"))
    # Hours of the day ("04" or "04;05") at which expired segments are deleted.
    delete_when: str = field(default="04", metadata=_key("deleteWhen"))
    # Disk usage above which expired segments are deleted at once, whatever deleteWhen says.
    disk_max_used_space_ratio_percent: int = field(default=75, metadata=_key("diskMaxUsedSpaceRatio"))
    # Disk usage above which unexpired segments go too, oldest first (RocketMQ clamps it to 30..85).
    disk_space_clean_forcibly_ratio_percent: int = field(
        default=85, metadata=_key("diskSpaceCleanForciblyRatio")
    )
    # Whether segments younger than fileReservedTime may be deleted past the forcible ratio.
    clean_file_forcibly_enable: bool = field(default=True, metadata=_key("cleanFileForciblyEnable"))
    # Disk usage above which puts are refused as "disk full" (RocketMQ clamps it to 35..90).
    disk_space_warning_level_ratio_percent: int = field(
        default=90, metadata=_key("diskSpaceWarningLevelRatio")
    )
    # Period of the retention thread.
    retention_interval_ms: int = field(default=10_000, metadata=_key("cleanResourceInterval"))
    # Hash slots per IndexFile.
    max_hash_slot_num: int = field(default=5_000_000, metadata=_key("maxHashSlotNum"))
    # Entries per IndexFile.
    max_index_num: int = field(default=20_000_000, metadata=_key("maxIndexNum"))
    # Whether keys and unique ids are indexed.
    message_index_enable: bool = field(default=True, metadata=_key("messageIndexEnable"))
    # Fault CommitLog pages in ahead of the writer (a window at a time: RocketMQ warms a whole
    # segment at creation, and defaults to off).
    warm_mapped_file_enable: bool = field(default=True, metadata=_key("warmMapedFileEnable"))
    # How far ahead of the write position pages are faulted in when warming is on.
    warm_mapped_file_window_bytes: int = field(default=16 << 20, metadata=_key("warmMapedFileWindowBytes"))
    # ConsumeQueue files held open at once (LRU close/reopen beyond this).
    max_open_consume_queue_files: int = field(default=1024, metadata=_key("maxOpenConsumeQueueFiles"))
    # ConsumeQueue entries scanned per read when a tag filter rejects entries.
    max_filter_scan_entries: int = field(default=800, metadata=_key("maxFilterScanEntries"))

    # Delay levels 1..N (RocketMQ's messageDelayLevel): SCHEDULE_TOPIC_XXXX entries carry
    # store time + delay(level) as their tags code, recomputed the same way on rebuild.
    message_delay_level: str = field(
        default="1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
        metadata=_key("messageDelayLevel"),
    )

    def __post_init__(self) -> None:
        if self.commit_log_segment_bytes < 4096:
            raise ConfigError(f"mapedFileSizeCommitLog={self.commit_log_segment_bytes} is below 4096 bytes")
        if self.consume_queue_entries_per_file < 1:
            raise ConfigError(
                f"mapedFileSizeConsumeQueue gives {self.consume_queue_entries_per_file} entries per file"
            )
        if self.warm_mapped_file_window_bytes < 4096:
            raise ConfigError(
                f"warmMapedFileWindowBytes={self.warm_mapped_file_window_bytes} is below 4096 bytes"
            )
        if self.max_open_consume_queue_files < 1:
            raise ConfigError("maxOpenConsumeQueueFiles must be at least 1")
        if not 1 <= self.disk_max_used_space_ratio_percent <= 100:
            raise ConfigError(f"diskMaxUsedSpaceRatio={self.disk_max_used_space_ratio_percent} is not 1..100")
        for key, value in (
            ("diskSpaceCleanForciblyRatio", self.disk_space_clean_forcibly_ratio_percent),
            ("diskSpaceWarningLevelRatio", self.disk_space_warning_level_ratio_percent),
        ):
            if not 1 <= value <= 100:
                raise ConfigError(f"{key}={value} is not 1..100")
        delete_hours(self.delete_when)
        delay_levels_ms(self.message_delay_level)

    @property
    def consume_queue_file_bytes(self) -> int:
        """Size of one ConsumeQueue file."""
        return self.consume_queue_entries_per_file * CONSUME_QUEUE_ENTRY_BYTES

    @property
    def commit_log_dir(self) -> Path:
        return Path(self.store_path_root_dir) / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return Path(self.store_path_root_dir) / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return Path(self.store_path_root_dir) / "index"

    @property
    def checkpoint_path(self) -> Path:
        return Path(self.store_path_root_dir) / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return Path(self.store_path_root_dir) / "abort"


def consume_queue_entries_from_bytes(file_bytes: int) -> int:
    """Convert RocketMQ's mapedFileSizeConsumeQueue (bytes) to entries per file.

    Raises:
        ConfigError: the size is not a positive multiple of 20.
    """
    if file_bytes <= 0 or file_bytes % CONSUME_QUEUE_ENTRY_BYTES:
        raise ConfigError(f"mapedFileSizeConsumeQueue={file_bytes} is not a positive multiple of 20")
    return file_bytes // CONSUME_QUEUE_ENTRY_BYTES


def delete_hours(delete_when: str) -> frozenset[int]:
    """The hours of day named by deleteWhen ("04" or "04;05").

    Raises:
        ConfigError: an item is not an hour 0..23.
    """
    hours: set[int] = set()
    for item in delete_when.split(";"):
        text = item.strip()
        if not text:
            continue
        if not text.isdigit() or not 0 <= int(text) <= 23:
            raise ConfigError(f"deleteWhen={delete_when!r}: {text!r} is not an hour 0..23")
        hours.add(int(text))
    return frozenset(hours)


_DELAY_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def delay_levels_ms(message_delay_level: str) -> list[int]:
    """The delay of each level (index 0 is level 1) from messageDelayLevel, e.g. "1s 5s 1m".

    Raises:
        ConfigError: an item is not a number followed by ms, s, m, h or d.
    """
    delays: list[int] = []
    for item in message_delay_level.split():
        number = item.rstrip("smhd")
        unit = item[len(number) :]
        if not number.isdigit() or unit not in _DELAY_UNIT_MS:
            raise ConfigError(f"messageDelayLevel={message_delay_level!r}: bad item {item!r}")
        delays.append(int(number) * _DELAY_UNIT_MS[unit])
    return delays
