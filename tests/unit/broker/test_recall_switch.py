"""RECALL_MESSAGE and the broker's recallMessageEnable switch, against an in-process broker.

Method: a BrokerApp on 127.0.0.1 (port 0, tmp dir) with the switch at its default (off, as in
RocketMQ) or on; raw RECALL_MESSAGE commands with a handle that is not one.
"""

from __future__ import annotations

from pathlib import Path

from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import CreateTopicRequestHeader
from orbitmq.transport.connection import RemotingClient
from tests.unit.broker._apps import start_broker_app

TOPIC = "RecallTopic"


async def _recall_bad_handle(tmp_path: Path, client: RemotingClient, **conf: str) -> RemotingCommand:
    app = await start_broker_app(tmp_path, regionId="RegionR", **conf)
    try:
        create = CreateTopicRequestHeader(topic=TOPIC, read_queue_nums=1, write_queue_nums=1)
        request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext())
        assert (await client.invoke(app.address, request)).code == ResponseCode.SUCCESS
        ext = {"producerGroup": "PG_RECALL", "topic": TOPIC, "recallHandle": "not-a-handle"}
        return await client.invoke(app.address, RemotingCommand.request(RequestCode.RECALL_MESSAGE, ext))
    finally:
        await app.shutdown()


async def test_recall_is_refused_while_recall_message_enable_is_off(
    tmp_path: Path, client: RemotingClient
) -> None:
    # RocketMQ 5.5's default (oracle: recall_bad_handle): refused before the handle is read.
    answer = await _recall_bad_handle(tmp_path, client)
    assert (answer.code, answer.remark) == (
        ResponseCode.NO_PERMISSION,
        "recall failed, operation is forbidden",
    )
    assert answer.ext_fields.get("MSG_REGION") == "RegionR"


async def test_recall_with_recall_message_enable_reads_the_handle(
    tmp_path: Path, client: RemotingClient
) -> None:
    answer = await _recall_bad_handle(tmp_path, client, recallMessageEnable="true")
    assert answer.code == ResponseCode.ILLEGAL_OPERATION, answer.remark
    assert answer.ext_fields.get("MSG_REGION") == "RegionR"
