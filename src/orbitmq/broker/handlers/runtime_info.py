"""GET_BROKER_RUNTIME_INFO (28): the broker's runtime table (operations-features §3.3).

Answers ``{"table": {key: string}}`` with RocketMQ's keys, every value a string, so
``mqadmin brokerStatus``, rocketmq-dashboard's cluster page and rocketmq-exporter read it as
they read a Java broker's. The figures come from the broker's message counters
(``metrics.Recorder``, always on: a scrape of ``/metrics`` and this request read the same
counts) and from the store. The three-number TPS keys (``putTps``, ``getTransferedTps``,
``getTotalTps`` ...) are "10 s window, 60 s, 600 s" as RocketMQ writes them.

OrbitMQ counts since start-up: ``msgPutTotalTodayNow``/``msgGetTotalTodayNow`` are the totals
since the broker started, and the ``...Morning`` keys are 0.
"""

from __future__ import annotations

import shutil

import orjson

from orbitmq import __version__
from orbitmq.broker.handlers import BrokerState, now_ms
from orbitmq.protocol.codes import ORBITMQ_VERSION, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.server import RequestContext

_GIB = 1024**3


def _tps(values: tuple[float, float, float]) -> str:
    return " ".join(f"{value:.2f}" for value in values)


def _runtime(elapsed_ms: int) -> str:
    seconds = elapsed_ms // 1000
    days, seconds = divmod(seconds, 86_400)
    hours, seconds = divmod(seconds, 3_600)
    minutes, seconds = divmod(seconds, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"


class RuntimeInfoHandlers:
    """GET_BROKER_RUNTIME_INFO."""

    def __init__(self, state: BrokerState, boot_timestamp_ms: int) -> None:
        self._state = state
        self._boot_timestamp_ms = boot_timestamp_ms

    def table(self) -> dict[str, str]:
        """The runtime table as of now."""
        state = self._state
        store = state.store
        current_ms = now_ms()
        recorder = state.recorder
        windows = (10_000, 60_000, 600_000)
        rates = (
            [recorder.broker_tps(current_ms, window) for window in windows] if recorder else [(0.0, 0.0)] * 3
        )
        put_total, get_total = recorder.totals() if recorder else (0, 0)
        put_tps = (rates[0][0], rates[1][0], rates[2][0])
        get_tps = (rates[0][1], rates[1][1], rates[2][1])
        min_offset, max_offset = store.min_commit_log_offset, store.max_commit_log_offset
        earliest_ms = store.store_timestamp_at(min_offset) if max_offset > min_offset else 0
        table = {
            "brokerVersionDesc": f"OrbitMQ {__version__} (V4_9_8 protocol)",
            "brokerVersion": str(ORBITMQ_VERSION),
            "bootTimestamp": str(self._boot_timestamp_ms),
            "runtime": _runtime(current_ms - self._boot_timestamp_ms),
            "msgPutTotalTodayNow": str(put_total),
            "msgGetTotalTodayNow": str(get_total),
            "msgPutTotalTodayMorning": "0",
            "msgGetTotalTodayMorning": "0",
            "msgPutTotalYesterdayMorning": "0",
            "msgGetTotalYesterdayMorning": "0",
            "putTps": _tps(put_tps),
            "getTransferedTps": _tps(get_tps),
            "getFoundTps": _tps(get_tps),
            "getTotalTps": _tps(get_tps),
            "getMissTps": _tps((0.0, 0.0, 0.0)),
            "commitLogMinOffset": str(min_offset),
            "commitLogMaxOffset": str(max_offset),
            "dispatchBehindBytes": str(max(0, max_offset - store.confirm_commit_log_offset)),
            "remainHowManyDataToFlush": f"{max(0, max_offset - store.flushed_commit_log_offset) / 1024:.2f} KB",
            "earliestMessageTimeStamp": str(max(earliest_ms, 0)),
            "startAcceptSendRequestTimeStamp": "0",
        }
        try:
            usage = shutil.disk_usage(store.store_path)
        except OSError:
            return table
        ratio = 1 - usage.free / usage.total if usage.total else 0.0
        table["commitLogDirCapacity"] = (
            f"Total : {usage.total / _GIB:.1f} GiB, Free : {usage.free / _GIB:.1f} GiB."
        )
        table["commitLogDiskRatio"] = f"{ratio:.4f}"
        table[f"commitLogDiskRatio_{store.store_path}"] = f"{ratio:.4f}"
        return table

    async def get_broker_runtime_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        body = orjson.dumps({"table": self.table()})
        return request.response(ResponseCode.SUCCESS, None, {}, body)
