"""PullConsumer.pull_range against a scripted broker: ranges, filtered gaps and removed data."""

from __future__ import annotations

import pytest

from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.errors import ClientError
from orbitmq.model.message import MessageExt, MessageQueue
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_codec import encode_stored_message

MQ = MessageQueue("T", "broker-a", 0)


class ScriptedBroker:
    """Answers pulls from a dict queue_offset -> record; offsets below ``min_offset`` are gone."""

    def __init__(self, stored: range, min_offset: int = 0, filtered: frozenset[int] = frozenset()) -> None:
        self.stored = stored
        self.min_offset = min_offset
        self.filtered = filtered
        self.requests: list[dict[str, str]] = []

    def find_broker_addr(self, broker_name: str, broker_id: int = 0, *, only_this: bool = False) -> str:
        return "127.0.0.1:1"

    def refresh_route_soon(self, topic: str) -> None:
        raise AssertionError(f"no route refresh expected for {topic}")

    async def invoke_broker(
        self, broker_name: str, request: RemotingCommand, timeout_ms: int | None = None, broker_id: int = 0
    ) -> RemotingCommand:
        ext = request.ext_fields
        self.requests.append(ext)
        start, count = int(ext["queueOffset"]), int(ext["maxMsgNums"])
        max_offset = self.stored.stop
        answer = {
            "minOffset": str(self.min_offset),
            "maxOffset": str(max_offset),
            "suggestWhichBrokerId": "0",
        }
        if start < self.min_offset or start > max_offset:
            answer["nextBeginOffset"] = str(self.min_offset if start < self.min_offset else max_offset)
            return request.response(ResponseCode.PULL_OFFSET_MOVED, "moved", answer)
        if start == max_offset:
            answer["nextBeginOffset"] = str(start)
            return request.response(ResponseCode.PULL_NOT_FOUND, "none", answer)
        offsets = range(start, min(start + count, max_offset))
        answer["nextBeginOffset"] = str(offsets.stop)
        kept = [o for o in offsets if o not in self.filtered]
        if not kept:
            return request.response(ResponseCode.PULL_RETRY_IMMEDIATELY, "filtered", answer)
        body = b"".join(
            encode_stored_message(MessageExt(topic="T", body=b"%d" % o, queue_offset=o)) for o in kept
        )
        return request.response(ResponseCode.SUCCESS, None, answer, body)


def consumer_with(broker: ScriptedBroker) -> PullConsumer:
    consumer = PullConsumer("g", "127.0.0.1:1")
    consumer._instance = broker  # type: ignore[assignment]
    return consumer


async def collect(consumer: PullConsumer, start: int, end: int, max_msg_nums: int = 32) -> list[int]:
    offsets: list[int] = []
    async for batch in consumer.pull_range(MQ, start, end, max_msg_nums=max_msg_nums):
        offsets += [m.queue_offset for m in batch]
    return offsets


async def test_pull_consumer_range_is_exact_and_in_order() -> None:
    broker = ScriptedBroker(range(0, 100), filtered=frozenset(range(40, 60)))
    consumer = consumer_with(broker)
    assert await collect(consumer, 5, 95, max_msg_nums=16) == [o for o in range(5, 95) if not 40 <= o < 60]
    assert all(int(r["maxMsgNums"]) <= 16 for r in broker.requests)
    assert all(r["sysFlag"] == "4" for r in broker.requests)  # subscription only: no suspend, no commit


async def test_pull_consumer_range_stops_at_queue_end() -> None:
    consumer = consumer_with(ScriptedBroker(range(0, 10)))
    assert await collect(consumer, 8, 50) == [8, 9]


async def test_pull_consumer_range_raises_when_data_was_removed() -> None:
    consumer = consumer_with(ScriptedBroker(range(0, 100), min_offset=30))
    with pytest.raises(ClientError, match=r"below the min offset 30"):
        await collect(consumer, 10, 50)
