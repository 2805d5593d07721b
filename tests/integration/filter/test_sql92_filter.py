"""SQL92 property filters end to end: OrbitMQ's consumers against a standalone server.

Method: one server with ``enablePropertyFilter=true`` for the module. A producer sends
messages whose properties (price, region) and tags vary; push and pull consumers subscribed
with ``MessageSelector.by_sql`` must get exactly the messages the expression selects, in the
same run as a tag subscription on the same topic. A pull carrying an expression that does not
compile is answered SUBSCRIPTION_PARSE_FAILED naming the position, and the server keeps
serving.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from orbitmq.client import ConsumeResult, Message, MessageSelector, Producer, PullConsumer, PushConsumer
from orbitmq.errors import FilterExpressionError
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import PullMessageRequestHeader
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, create_topic, start_standalone, write_conf

pytestmark = pytest.mark.integration

COUNT = 60
SQL = "price >= 20 AND region IN ('eu', 'apac') AND TAGS <> 'skip'"


def _selected(index: int) -> bool:
    return index >= 20 and index % 3 != 1 and index % 5 != 0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp_path = tmp_path_factory.mktemp("sql92")
    conf = write_conf(tmp_path / "broker.conf", {"enablePropertyFilter": True})
    proc = start_standalone(tmp_path, "-c", str(conf))
    try:
        yield proc
    finally:
        proc.kill()


def _broker(server: ServerProcess) -> str:
    return f"127.0.0.1:{server.extra_ports[0]}"


async def _produce(server: ServerProcess, topic: str) -> None:
    await asyncio.to_thread(create_topic, _broker(server), topic, 2)
    async with Producer("PG_SQL", server.addr) as producer:
        for index in range(COUNT):
            message = Message(topic, f"m{index}".encode())
            message.tags = "skip" if index % 5 == 0 else "keep"
            message.properties["price"] = str(index)
            message.properties["region"] = ("eu", "us", "apac")[index % 3]
            await producer.send(message)


async def test_push_consumer_by_sql_gets_exactly_the_selected_messages(server: ServerProcess) -> None:
    topic = "SqlPush"
    await _produce(server, topic)
    got: list[str] = []
    tagged: list[str] = []
    done = asyncio.Event()
    tags_done = asyncio.Event()
    expected = sorted(f"m{index}" for index in range(COUNT) if _selected(index))
    expected_tagged = [f"m{index}" for index in range(COUNT) if index % 5 == 0]

    async def on_sql(messages: list) -> ConsumeResult:  # type: ignore[type-arg]
        got.extend(m.body.decode() for m in messages)
        if len(got) >= len(expected):
            done.set()
        return ConsumeResult.CONSUME_SUCCESS

    async def on_tag(messages: list) -> ConsumeResult:  # type: ignore[type-arg]
        tagged.extend(m.body.decode() for m in messages)
        if len(tagged) >= len(expected_tagged):
            tags_done.set()
        return ConsumeResult.CONSUME_SUCCESS

    sql_consumer = PushConsumer(
        "CG_SQL", server.addr, on_sql, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    sql_consumer.subscribe(topic, MessageSelector.by_sql(SQL))
    tag_consumer = PushConsumer(
        "CG_TAG", server.addr, on_tag, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    tag_consumer.subscribe(topic, MessageSelector.by_tag("skip"))
    await sql_consumer.start()
    await tag_consumer.start()
    try:
        await asyncio.wait_for(asyncio.gather(done.wait(), tags_done.wait()), 30)
        await asyncio.sleep(0.5)  # anything extra would arrive now
    finally:
        await sql_consumer.shutdown()
        await tag_consumer.shutdown()
    assert sorted(got) == expected
    assert sorted(tagged, key=lambda body: int(body[1:])) == expected_tagged


async def test_pull_consumer_by_sql_reads_only_selected_messages(server: ServerProcess) -> None:
    topic = "SqlPull"
    await _produce(server, topic)
    consumer = PullConsumer("CG_SQL_PULL", server.addr)
    await consumer.start()
    got: list[str] = []
    try:
        for mq in await consumer.fetch_message_queues(topic):
            async for batch in consumer.pull_range(
                mq, 0, 1000, expression=MessageSelector.by_sql("price < 10")
            ):
                got.extend(m.body.decode() for m in batch)
    finally:
        await consumer.shutdown()
    assert sorted(got, key=lambda body: int(body[1:])) == [f"m{index}" for index in range(10)]


async def test_pull_with_bad_sql_answers_parse_failed_with_position(server: ServerProcess) -> None:
    with pytest.raises(FilterExpressionError, match="column 9"):
        MessageSelector.by_sql("price > ")
    client = RemotingClient()
    try:
        header = PullMessageRequestHeader(
            consumer_group="CG_BAD",
            topic="TBW102",
            queue_id=0,
            queue_offset=0,
            sys_flag=0x4,
            subscription="price >> 3",
            expression_type="SQL92",
        )
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        response = await client.invoke(_broker(server), request, 5000)
        assert response.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "line 1, column 8" in (response.remark or "")
        # The server keeps serving after the bad request.
        header = PullMessageRequestHeader(
            consumer_group="CG_BAD",
            topic="TBW102",
            queue_id=0,
            queue_offset=0,
            sys_flag=0x4,
            subscription="*",
        )
        response = await client.invoke(
            _broker(server), RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext()), 5000
        )
        assert response.code in (
            ResponseCode.PULL_NOT_FOUND,
            ResponseCode.PULL_OFFSET_MOVED,
            ResponseCode.SUCCESS,
        )
    finally:
        await client.close()
