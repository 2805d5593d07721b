"""Timing every remote call: the transport's ``on_handled`` hook, one per server.

The server takes one ``perf_counter_ns`` pair around each handler and calls the hook that
:func:`rpc_timer` built with the request code, the response (None when oneway), whether the handler failed and the
nanoseconds spent; the timer adds them to ``rocketmq_rpc_latency`` under the request code, the
response code and the result (``success``, ``oneway``, ``process_request_failed``). The common
case costs one dictionary lookup with an integer key (request code and response code packed)
and an integer bucket count: no wrapper coroutine, no label tuple built per call. Requests that
may be held (PULL_MESSAGE, POP_MESSAGE) are labelled ``is_long_polling=true`` when they took
longer than :data:`LONG_POLL_THRESHOLD_MS`, which only a parked request does.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

from orbitmq.metrics.recorder import RPC_LATENCY_BOUNDS_NS, LatencyHistogram, Recorder
from orbitmq.protocol.codes import RequestCode
from orbitmq.protocol.command import RemotingCommand

__all__ = ["LONG_POLL_THRESHOLD_MS", "request_code_names", "rpc_timer"]

LONG_POLL_THRESHOLD_MS = 500.0
_LONG_POLL_THRESHOLD_NS = int(LONG_POLL_THRESHOLD_MS * 1_000_000)
_HOLDING_CODES = frozenset(
    (int(RequestCode.PULL_MESSAGE), int(RequestCode.LITE_PULL_MESSAGE), int(RequestCode.POP_MESSAGE))
)
_CODE_SHIFT = 32


def request_code_names() -> dict[int, str]:
    """Request code -> the lower-case name 5.x puts in ``request_code`` labels."""
    return {int(code): code.name.lower() for code in RequestCode}


def rpc_timer(recorder: Recorder) -> Callable[[int, RemotingCommand | None, bool, int], None]:
    """The ``on_handled`` hook that records each handled request's latency in ``recorder``.

    A closure rather than an object with ``__call__``: calling a plain function is the cheapest
    call Python has, and the common case (an answered request, not failed, not parked) runs a
    dozen bytecodes: one integer-keyed lookup, one ``bisect``, two additions.
    """
    success: dict[int, LatencyHistogram] = {}  # (request code << 32 | response code) -> histogram
    bounds = RPC_LATENCY_BOUNDS_NS

    def rare(code: int, response: RemotingCommand | None, failed: bool, elapsed_ns: int) -> None:
        if response is None:
            recorder.rpc_histogram(code, -1, False, "oneway").observe_ns(elapsed_ns)
        elif failed:
            recorder.rpc_histogram(code, response.code, False, "process_request_failed").observe_ns(
                elapsed_ns
            )
        else:
            holding = code in _HOLDING_CODES
            recorder.rpc_histogram(code, response.code, holding, "success").observe_ns(elapsed_ns)

    def on_handled(code: int, response: RemotingCommand | None, failed: bool, elapsed_ns: int) -> None:
        if response is None or failed or elapsed_ns > _LONG_POLL_THRESHOLD_NS:
            rare(code, response, failed, elapsed_ns)
            return
        key = (code << _CODE_SHIFT) | (response.code & 0xFFFFFFFF)
        histogram = success.get(key)
        if histogram is None:
            histogram = success[key] = recorder.rpc_histogram(code, response.code, False, "success")
        histogram.counts[bisect_left(bounds, elapsed_ns)] += 1
        histogram.total_ns += elapsed_ns

    return on_handled
