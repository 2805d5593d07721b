"""RemotingServer's ``eager_codes``: handlers started in the read callback, a task only once they wait.

Goal: a request of an eager code that is answered without waiting costs no task, and one that
waits behaves as a task-run handler does (its answer, its errors, its cancellation at stop).
Method: a real server on port 0 and a RemotingClient in the same loop, on asyncio's loop and
on uvloop's (``conftest.py``); the handlers note whether a task runs them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from orbitmq.errors import BadRequestError
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.server import RemotingServer, RequestContext

QUICK, WAITS, FAILS_LATE, REFUSES, PARKS, QUICK_IN_TASK = 2001, 2002, 2003, 2004, 2005, 2006
EAGER = (QUICK, WAITS, FAILS_LATE, REFUSES, PARKS)


class Handlers:
    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[object] | None] = []
        self.parked = asyncio.Event()
        self.released: list[str] = []

    async def quick(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.tasks.append(asyncio.current_task())
        return request.response(ResponseCode.SUCCESS, None, {"v": request.ext_fields.get("v", "")})

    async def waits(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        before = asyncio.current_task()
        await asyncio.sleep(0)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, future.set_result, "late")
        value = await future
        self.tasks += [before, asyncio.current_task()]
        return request.response(ResponseCode.SUCCESS, None, {"v": value})

    async def fails_late(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(0.001)
        raise ValueError("broken after a wait")

    async def refuses(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise BadRequestError("field 'x' is wrong", int(ResponseCode.SYSTEM_ERROR), "x")

    async def parks(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.parked.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.released.append("cancelled")
            raise
        return request.response(ResponseCode.SUCCESS)


@pytest.fixture
async def served() -> AsyncIterator[tuple[RemotingServer, Handlers, RemotingClient]]:
    handlers = Handlers()
    table = {
        QUICK: handlers.quick,
        WAITS: handlers.waits,
        FAILS_LATE: handlers.fails_late,
        REFUSES: handlers.refuses,
        PARKS: handlers.parks,
        QUICK_IN_TASK: handlers.quick,
    }
    server = RemotingServer("127.0.0.1", 0, table, eager_codes=EAGER)
    await server.start()
    client = RemotingClient(connect_timeout_ms=1000)
    try:
        yield server, handlers, client
    finally:
        await client.close()
        await server.stop(grace_s=0.1)


def _addr(server: RemotingServer) -> str:
    return f"127.0.0.1:{server.port}"


async def test_server_eager_handler_answers_without_a_task(
    served: tuple[RemotingServer, Handlers, RemotingClient],
) -> None:
    server, handlers, client = served
    answers = await asyncio.gather(
        *(client.invoke(_addr(server), RemotingCommand.request(QUICK, {"v": str(n)})) for n in range(5))
    )
    assert [answer.ext_fields["v"] for answer in answers] == [str(n) for n in range(5)]
    assert handlers.tasks == [None] * 5
    await client.invoke(_addr(server), RemotingCommand.request(QUICK_IN_TASK))
    assert handlers.tasks[-1] is not None  # a code not named eager still runs in its own task


async def test_server_eager_handler_that_waits_goes_on_in_a_task(
    served: tuple[RemotingServer, Handlers, RemotingClient],
) -> None:
    server, handlers, client = served
    answer = await client.invoke(_addr(server), RemotingCommand.request(WAITS))
    assert (answer.code, answer.ext_fields["v"]) == (ResponseCode.SUCCESS, "late")
    before, after = handlers.tasks
    assert before is None and after is not None


async def test_server_eager_handler_errors_answer_as_task_ones(
    served: tuple[RemotingServer, Handlers, RemotingClient],
) -> None:
    server, _, client = served
    late = await client.invoke(_addr(server), RemotingCommand.request(FAILS_LATE))
    assert late.code == ResponseCode.SYSTEM_ERROR and "broken after a wait" in (late.remark or "")
    refused = await client.invoke(_addr(server), RemotingCommand.request(REFUSES))
    assert refused.code == ResponseCode.SYSTEM_ERROR and "field 'x' is wrong" in (refused.remark or "")
    still = await client.invoke(_addr(server), RemotingCommand.request(QUICK, {"v": "after"}))
    assert still.ext_fields["v"] == "after"


async def test_server_eager_handler_parked_at_stop_is_cancelled(
    served: tuple[RemotingServer, Handlers, RemotingClient],
) -> None:
    server, handlers, client = served
    parked = asyncio.ensure_future(client.invoke(_addr(server), RemotingCommand.request(PARKS), 5000))
    await asyncio.wait_for(handlers.parked.wait(), 5)
    await server.stop(grace_s=0.05)
    assert handlers.released == ["cancelled"]
    parked.cancel()
    await asyncio.gather(parked, return_exceptions=True)
