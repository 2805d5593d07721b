"""LaterAnswer: a handler's answer given by a callback after the handler returned.

Method: the class alone (attach before or after the outcome, awaited by a wrapper), then a real
RemotingServer on 127.0.0.1 whose handler returns one and gives or fails it from a timer callback:
the client gets the response, or SYSTEM_ERROR naming the failure, as a raising handler's.
"""

from __future__ import annotations

import asyncio

from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.server import LaterAnswer, RemotingServer, RequestContext

GIVEN, FAILED = 9001, 9002


def _request(code: int = GIVEN) -> RemotingCommand:
    return RemotingCommand.request(code, {})


def test_later_answer_delivers_once_whether_attached_before_or_after() -> None:
    request = _request()
    delivered: list[tuple[RemotingCommand | None, Exception | None]] = []
    before = LaterAnswer()
    before.attach(lambda response, exc: delivered.append((response, exc)))
    response = request.response(ResponseCode.SUCCESS, None, {})
    before.give(response)
    before.give(request.response(ResponseCode.SYSTEM_ERROR, "twice", {}))
    after = LaterAnswer()
    problem = ValueError("no")
    after.fail(problem)
    after.attach(lambda response, exc: delivered.append((response, exc)))
    assert delivered == [(response, None), (None, problem)]


async def test_later_answer_awaited_by_a_wrapper_returns_or_raises() -> None:
    request = _request()
    answer = LaterAnswer()
    asyncio.get_running_loop().call_later(0.01, answer.give, request.response(ResponseCode.SUCCESS, None, {}))
    assert (await answer).code == ResponseCode.SUCCESS  # type: ignore[union-attr]
    failed = LaterAnswer()
    failed.fail(KeyError("gone"))
    try:
        await failed
    except KeyError as exc:
        assert exc.args == ("gone",)
    else:
        raise AssertionError("awaiting a failed LaterAnswer returned")


async def test_server_writes_a_later_answer_or_the_failure_it_carries() -> None:
    def later(ctx: RequestContext, request: RemotingCommand) -> LaterAnswer:
        answer = LaterAnswer()
        loop = asyncio.get_running_loop()
        if request.code == GIVEN:
            response = request.response(ResponseCode.SUCCESS, "later", {})
            loop.call_later(0.05, answer.give, response)
        else:

            def fail() -> None:
                try:
                    raise RuntimeError("the read broke")
                except RuntimeError as exc:
                    answer.fail(exc)

            loop.call_later(0.05, fail)
        return answer

    server = RemotingServer("127.0.0.1", 0, {GIVEN: later, FAILED: later})
    await server.start()
    client = RemotingClient()
    try:
        addr = f"127.0.0.1:{server.port}"
        given, failed = await asyncio.gather(
            client.invoke(addr, _request()), client.invoke(addr, _request(FAILED))
        )
        assert (given.code, given.remark) == (ResponseCode.SUCCESS, "later")
        assert failed.code == ResponseCode.SYSTEM_ERROR and "the read broke" in (failed.remark or "")
        (connection,) = server.connections
        assert connection._inflight_requests == 0
    finally:
        await client.close()
        await server.stop()
