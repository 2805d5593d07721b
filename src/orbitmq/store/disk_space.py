"""How full the store's disk is, and what the store does about it (RocketMQ's three ratios).

The housekeeping thread measures the disk every round (``statvfs``, microseconds) and moves
the store between four levels, each past one of RocketMQ's broker.conf ratios:

===================  ===================================  =============================================
level                past                                 the store
===================  ===================================  =============================================
``OK``               -                                    deletes expired segments at ``deleteWhen``
``CLEAN``            ``diskMaxUsedSpaceRatio`` (75)       deletes expired segments now, any hour
``CLEAN_FORCIBLY``   ``diskSpaceCleanForciblyRatio`` (85)  also deletes unexpired ones, oldest first,
                                                          when ``cleanFileForciblyEnable`` (true)
``FULL``             ``diskSpaceWarningLevelRatio`` (90)   refuses puts: SERVICE_NOT_AVAILABLE, "disk
                                                          full"; reads go on
===================  ===================================  =============================================

As in RocketMQ the two upper ratios are clamped: the warning level to [35, 90] and the
forcible one to [30, 85]. Each change of level is logged once (a level the disk keeps
flapping across is logged at most once a minute); a put refused for want of blocks
(ENOSPC, :class:`~orbitmq.store._fs.DiskFullError`) below the warning level is logged at
most once a minute too, never once per request.
"""

from __future__ import annotations

import logging
import os
import time
from enum import IntEnum
from pathlib import Path

from orbitmq.store.config import StoreConfig

_log = logging.getLogger(__name__)

LOG_INTERVAL_S = 60.0


class DiskLevel(IntEnum):
    """How full the disk is, in the order of the ratios that separate the levels."""

    OK = 0
    CLEAN = 1
    CLEAN_FORCIBLY = 2
    FULL = 3


def disk_used_percent(path: Path) -> float:
    """How full the file system holding ``path`` is, in percent (0 when it cannot be read).

    As RocketMQ computes it: (total - free) / total, where free counts the blocks reserved
    for root too (Java's ``File.getFreeSpace``, statvfs ``f_bfree``). What is left for
    ordinary users (``f_bavail``, what ``shutil.disk_usage`` calls free) would read a disk
    with a large root reservation as nearly full and delete young segments.
    """
    try:
        stats = os.statvfs(path)
    except OSError:
        return 0.0
    if stats.f_blocks <= 0:
        return 0.0
    return 100.0 * (stats.f_blocks - stats.f_bfree) / stats.f_blocks


def warning_level_percent(config: StoreConfig) -> float:
    """``diskSpaceWarningLevelRatio`` as RocketMQ applies it: clamped to [35, 90]."""
    return min(max(config.disk_space_warning_level_ratio_percent, 35), 90)


def clean_forcibly_percent(config: StoreConfig) -> float:
    """``diskSpaceCleanForciblyRatio`` as RocketMQ applies it: clamped to [30, 85]."""
    return min(max(config.disk_space_clean_forcibly_ratio_percent, 30), 85)


def disk_level(config: StoreConfig, used_percent: float) -> DiskLevel:
    """The level of a disk ``used_percent`` full."""
    if used_percent > warning_level_percent(config):
        return DiskLevel.FULL
    if used_percent > clean_forcibly_percent(config):
        return DiskLevel.CLEAN_FORCIBLY
    if used_percent > config.disk_max_used_space_ratio_percent:
        return DiskLevel.CLEAN
    return DiskLevel.OK


class DiskSpaceMonitor:
    """The store's view of its disk: the level, the refusal it implies, the log lines."""

    def __init__(self, path: Path, config: StoreConfig) -> None:
        self._path = path
        self._config = config
        self.level = DiskLevel.OK
        self.used_percent = 0.0
        # Why puts are refused (None: accepted). Read by the put path without a lock.
        self.refusal: str | None = None
        self._logged_at: dict[tuple[DiskLevel, DiskLevel], float] = {}
        self._no_space_logged_at = -LOG_INTERVAL_S
        self._no_space_suppressed = 0

    def check(self) -> DiskLevel:
        """Measure the disk, move to its level (logging the change) and return the level."""
        used = disk_used_percent(self._path)
        self.used_percent = used
        level = disk_level(self._config, used)
        previous, self.level = self.level, level
        if level is DiskLevel.FULL:
            self.refusal = (
                f"disk full: the store's disk is {used:.1f}% used, above diskSpaceWarningLevelRatio="
                f"{warning_level_percent(self._config):g}; sends are accepted again once space is freed"
            )
        else:
            self.refusal = None
        if level != previous:
            self._log_change(previous, level, used)
        return level

    def _log_change(self, previous: DiskLevel, level: DiskLevel, used: float) -> None:
        now = time.monotonic()
        change = (previous, level)
        if now - self._logged_at.get(change, -LOG_INTERVAL_S) < LOG_INTERVAL_S:
            return
        self._logged_at[change] = now
        config = self._config
        if level is DiskLevel.FULL:
            _log.error(
                "disk full: %s is %.1f%% used, above diskSpaceWarningLevelRatio=%g: puts are refused "
                "(SERVICE_NOT_AVAILABLE) until space is freed; reads go on",
                self._path,
                used,
                warning_level_percent(config),
            )
        elif level is DiskLevel.CLEAN_FORCIBLY and level > previous:
            if config.clean_file_forcibly_enable:
                what = "the oldest commit-log segments are deleted even before fileReservedTime"
            else:
                what = "cleanFileForciblyEnable=false: segments younger than fileReservedTime are kept"
            _log.warning(
                "%s is %.1f%% used, above diskSpaceCleanForciblyRatio=%g: %s",
                self._path,
                used,
                clean_forcibly_percent(config),
                what,
            )
        elif level is DiskLevel.CLEAN and level > previous:
            _log.warning(
                "%s is %.1f%% used, above diskMaxUsedSpaceRatio=%d: expired commit-log segments are "
                "deleted now, whatever deleteWhen says",
                self._path,
                used,
                config.disk_max_used_space_ratio_percent,
            )
        else:
            accepted = ": puts are accepted again" if previous is DiskLevel.FULL else ""
            _log.warning(
                "%s is %.1f%% used (level %s, was %s)%s",
                self._path,
                used,
                level.name,
                previous.name,
                accepted,
            )

    def note_no_space(self, what: str) -> None:
        """A write was refused for want of blocks (ENOSPC): log it, at most once a minute."""
        now = time.monotonic()
        if now - self._no_space_logged_at < LOG_INTERVAL_S:
            self._no_space_suppressed += 1
            return
        suppressed, self._no_space_suppressed = self._no_space_suppressed, 0
        self._no_space_logged_at = now
        _log.error(
            "no space left on %s (%.1f%% used at the last check) for %s: refused without writing%s",
            self._path,
            disk_used_percent(self._path),
            what,
            f" ({suppressed} more such refusals in the last minute)" if suppressed else "",
        )
