"""Broker statistics: what VIEW_BROKER_STATS_DATA and GET_BROKER_RUNTIME_INFO report (pure state).

Theory of operation (RocketMQ's ``StatsItem`` and ``StoreStatsService``). Every counter is a
pair of running totals, ``value`` and ``times`` (calls): a put of 3 messages of 300 bytes adds
3 to TOPIC_PUT_NUMS (1 time) and 300 to TOPIC_PUT_SIZE. Snapshots of the totals are taken every
10 s into a minute ring, every 10 min into an hour ring and every hour into a day ring, all
items at the same instants (RocketMQ's one sampling task per ring); every second the store-wide
totals go into the 10-minute ring behind the ``putTps``-style runtime figures. A window's
figures are the difference between the newest total and the oldest snapshot in it: ``sum``,
``tps`` (sum per second of the window actually covered) and ``avgpt`` (sum per call). A new
item opens its windows with a zero snapshot at the latest sampling before it appeared, so its
first puts count in every window.

Sampling costs the same whatever the number of items: :meth:`BrokerStats.sample` only records
that a ring ticked (its time goes into one shared ring of tick times). An item catches up when
it is next counted or read: the totals it holds then are the totals it held at every tick it
missed (any count since its last catch-up would have caught it up), so it appends those tick
times with its totals and holds exactly the snapshots it would have held had every tick
walked every item. Tens of thousands of topics thus cost nothing per second. An item is a
tuple of integers and tuples, replaced on every count: the cyclic garbage collector stops
tracking such tuples, so 100,000 items add nothing to the full collections that walk every
tracked object (a ring object per window made them seven objects each).

Items are keyed like RocketMQ's: ``TOPIC_PUT_NUMS``/``TOPIC_PUT_SIZE`` by topic,
``GROUP_GET_NUMS``/``GROUP_GET_SIZE`` and ``SNDBCK_PUT_NUMS`` by ``topic@group``,
``BROKER_PUT_NUMS``/``BROKER_GET_NUMS`` by cluster name. Time is passed in (ms); nothing here
reads a clock or does I/O.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field

__all__ = ["BrokerStats", "RuntimeCounters", "WindowFigures"]

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_NAMES = frozenset(
    {
        TOPIC_PUT_NUMS,
        TOPIC_PUT_SIZE,
        GROUP_GET_NUMS,
        GROUP_GET_SIZE,
        SNDBCK_PUT_NUMS,
        BROKER_PUT_NUMS,
        BROKER_GET_NUMS,
    }
)

_MINUTE_STEP_MS = 10_000
_HOUR_STEP_MS = 600_000
_DAY_STEP_MS = 3_600_000
_SECOND_STEP_MS = 1_000
# Ring lengths: one more snapshot than the window has steps, so the window is fully covered.
_MINUTE_RING, _HOUR_RING, _DAY_RING, _SECOND_RING = 7, 7, 25, 601
_STEPS_MS = (_MINUTE_STEP_MS, _HOUR_STEP_MS, _DAY_STEP_MS)
_LENGTHS = (_MINUTE_RING, _HOUR_RING, _DAY_RING)

Snapshot = tuple[int, int, int]
"""(ms, value, times)."""


@dataclass(frozen=True, slots=True)
class WindowFigures:
    """One window of one item (RocketMQ's StatsSnapshot)."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


def _window(snapshots: tuple[Snapshot, ...], now_ms: int, value: int, times: int) -> WindowFigures:
    if not snapshots:
        return WindowFigures()
    first_ms, first_value, first_times = snapshots[0]
    total = value - first_value
    calls = times - first_times
    # At least a second: a window that just began must not report one put as 1000/s.
    elapsed_ms = max(now_ms - first_ms, 1000)
    return WindowFigures(total, total * 1000 / elapsed_ms, total / calls if calls else 0.0)


Rings = tuple[tuple[Snapshot, ...], tuple[Snapshot, ...], tuple[Snapshot, ...]]
"""An item's minute, hour and day snapshots."""


_Item = tuple[int, int, Rings, tuple[int, int, int]]
"""One counter: value, times, its snapshots, and how many times each ring had ticked when they
were last brought up to date. A plain tuple, replaced on every count: the cyclic garbage
collector stops tracking plain tuples of integers and tuples (not named ones), which spares
the full collections 100,000 objects at 50,000 topics."""


class _Ticks:
    """When the minute, hour and day rings ticked: the newest times of each, and how many so far."""

    __slots__ = ("times", "counts", "last_ms")

    def __init__(self, now_ms: int) -> None:
        self.times: tuple[deque[int], ...] = tuple(deque(maxlen=length) for length in _LENGTHS)
        self.counts: tuple[int, int, int] = (0, 0, 0)
        """Replaced (never changed) on every tick: an item whose ``ticks`` is this object is current."""
        self.last_ms = [now_ms, now_ms, now_ms]

    def advance(self, now_ms: int) -> None:
        counts = list(self.counts)
        for ring, step_ms in enumerate(_STEPS_MS):
            if now_ms - self.last_ms[ring] >= step_ms:
                self.last_ms[ring] = now_ms
                self.times[ring].append(now_ms)
                counts[ring] += 1
        if counts != list(self.counts):
            self.counts = (counts[0], counts[1], counts[2])

    def opened(self, opened_ms: int) -> _Item:
        """A new item, its windows opened with a zero snapshot at ``opened_ms``."""
        opening = ((opened_ms, 0, 0),)
        return (0, 0, (opening, opening, opening), self.counts)

    def catch_up(self, item: _Item) -> _Item:
        """``item`` with the snapshots of the ticks it missed (see the module docstring)."""
        value, times, current, ticks = item
        if ticks is self.counts:
            return item
        rings = list(current)
        for ring, length in enumerate(_LENGTHS):
            missed = self.counts[ring] - ticks[ring]
            if missed <= 0:
                continue
            tick_times = list(self.times[ring])[-min(missed, length) :]
            rings[ring] = (rings[ring] + tuple((tick_ms, value, times) for tick_ms in tick_times))[-length:]
        return (value, times, (rings[0], rings[1], rings[2]), self.counts)


@dataclass(slots=True)
class RuntimeCounters:
    """Store-wide running totals behind GET_BROKER_RUNTIME_INFO's rate figures."""

    put: int = 0
    get_found: int = 0
    get_miss: int = 0
    get_transferred: int = 0
    put_times: int = 0
    put_failed: int = 0
    put_bytes: int = 0
    put_time_max_ms: float = 0.0
    get_time_max_ms: float = 0.0
    # RocketMQ's putMessageDistributeTime buckets: <=0ms, 0~10ms, 10~50ms, 50~100ms,
    # 100~200ms, 200~500ms, 500ms~1s, 1~2s, 2~3s, 3~4s, 4~5s, 5~10s, 10s~.
    put_latency_buckets: list[int] = field(default_factory=lambda: [0] * 13)

    def as_tuple(self) -> tuple[int, int, int, int]:
        return self.put, self.get_found, self.get_miss, self.get_transferred


_LATENCY_BOUNDS_MS = (0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
LATENCY_BUCKET_NAMES = (
    "<=0ms",
    "0~10ms",
    "10~50ms",
    "50~100ms",
    "100~200ms",
    "200~500ms",
    "500ms~1s",
    "1~2s",
    "2~3s",
    "3~4s",
    "4~5s",
    "5~10s",
    "10s~",
)


class BrokerStats:
    """Every stats item of one broker, plus the runtime counters (thread-safe, time injected)."""

    def __init__(self, cluster_name: str, now_ms: int) -> None:
        self._cluster = cluster_name
        # Stats name -> key -> item: a reader of one name never walks the others.
        self._tables: dict[str, dict[str, _Item]] = {name: {} for name in STATS_NAMES}
        self._ticks = _Ticks(now_ms)
        self._last_sample_ms = now_ms
        self._lock = threading.Lock()
        self.runtime = RuntimeCounters()
        self._seconds: deque[tuple[int, tuple[int, int, int, int]]] = deque()
        self._last_second_ms = -(1 << 62)
        self.boot_ms = now_ms
        # Midnight snapshots of the put/get totals (msgPutTotalTodayMorning and friends).
        self._day_of: int = _day(now_ms)
        self.today_morning = (0, 0)
        self.yesterday_morning = (0, 0)

    # -- recording ------------------------------------------------------------------------------

    def _add(self, name: str, key: str, value: int, times: int = 1) -> None:
        table = self._tables[name]
        ticks = self._ticks
        item = table.get(key)
        if item is None:
            item = ticks.opened(self._last_sample_ms)
        elif item[3] is not ticks.counts:
            item = ticks.catch_up(item)
        table[key] = (item[0] + value, item[1] + times, item[2], ticks.counts)

    def on_put(self, topic: str, count: int, size_bytes: int, latency_ms: float = 0.0) -> None:
        """A put of ``count`` messages (``size_bytes`` written) to ``topic`` succeeded."""
        with self._lock:
            self._add(TOPIC_PUT_NUMS, topic, count)
            self._add(TOPIC_PUT_SIZE, topic, size_bytes)
            self._add(BROKER_PUT_NUMS, self._cluster, count)
            counters = self.runtime
            counters.put += count
            counters.put_times += 1
            counters.put_bytes += size_bytes
            if latency_ms > counters.put_time_max_ms:
                counters.put_time_max_ms = latency_ms
            # The first bucket whose bound is >= the latency (the last one: above every bound).
            counters.put_latency_buckets[bisect_left(_LATENCY_BOUNDS_MS, latency_ms)] += 1

    def on_put_failed(self) -> None:
        with self._lock:
            self.runtime.put_failed += 1

    def on_get(self, group: str, topic: str, count: int, size_bytes: int) -> None:
        """A pull of ``group`` on ``topic`` returned ``count`` messages (``count`` 0: a miss)."""
        with self._lock:
            if count:
                self._add(GROUP_GET_NUMS, f"{topic}@{group}", count)
                self._add(GROUP_GET_SIZE, f"{topic}@{group}", size_bytes)
                self._add(BROKER_GET_NUMS, self._cluster, count)
                self.runtime.get_found += 1
                self.runtime.get_transferred += count
            else:
                self.runtime.get_miss += 1

    def on_send_back(self, group: str, topic: str) -> None:
        with self._lock:
            self._add(SNDBCK_PUT_NUMS, f"{topic}@{group}", 1)

    # -- sampling and reading ---------------------------------------------------------------------

    def sample(self, now_ms: int) -> None:
        """Tick the rings that are due and take the runtime figures' second (call about once a
        second); the same few operations whatever the number of items (module docstring)."""
        with self._lock:
            self._last_sample_ms = now_ms
            self._ticks.advance(now_ms)
            if now_ms - self._last_second_ms >= _SECOND_STEP_MS:
                self._last_second_ms = now_ms
                self._seconds.append((now_ms, self.runtime.as_tuple()))
                while len(self._seconds) > _SECOND_RING:
                    self._seconds.popleft()
            day = _day(now_ms)
            if day != self._day_of:
                self._day_of = day
                self.yesterday_morning = self.today_morning
                self.today_morning = (self.runtime.put, self.runtime.get_transferred)

    def figures(
        self, name: str, key: str, now_ms: int
    ) -> tuple[WindowFigures, WindowFigures, WindowFigures] | None:
        """Minute, hour and day figures of one item; None when it was never recorded."""
        with self._lock:
            table = self._tables.get(name)
            if table is None or (found := table.get(key)) is None:
                return None
            item = table[key] = self._ticks.catch_up(found)
            value, times, (minute, hour, day), _ = item
            return (
                _window(minute, now_ms, value, times),
                _window(hour, now_ms, value, times),
                _window(day, now_ms, value, times),
            )

    def minute_tps(self, name: str, key: str, now_ms: int) -> float:
        found = self.figures(name, key, now_ms)
        return found[0].tps if found is not None else 0.0

    def rates(self, now_ms: int, window_s: int) -> tuple[float, float, float, float]:
        """Per-second put, get-found, get-miss and get-transferred over the last ``window_s``."""
        with self._lock:
            current = self.runtime.as_tuple()
            older = [entry for entry in self._seconds if now_ms - entry[0] <= window_s * 1000 + 500]
            if not older:
                return 0.0, 0.0, 0.0, 0.0
            first_ms, first = older[0]
            elapsed_s = max((now_ms - first_ms) / 1000, 1.0)
            put, found, miss, transferred = (
                (now - then) / elapsed_s for now, then in zip(current, first, strict=True)
            )
            return put, found, miss, transferred

    def group_get_totals(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(topic, group) -> messages and bytes handed out so far (GROUP_GET_NUMS, GROUP_GET_SIZE)."""
        with self._lock:
            sizes = self._tables[GROUP_GET_SIZE]
            totals: dict[tuple[str, str], tuple[int, int]] = {}
            for key, item in self._tables[GROUP_GET_NUMS].items():
                topic, _, group = key.partition("@")
                size = sizes.get(key)
                totals[(topic, group)] = (item[0], size[0] if size is not None else 0)
            return totals

    def keys_of(self, name: str) -> list[str]:
        with self._lock:
            return sorted(self._tables.get(name, ()))


def _day(now_ms: int) -> int:
    """Days since the epoch in local time (midnight is when the morning totals roll)."""
    local_s = now_ms / 1000 + time.localtime(now_ms / 1000).tm_gmtoff
    return int(local_s // 86400)
