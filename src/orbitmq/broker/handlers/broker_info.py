"""What a broker says about itself: GET_BROKER_RUNTIME_INFO (28), VIEW_BROKER_STATS_DATA (315),
GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25).

The runtime table carries RocketMQ 4.9.8's keys with values in its formats, because
``mqadmin brokerStatus``, rocketmq-dashboard and rocketmq-exporter parse them: the rate figures
(``putTps``, ``getTransferedTps``, ...) are three numbers for the last 10 s, 60 s and 600 s
separated by single spaces (always all three; the dashboard sums them), ``runtime`` reads
``[ 0 days, 1 hours, 2 minutes, 3 seconds ]``, sizes are Java's ``humanReadableByteCount``.
Thread-pool keys, which OrbitMQ has no equivalent of, answer 0 and their RocketMQ capacities.

A stats item never recorded answers SYSTEM_ERROR ``The stats <NAME> <KEY> not exist``, as
RocketMQ does (the dashboard logs it and goes on).
"""

from __future__ import annotations

import math
import os
import struct

from orbitmq.broker.handlers import BrokerState, now_ms
from orbitmq.broker.live_config import apply_live_updates, parse_properties_text, render_configs
from orbitmq.broker.stats import LATENCY_BUCKET_NAMES, STATS_NAMES
from orbitmq.errors import ConfigError, RemoteProtocolError
from orbitmq.protocol.admin_bodies import BrokerStatsData, BrokerStatsItem, encode_broker_stats_data
from orbitmq.protocol.admin_headers import GetBrokerConfigResponseHeader, ViewBrokerStatsDataRequestHeader
from orbitmq.protocol.bodies import encode_kv_table
from orbitmq.protocol.codes import ORBITMQ_VERSION, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_codec import STORETIMESTAMP_POSITION
from orbitmq.transport.server import RequestContext

__all__ = ["BrokerInfoHandlers", "human_readable_bytes"]

VERSION_DESC = "V4_9_8"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
_LONG = struct.Struct(">q")


def human_readable_bytes(size_bytes: int) -> str:
    """Java's ``humanReadableByteCount(bytes, false)``: ``512 B``, ``1.2 KiB``, ``3.0 GiB``."""
    if size_bytes < 1024:
        return f"{size_bytes} B"
    exponent = min(int(math.log(size_bytes) / math.log(1024)), 6)
    return f"{size_bytes / 1024**exponent:.1f} {'KMGTPE'[exponent - 1]}iB"


def _number(value: float) -> str:
    """A double as Java's ``Double.toString`` writes small values (``0.0``, ``12.5``)."""
    return repr(float(round(value, 4)))


def _uptime(elapsed_ms: int) -> str:
    seconds = elapsed_ms // 1000
    return (
        f"[ {seconds // 86400} days, {seconds % 86400 // 3600} hours, "
        f"{seconds % 3600 // 60} minutes, {seconds % 60} seconds ]"
    )


