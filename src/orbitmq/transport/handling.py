"""What the server makes of a handler's outcome: an answer ready now, or the wire answer to a failure.

A handler is called with the request and returns an awaitable of the response. Most are
``async def`` functions, whose awaitable runs in a task of its own. A handler that could
answer at once, having waited for nothing, returns :class:`ReadyAnswer` instead: the server
then writes the response in the loop turn that read the request, without a task, and the
answers of one read go out in one write (``FrameWriter.hold``). A ``ReadyAnswer`` is still an
awaitable, so a caller awaiting a handler (a wrapper, another handler) needs no change.

:func:`failure_answer` maps what a handler raised to the response the client gets, the same
way for both kinds (see the ``server`` module docstring for the mapping and the log lines).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any

from orbitmq.errors import BadRequestError, BrokerResponseError, RemoteProtocolError
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.names import shorten
from orbitmq.transport.log_limit import LogLimiter
from orbitmq.transport.server_connection import ServerConnection

__all__ = ["REMARK_MAX_CHARS", "Handler", "ReadyAnswer", "RequestContext", "failure_answer"]

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
