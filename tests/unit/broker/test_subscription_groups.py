"""SubscriptionGroupTable: auto-creation, defaults and the subscriptionGroup.json round trip."""

from __future__ import annotations

import pytest

from orbitmq.broker.subscriptions import SubscriptionGroupConfig, SubscriptionGroupTable
from orbitmq.errors import ConfigError


def test_subscription_groups_auto_create_only_when_enabled() -> None:
    table = SubscriptionGroupTable()
    assert table.find_or_create("CG", auto_create=False) is None
    created = table.find_or_create("CG", auto_create=True)
    assert created is not None
    assert (created.retry_queue_nums, created.retry_max_times) == (1, 16)
    assert table.dirty


def test_subscription_groups_round_trip_through_json() -> None:
    table = SubscriptionGroupTable()
    table.put(SubscriptionGroupConfig("CG", retry_max_times=3, consume_enable=False))
    loaded = SubscriptionGroupTable.decode(table.encode())
    config = loaded.get("CG")
    assert config is not None
    assert (config.retry_max_times, config.consume_enable) == (3, False)
    assert not table.dirty


def test_subscription_groups_decode_rejects_garbage() -> None:
    with pytest.raises(ConfigError, match="subscriptionGroup.json"):
        SubscriptionGroupTable.decode(b'{"nope": 1}')