def _disk(path: str) -> tuple[int, int]:
    """(total, free) bytes of the file system holding ``path`` (free as Java's getFreeSpace)."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return 0, 0
    return stats.f_blocks * stats.f_frsize, stats.f_bfree * stats.f_frsize


class BrokerInfoHandlers:
    """Runtime figures, stats items and the live configuration of this broker."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    async def get_broker_runtime_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, None, {}, encode_kv_table(self.runtime_table()))

    def runtime_table(self) -> dict[str, str]:
        """The GET_BROKER_RUNTIME_INFO table (see the module docstring)."""
        state = self._state
        stats = state.stats
        store = state.store
        now = now_ms()
        counters = stats.runtime
        windows = [stats.rates(now, window_s) for window_s in (10, 60, 600)]

        def rate(index: int) -> str:
            return " ".join(_number(figures[index]) for figures in windows)

        total_get = " ".join(_number(figures[1] + figures[2]) for figures in windows)
        disk_total, disk_free = _disk(str(state.store_config.store_path_root_dir))
        used_ratio = (disk_total - disk_free) / disk_total if disk_total else 0.0
        table = {
            "brokerVersionDesc": VERSION_DESC,
            "brokerVersion": str(ORBITMQ_VERSION),
            "msgPutTotalYesterdayMorning": str(stats.yesterday_morning[0]),
            "msgPutTotalTodayMorning": str(stats.today_morning[0]),
            "msgPutTotalTodayNow": str(counters.put),
            "msgGetTotalYesterdayMorning": str(stats.yesterday_morning[1]),
            "msgGetTotalTodayMorning": str(stats.today_morning[1]),
            "msgGetTotalTodayNow": str(counters.get_transferred),
            "sendThreadPoolQueueSize": "0",
            "sendThreadPoolQueueCapacity": "10000",
            "pullThreadPoolQueueSize": "0",
            "pullThreadPoolQueueCapacity": "100000",
            "queryThreadPoolQueueSize": "0",
            "queryThreadPoolQueueCapacity": "20000",
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": "100000",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "dispatchBehindBytes": "0",
            "pageCacheLockTimeMills": "0",
            "earliestMessageTimeStamp": str(self._earliest_message_timestamp()),
            "startAcceptSendRequestTimeStamp": "0",
            "remainHowManyDataToFlush": human_readable_bytes(
                max(store.max_commit_log_offset - store.flushed_commit_log_offset, 0)
            ),
            "commitLogDirCapacity": (
                f"Total : {human_readable_bytes(disk_total)}, Free : {human_readable_bytes(disk_free)}."
            ),
            "bootTimestamp": str(stats.boot_ms),
            "runtime": _uptime(now - stats.boot_ms),
            "putMessageEntireTimeMax": str(int(counters.put_time_max_ms)),
            "putMessageTimesTotal": str(counters.put_times),
            "putMessageFailedTimes": str(counters.put_failed),
            "putMessageSizeTotal": str(counters.put_bytes),
            "putMessageDistributeTime": "".join(
                f"[{name}]:{count} "
                for name, count in zip(LATENCY_BUCKET_NAMES, counters.put_latency_buckets, strict=True)
            ),
            "putMessageAverageSize": _number(counters.put_bytes / counters.put if counters.put else 0.0),
            "dispatchMaxBuffer": "0",
            "getMessageEntireTimeMax": str(int(counters.get_time_max_ms)),
            "putTps": rate(0),
            "getFoundTps": rate(1),
            "getMissTps": rate(2),
            "getTotalTps": total_get,
            "getTransferedTps": rate(3),
            "putLatency99": f"{self._put_latency_percentile(0.99):.2f}",
            "putLatency999": f"{self._put_latency_percentile(0.999):.2f}",
            "commitLogDiskRatio": _number(used_ratio),
            f"commitLogDiskRatio_{state.store_config.store_path_root_dir}": _number(used_ratio),
            "consumeQueueDiskRatio": _number(used_ratio),
            "commitLogMinOffset": str(store.min_commit_log_offset),
            "commitLogMaxOffset": str(store.max_commit_log_offset),
        }
        schedule = state.schedule
        if schedule is not None:
            for level in range(1, schedule.level_count + 1):
                max_offset = store.get_max_queue_offset(SCHEDULE_TOPIC, level - 1)
                if max_offset > 0:
                    table[f"scheduleMessageOffset_{level}"] = f"{schedule.offsets.get(level)},{max_offset}"
        return table

    def _earliest_message_timestamp(self) -> int:
        store = self._state.store
        if store.max_commit_log_offset <= store.min_commit_log_offset:
            return -1
        record = store.read_message(store.min_commit_log_offset)
        if record is None or len(record) < STORETIMESTAMP_POSITION + 8:
            return -1
        return int(_LONG.unpack_from(record, STORETIMESTAMP_POSITION)[0])

    def _put_latency_percentile(self, fraction: float) -> float:
        """An upper bound (ms) of the put latency percentile, from the distribution buckets."""
        buckets = self._state.stats.runtime.put_latency_buckets
        total = sum(buckets)
        if not total:
            return 0.0
        bounds = (0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000, 10000)
        seen = 0
        for count, bound in zip(buckets, bounds, strict=True):
            seen += count
            if seen >= total * fraction:
                return float(bound)
        return float(bounds[-1])

    async def view_broker_stats_data(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = ViewBrokerStatsDataRequestHeader.from_ext(request.ext_fields)
        figures = (
            self._state.stats.figures(header.stats_name, header.stats_key, now_ms())
            if header.stats_name in STATS_NAMES
            else None
        )
        if figures is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"The stats <{header.stats_name}> <{header.stats_key}> not exist"
            )
        minute, hour, day = (BrokerStatsItem(item.sum, item.tps, item.avgpt) for item in figures)
        body = encode_broker_stats_data(BrokerStatsData(minute, hour, day))
        return request.response(ResponseCode.SUCCESS, None, {}, body)

    async def get_broker_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        state = self._state
        text = "".join(
            f"{key}={value}\n" for key, value in render_configs(state.config, state.store_config).items()
        )
        timestamp, counter = state.config_version
        version = GetBrokerConfigResponseHeader(
            f'{{"counter":{counter},"stateVersion":0,"timestamp":{timestamp}}}'
        )
        return request.response(ResponseCode.SUCCESS, None, version.to_ext(), text.encode())

    async def update_broker_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        state = self._state
        try:
            updates = parse_properties_text(request.body.decode("utf-8"))
            new_config = apply_live_updates(state.config, updates)
        except (ConfigError, UnicodeDecodeError, RemoteProtocolError) as exc:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"update of broker {state.config.broker_name}'s config refused: {exc}",
            )
        if state.on_config_changed is not None:
            state.on_config_changed(new_config)
        else:
            state.config = new_config
        timestamp, counter = state.config_version
        state.config_version = (now_ms(), counter + 1)
        return request.response(ResponseCode.SUCCESS, None, {})
