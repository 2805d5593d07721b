"""Where a queue starts when the group has no committed offset (consume_from_where).

The broker lookups are replaced by fakes; the policy itself is what is under test.
"""

from __future__ import annotations

from typing import Any

import pytest

from orbitmq.client import _pull_api as pull_api
from orbitmq.client.offset_store import OffsetTable
from orbitmq.client.push_consumer import PushConsumer
from orbitmq.errors import ConfigError
from orbitmq.model.heartbeat import ConsumeFromWhere, MessageModel
from orbitmq.model.message import MessageQueue

MQ = MessageQueue("T", "broker-a", 0)


class Store:
    def __init__(self, stored: int | None) -> None:
        self.stored = stored
        self.table = OffsetTable()
        self.zero_if_not_found: list[bool] = []

    async def load(self, mq: MessageQueue, *, zero_if_not_found: bool = True) -> int | None:
        self.zero_if_not_found.append(zero_if_not_found)
        return self.stored

    async def persist(self, queues: object) -> None:
        return None


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    calls: list[tuple[str, Any]] = []

    async def max_offset(invoker: object, mq: MessageQueue) -> int:
        calls.append(("max", mq))
        return 500

    async def min_offset(invoker: object, mq: MessageQueue) -> int:
        calls.append(("min", mq))
        return 7

    async def search(invoker: object, mq: MessageQueue, timestamp_ms: int) -> int:
        calls.append(("search", timestamp_ms))
        return 42

    monkeypatch.setattr(pull_api, "query_max_offset", max_offset)
    monkeypatch.setattr(pull_api, "query_min_offset", min_offset)
    monkeypatch.setattr(pull_api, "search_offset", search)
    return calls


def consumer(**config: Any) -> PushConsumer:
    built = PushConsumer("g", "127.0.0.1:1", lambda messages: None, **config)  # type: ignore[arg-type,return-value]
    built._instance = object()  # type: ignore[assignment]
    return built


@pytest.mark.parametrize(
    ("where", "expected", "lookup"),
    [
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, 500, "max"),
        (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, 7, "min"),
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, 42, "search"),
    ],
)
async def test_consume_start_offset_applies_policy_for_new_group(
    lookups: list[tuple[str, Any]], where: ConsumeFromWhere, expected: int, lookup: str
) -> None:
    built = consumer(consume_from_where=where, consume_timestamp_ms=1234)
    store = Store(None)
    assert await built._start_offset(MQ, store) == expected
    assert lookups[0][0] == lookup
    # Only a timestamp start asks the broker not to hand a new group offset 0.
    assert store.zero_if_not_found == [where is not ConsumeFromWhere.CONSUME_FROM_TIMESTAMP]
    if lookup == "search":
        assert lookups[0][1] == 1234


async def test_consume_start_offset_prefers_committed_and_retry_starts_at_zero(
    lookups: list[tuple[str, Any]],
) -> None:
    built = consumer()
    assert await built._start_offset(MQ, Store(99)) == 99
    assert await built._start_offset(MessageQueue("%RETRY%g", "broker-a", 0), Store(None)) == 0
    assert lookups == []


def test_consume_config_rejects_broadcasting_without_offset_dir() -> None:
    with pytest.raises(ConfigError, match="offset_store_dir"):
        PushConsumer("g", "127.0.0.1:1", message_model=MessageModel.BROADCASTING)
    with pytest.raises(ConfigError, match="pull_thresold"):
        PushConsumer("g", "127.0.0.1:1", pull_thresold_for_queue=5)
