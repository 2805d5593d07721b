"""Raw remoting commands the delay and transaction integration tests send to a broker process.

Sends, pulls (draining a queue from offset 0) and VIEW_MESSAGE_BY_ID, as RocketMQ clients
issue them, over one RemotingClient.
"""

from __future__ import annotations

import asyncio
import time

from orbitmq.model.message import MessageExt
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import SendMessageRequestHeader
from orbitmq.protocol.message_codec import decode_stored_message, decode_stored_messages
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.protocol.properties import encode_properties
from orbitmq.transport.connection import RemotingClient


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def send_command(
    topic: str, body: bytes, properties: dict[str, str], *, group: str = "PG", queue_id: int = 0
) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group=group,
        topic=topic,
        queue_id=queue_id,
        born_timestamp=now_ms(),
        properties=encode_properties({"UNIQ_KEY": f"U{time.time_ns()}", "WAIT": "true", **properties}),
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext(), body)


async def send(client: RemotingClient, addr: str, topic: str, body: bytes, properties: dict[str, str]) -> int:
    """Send one message; return the commit-log offset of what the broker stored."""
    response = await client.invoke(addr, send_command(topic, body, properties))
    if response.code != ResponseCode.SUCCESS:
        raise AssertionError(f"send to {topic} failed: {response.code} {response.remark}")
    return decode_offset_msg_id(response.ext_fields["msgId"]).commit_log_offset


async def view(client: RemotingClient, addr: str, commit_log_offset: int) -> MessageExt:
    request = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(commit_log_offset)})
    response = await client.invoke(addr, request)
    if response.code != ResponseCode.SUCCESS:
        raise AssertionError(f"no message at commit-log offset {commit_log_offset}: {response.remark}")
    return decode_stored_message(response.body)[0]


async def pull_all(client: RemotingClient, addr: str, topic: str, queue_id: int = 0) -> list[MessageExt]:
    """Every message of one queue, from offset 0 (PULL_NOT_FOUND ends it)."""
    found: list[MessageExt] = []
    queue_offset = 0
    while True:
        request = RemotingCommand.request(
            RequestCode.PULL_MESSAGE,
            {
                "consumerGroup": "CG_RAW",
                "topic": topic,
                "queueId": str(queue_id),
                "queueOffset": str(queue_offset),
                "maxMsgNums": "32",
                "sysFlag": "4",
                "commitOffset": "0",
                "suspendTimeoutMillis": "0",
                "subscription": "*",
                "subVersion": "0",
            },
        )
        response = await client.invoke(addr, request)
        if response.code != ResponseCode.SUCCESS:
            return found
        found.extend(decode_stored_messages(response.body))
        queue_offset = int(response.ext_fields["nextBeginOffset"])


async def pull_until(
    client: RemotingClient, addr: str, topic: str, count: int, timeout_s: float, queue_id: int = 0
) -> list[MessageExt]:
    """Poll a queue until it holds at least ``count`` messages."""
    deadline = time.monotonic() + timeout_s
    while True:
        messages = await pull_all(client, addr, topic, queue_id)
        if len(messages) >= count:
            return messages
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{topic}/{queue_id}: {len(messages)} of {count} messages after {timeout_s} s"
            )
        await asyncio.sleep(0.05)
