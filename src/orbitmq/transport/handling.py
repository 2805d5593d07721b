"""What the server makes of a handler's outcome: an answer ready now, or the wire answer to a failure.

A handler is called with the request and returns an awaitable of the response. Most are
``async def`` functions, whose awaitable runs in a task of its own. A handler that could
answer at once, having waited for nothing, returns :class:`ReadyAnswer` instead: the server
then writes the response in the loop turn that read the request, without a task, and the
answers of one read go out in one write (``FrameWriter.hold``). A ``ReadyAnswer`` is still an
awaitable, so a caller awaiting a handler (a wrapper, another handler) needs no change.

A handler whose answer waits for an event some callback will see (a long-polling pull waits for
a message to arrive) returns a :class:`LaterAnswer` and hands the callback its ``give``. No task
waits meanwhile: the response is written in the loop turn the event came in, so a pull woken by
a send is answered in the turn that read the send, in the same write as the send's answer when
both share a connection. A ``LaterAnswer`` is awaitable too.

:func:`failure_answer` maps what a handler raised to the response the client gets, the same
way for both kinds (see the ``server`` module docstring for the mapping and the log lines).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any

from orbitmq.errors import BadRequestError, BrokerResponseError, RemoteProtocolError
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.names import shorten
from orbitmq.transport.log_limit import LogLimiter
from orbitmq.transport.server_connection import ServerConnection

__all__ = ["REMARK_MAX_CHARS", "Handler", "LaterAnswer", "ReadyAnswer", "RequestContext", "failure_answer"]

REMARK_MAX_CHARS = 512
"""Longest remark a response carries; a handler's longer remark is cut."""


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Where a request came from; one instance per connection, shared by its requests."""

    connection: ServerConnection
    peer_host: str
    peer_port: int
    local_host: str
    local_port: int

    @property
    def peer_address(self) -> str:
        """``host:port`` of the client."""
        return f"{self.peer_host}:{self.peer_port}"


Handler = Callable[[RequestContext, RemotingCommand], Awaitable[RemotingCommand | None]]
"""``async def handler(ctx, request) -> response | None`` (or a :class:`ReadyAnswer`); ``None`` sends nothing."""


class ReadyAnswer:
    """A handler's response that is ready now: an awaitable that returns it without waiting."""

    __slots__ = ("response",)

    def __init__(self, response: RemotingCommand | None) -> None:
        self.response = response

    def __await__(self) -> Generator[Any, None, RemotingCommand | None]:
        return self.response
        yield  # a generator that returns at once: awaiting it never suspends


class LaterAnswer:
    """A handler's response that a callback gives later, on the event loop's thread.

    The server attaches its delivery (:meth:`attach`); whoever holds the answer calls
    :meth:`give` with the response or :meth:`fail` with what went wrong, once. Awaited instead
    (by a wrapper), it is a future's awaitable.
    """

    __slots__ = ("_deliver", "_outcome", "_future", "_settled")

    def __init__(self) -> None:
        self._deliver: Callable[[RemotingCommand | None, Exception | None], None] | None = None
        self._outcome: tuple[RemotingCommand | None, Exception | None] | None = None
        self._future: asyncio.Future[RemotingCommand | None] | None = None
        self._settled = False

    def attach(self, deliver: Callable[[RemotingCommand | None, Exception | None], None]) -> None:
        """Have ``deliver(response, exception)`` called with the outcome (now, if it is in)."""
        outcome, self._outcome = self._outcome, None
        if outcome is not None:
            deliver(*outcome)
        elif not self._settled:
            self._deliver = deliver

    def give(self, response: RemotingCommand | None) -> None:
        self._settle(response, None)

    def fail(self, exc: Exception) -> None:
        """Answer as the handler's raising ``exc`` would (call it from the ``except`` block)."""
        self._settle(None, exc)

    def _settle(self, response: RemotingCommand | None, exc: Exception | None) -> None:
        if self._settled:
            return
        self._settled = True
        deliver, self._deliver = self._deliver, None
        if deliver is not None:
            deliver(response, exc)  # kept by nobody after this: the response is on its way
            return
        future = self._future
        if future is None:
            self._outcome = (response, exc)  # for attach or await, later
        elif not future.done():
            _settle_future(future, response, exc)

    def __await__(self) -> Generator[Any, None, RemotingCommand | None]:
        future = self._future = asyncio.get_running_loop().create_future()
        outcome, self._outcome = self._outcome, None
        if outcome is not None:
            _settle_future(future, *outcome)
        return future.__await__()


def _settle_future(
    future: asyncio.Future[RemotingCommand | None], response: RemotingCommand | None, exc: Exception | None
) -> None:
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(response)


def failure_answer(
    log: LogLimiter, request: RemotingCommand, peer_address: str, exc: Exception
) -> tuple[RemotingCommand, bool]:
    """The response to ``request`` whose handler raised ``exc``, and whether that was a failure.

    Called from the ``except`` block that caught ``exc`` (the traceback logged is that one's).

    A ``BrokerResponseError`` is an answer the handler chose (not a failure); a refused field
    or body is one rate-limited warning line; anything else is logged with its traceback,
    rate-limited too.
    """
    if isinstance(exc, BrokerResponseError):
        return request.response(exc.code, exc.remark), False
    if isinstance(exc, BadRequestError):
        log.warning(
            f"bad-request:{request.code}:{exc.field}",
            "refused request code %d from %s: %s",
            request.code,
            peer_address,
            shorten(exc.remark, REMARK_MAX_CHARS),
        )
        return request.response(exc.code, exc.remark), True
    if isinstance(exc, RemoteProtocolError):
        log.warning(
            f"bad-body:{request.code}",
            "refused request code %d from %s: %s",
            request.code,
            peer_address,
            shorten(str(exc), REMARK_MAX_CHARS),
        )
        return request.response(ResponseCode.SYSTEM_ERROR, str(exc)), True
    log.error(
        f"handler-failed:{request.code}:{type(exc).__name__}",
        "handler for request code %d from %s failed",
        request.code,
        peer_address,
        exc_info=True,  # called while handling exc
    )
    return request.response(ResponseCode.SYSTEM_ERROR, str(exc) or type(exc).__name__), True
