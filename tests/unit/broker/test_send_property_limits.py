"""Property edge cases of a send: a huge DELAY level, and a property string at its limit.

Method: a BrokerApp on 127.0.0.1 (port 0, tmp dir, levels "1s 2s") driven with raw
SEND_MESSAGE and SEND_BATCH_MESSAGE commands; where each message went is read from the store.
The limit is RocketMQ's: the client's property string may be 32,767 bytes (a Java broker's
``msgContentCheck``), a longer one is MESSAGE_ILLEGAL (13).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orbitmq.broker.app import BrokerApp
from orbitmq.broker.schedule import SCHEDULE_TOPIC, delay_level_of
from orbitmq.model.message import MessageConst
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import SendMessageRequestHeader
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.protocol.properties import MAX_PROPERTIES_BYTES, encode_properties
from orbitmq.store.message_store import GetStatus
from orbitmq.transport.connection import RemotingClient
from tests.unit.broker._apps import start_broker_app

TOPIC = "PropLimits"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    app = await start_broker_app(tmp_path, messageDelayLevel="1s 2s")
    try:
        yield app
    finally:
        await app.shutdown()


def send_command(
    properties_text: str, *, code: int = RequestCode.SEND_MESSAGE, body: bytes = b"x"
) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="PG",
        topic=TOPIC,
        queue_id=0,
        born_timestamp=time.time_ns() // 1_000_000,
        properties=properties_text,
        batch=code == RequestCode.SEND_BATCH_MESSAGE,
    )
    return RemotingCommand.request(code, header.to_ext(), body)


def sized_properties(total_bytes: int) -> dict[str, str]:
    """UNIQ_KEY plus a filler property, encoded to exactly ``total_bytes``."""
    head = {"UNIQ_KEY": f"U{time.time_ns()}"}
    filler = total_bytes - len(encode_properties({**head, "FILL": ""}).encode())
    properties = {**head, "FILL": "f" * filler}
    assert len(encode_properties(properties).encode()) == total_bytes
    return properties


def test_delay_level_of_reads_any_number_of_digits() -> None:
    assert delay_level_of({MessageConst.DELAY_TIME_LEVEL: "3"}) == 3
    assert delay_level_of({MessageConst.DELAY_TIME_LEVEL: "0003"}) == 3
    assert delay_level_of({MessageConst.DELAY_TIME_LEVEL: "2147483647"}) > 18
    assert delay_level_of({MessageConst.DELAY_TIME_LEVEL: "9" * 5000}) > 18
    for text in ("", "0", "-1", "two", "²"):
        assert delay_level_of({MessageConst.DELAY_TIME_LEVEL: text}) == 0


async def test_send_delay_level_above_max_waits_at_highest_level(
    broker: BrokerApp, client: RemotingClient
) -> None:
    properties = {"UNIQ_KEY": "U-huge-delay", MessageConst.DELAY_TIME_LEVEL: "2147483647"}
    response = await client.invoke(broker.address, send_command(encode_properties(properties)))
    assert response.code == ResponseCode.SUCCESS, response.remark
    store = broker.state.store
    assert store.get_max_queue_offset(TOPIC, 0) == 0  # not delivered at once
    assert store.get_max_queue_offset(SCHEDULE_TOPIC, 1) == 1  # level 2, the highest of "1s 2s"
    held = store.get_messages(SCHEDULE_TOPIC, 1, 0, 1)
    assert held.status is GetStatus.FOUND
    assert decode_stored_message(held.buffers[0])[0].properties[MessageConst.DELAY_TIME_LEVEL] == "2"


async def test_send_properties_at_limit_accepted_one_more_refused(
    broker: BrokerApp, client: RemotingClient
) -> None:
    at_limit = sized_properties(MAX_PROPERTIES_BYTES)
    response = await client.invoke(broker.address, send_command(encode_properties(at_limit)))
    assert response.code == ResponseCode.SUCCESS, response.remark
    stored = broker.state.store.get_messages(TOPIC, 0, 0, 1)
    assert stored.status is GetStatus.FOUND
    message = decode_stored_message(stored.buffers[0])[0]
    assert message.properties["FILL"] == at_limit["FILL"]

    over = sized_properties(MAX_PROPERTIES_BYTES + 1)
    response = await client.invoke(broker.address, send_command(encode_properties(over)))
    assert response.code == ResponseCode.MESSAGE_ILLEGAL, response.remark
    assert broker.state.store.get_max_queue_offset(TOPIC, 0) == 1


async def test_send_batch_member_properties_at_limit_accepted(
    broker: BrokerApp, client: RemotingClient
) -> None:
    body = encode_batch(
        [(0, b"a", sized_properties(MAX_PROPERTIES_BYTES)), (0, b"b", {"UNIQ_KEY": "U-small"})]
    )
    response = await client.invoke(
        broker.address, send_command("", code=RequestCode.SEND_BATCH_MESSAGE, body=body)
    )
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert broker.state.store.get_max_queue_offset(TOPIC, 0) == 2
