"""Timing every remote call: the transport's ``on_handled`` hook, one object per server.

The server takes one ``perf_counter_ns`` pair around each handler and calls :class:`RpcTimer`
with the request code, the response (None when oneway), whether the handler failed and the
nanoseconds spent; the timer adds them to ``rocketmq_rpc_latency`` under the request code, the
response code and the result (``success``, ``oneway``, ``process_request_failed``). The common
case costs one dictionary lookup with an integer key (request code and response code packed)
and an integer bucket count: no wrapper coroutine, no label tuple built per call. Requests that
may be held (PULL_MESSAGE, POP_MESSAGE) are labelled ``is_long_polling=true`` when they took
longer than :data:`LONG_POLL_THRESHOLD_MS`, which only a parked request does.
"""

from __future__ import annotations

from orbitmq.metrics.recorder import LatencyHistogram, Recorder
from orbitmq.protocol.codes import RequestCode
from orbitmq.protocol.command import RemotingCommand

__all__ = ["LONG_POLL_THRESHOLD_MS", "RpcTimer", "request_code_names"]

LONG_POLL_THRESHOLD_MS = 500.0
_LONG_POLL_THRESHOLD_NS = int(LONG_POLL_THRESHOLD_MS * 1_000_000)
_HOLDING_CODES = frozenset((int(RequestCode.PULL_MESSAGE), int(RequestCode.POP_MESSAGE)))
_CODE_SHIFT = 32


def request_code_names() -> dict[int, str]:
    """Request code -> the lower-case name 5.x puts in ``request_code`` labels."""
    return {int(code): code.name.lower() for code in RequestCode}


class RpcTimer:
    """Records each handled request's latency in ``recorder`` (a ``transport`` ``HandledHook``)."""

    __slots__ = ("_recorder", "_success")

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        # (request code << 32 | response code) -> the ``success`` histogram of that pair.
        self._success: dict[int, LatencyHistogram] = {}

    def __call__(self, code: int, response: RemotingCommand | None, failed: bool, elapsed_ns: int) -> None:
        if response is not None and not failed:
            if elapsed_ns > _LONG_POLL_THRESHOLD_NS and code in _HOLDING_CODES:
                self._recorder.rpc_histogram(code, response.code, True, "success").observe_ns(elapsed_ns)
                return
            key = (code << _CODE_SHIFT) | (response.code & 0xFFFFFFFF)
            histogram = self._success.get(key)
            if histogram is None:
                histogram = self._success[key] = self._recorder.rpc_histogram(
                    code, response.code, False, "success"
                )
            histogram.observe_ns(elapsed_ns)
        elif response is None:
            self._recorder.rpc_histogram(code, -1, False, "oneway").observe_ns(elapsed_ns)
        else:
            self._recorder.rpc_histogram(code, response.code, False, "process_request_failed").observe_ns(
                elapsed_ns
            )
