"""Timing every remote call: wraps a server's handler table, one wrapper per request code.

The wrapper measures the handler's time with ``time.perf_counter`` and adds it to
``rocketmq_rpc_latency`` under the request code, the response code and the result
(``success``, ``oneway``, ``process_request_failed``). Requests that may be held
(PULL_MESSAGE, POP_MESSAGE) are labelled ``is_long_polling=true`` when they took longer than
:data:`LONG_POLL_THRESHOLD_MS`, which only a parked request does.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from orbitmq.errors import BrokerResponseError
from orbitmq.metrics.recorder import Histogram, Recorder
from orbitmq.protocol.codes import FLAG_ONEWAY, RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand

__all__ = ["LONG_POLL_THRESHOLD_MS", "instrument_handlers", "request_code_names"]

LONG_POLL_THRESHOLD_MS = 500.0
_HOLDING_CODES = frozenset((RequestCode.PULL_MESSAGE, RequestCode.POP_MESSAGE))

_H = TypeVar("_H", bound=Callable[..., Awaitable[RemotingCommand | None]])


def request_code_names() -> dict[int, str]:
    """Request code -> the lower-case name 5.x puts in ``request_code`` labels."""
    return {int(code): code.name.lower() for code in RequestCode}


def instrument_handlers(handlers: Mapping[int, _H], recorder: Recorder) -> dict[int, Any]:
    """A copy of ``handlers`` whose every handler also records its latency in ``recorder``."""
    return {code: _timed(int(code), handler, recorder) for code, handler in handlers.items()}


def _timed(code: int, handler: _H, recorder: Recorder) -> Callable[[Any, RemotingCommand], Awaitable[Any]]:
    holds = code in _HOLDING_CODES
    count_rpc = recorder.count_rpc
    clock = time.perf_counter
    by_response: dict[int, Histogram] = {}

    async def timed(ctx: Any, request: RemotingCommand) -> RemotingCommand | None:
        started = clock()
        try:
            response = await handler(ctx, request)
        except BrokerResponseError as exc:
            count_rpc(code, exc.code, False, "success", (clock() - started) * 1000)
            raise
        except Exception:
            count_rpc(
                code, ResponseCode.SYSTEM_ERROR, False, "process_request_failed", (clock() - started) * 1000
            )
            raise
        elapsed_ms = (clock() - started) * 1000
        if request.flag & FLAG_ONEWAY or response is None:
            count_rpc(code, -1, False, "oneway", elapsed_ms)
        elif holds and elapsed_ms > LONG_POLL_THRESHOLD_MS:
            count_rpc(code, response.code, True, "success", elapsed_ms)
        else:
            # The common case: this code's histogram per response code, found with one lookup.
            histogram = by_response.get(response.code)
            if histogram is None:
                histogram = recorder.rpc_histogram(code, response.code, False, "success")
                by_response[response.code] = histogram
            histogram.observe(elapsed_ms)
        return response

    return timed
