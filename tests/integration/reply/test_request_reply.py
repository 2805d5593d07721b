"""Request-reply end to end: ``Producer.request`` and a push consumer answering it.

Method: a responder (push consumer plus producer) answers each request on RequestTopic with
``create_reply_message``; requesters send concurrently and must each get the reply meant for
them (matched by CORRELATION_ID), carried through <cluster>_REPLY_TOPIC and pushed by the
broker with PUSH_REPLY_MESSAGE_TO_CLIENT. A request nobody answers times out naming the
request. A reply the broker cannot deliver (its requester is gone) is refused with a remark.
"""

from __future__ import annotations

import asyncio

import pytest

from orbitmq.client import ConsumeResult, Message, Producer, PushConsumer, create_reply_message
from orbitmq.errors import BrokerResponseError, RequestTimeoutError
from orbitmq.model.message import MessageConst, MessageExt
from tests.support.processes import ServerProcess, create_topic

pytestmark = pytest.mark.integration


async def test_request_gets_its_own_reply_and_unanswered_request_times_out(standalone: ServerProcess) -> None:
    broker = f"127.0.0.1:{standalone.extra_ports[0]}"
    await asyncio.to_thread(create_topic, broker, "RequestTopic", 2)
    await asyncio.to_thread(create_topic, broker, "NobodyListens", 1)
    responder = Producer("PG_RESPONDER", standalone.addr)
    await responder.start()

    async def answer(messages: list[MessageExt]) -> ConsumeResult:
        for request in messages:
            await responder.send(create_reply_message(request, b"re: " + request.body))
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer("CG_RESPONDER", standalone.addr, answer)
    consumer.subscribe("RequestTopic", "*")
    await consumer.start()
    try:
        async with Producer("PG_REQUESTER", standalone.addr) as requester:
            replies = await asyncio.gather(
                *(
                    requester.request(Message("RequestTopic", f"q{index}".encode()), 15_000)
                    for index in range(5)
                )
            )
            assert [reply.body for reply in replies] == [f"re: q{index}".encode() for index in range(5)]
            assert all(reply.topic == "DefaultCluster_REPLY_TOPIC" for reply in replies)
            assert all(MessageConst.REPLY_MESSAGE_ARRIVE_TIME in reply.properties for reply in replies)
            with pytest.raises(RequestTimeoutError, match="no reply to request"):
                await requester.request(Message("NobodyListens", b"hello?"), 500)
            # A reply to a request whose requester is gone is refused, naming why.
            stale = Message("RequestTopic", b"x")
            stale.properties.update(
                {
                    MessageConst.CLUSTER: "DefaultCluster",
                    MessageConst.CORRELATION_ID: "gone",
                    MessageConst.MESSAGE_REPLY_TO_CLIENT: "127.0.0.1@nobody",
                }
            )
            with pytest.raises(BrokerResponseError, match="not connected"):
                await responder.send(create_reply_message(stale, b"late"))
    finally:
        await consumer.shutdown()
        await responder.shutdown()
