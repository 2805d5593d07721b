"""Producer and consumer tables: registration, change detection, removal and expiry."""

from __future__ import annotations

from orbitmq.broker.clients import ClientChannel, ConsumerTable, GroupSubscription, ProducerTable


def _entry(connection_id: int, client_id: str, now_ms: int = 0) -> ClientChannel[str]:
    return ClientChannel(connection_id, client_id, "CPP", 63, now_ms, f"conn-{connection_id}")


def _sub(topic: str, expression: str = "*", version: int = 1) -> GroupSubscription:
    return GroupSubscription.parse(topic, expression, "TAG", version)


def test_consumer_table_first_heartbeat_is_a_change() -> None:
    table: ConsumerTable[str] = ConsumerTable()
    assert table.register("G", _entry(1, "c1"), [_sub("T")]) is True
    assert table.client_ids("G") == ["c1"]


def test_consumer_table_repeated_heartbeat_is_not_a_change() -> None:
    table: ConsumerTable[str] = ConsumerTable()
    table.register("G", _entry(1, "c1"), [_sub("T")])
    assert table.register("G", _entry(1, "c1", 5000), [_sub("T", version=2)]) is False


def test_consumer_table_new_member_or_subscription_is_a_change() -> None:
    table: ConsumerTable[str] = ConsumerTable()
    table.register("G", _entry(1, "c1"), [_sub("T")])
    assert table.register("G", _entry(2, "c2"), [_sub("T")]) is True
    assert table.register("G", _entry(2, "c2"), [_sub("T", "tagA")]) is True
    assert sorted(table.client_ids("G")) == ["c1", "c2"]


def test_consumer_table_subscription_filter_recomputed_from_expression() -> None:
    table: ConsumerTable[str] = ConsumerTable()
    table.register("G", _entry(1, "c1"), [_sub("T", "tagA || tagB")])
    subscription = table.subscription("G", "T")
    assert subscription is not None
    assert subscription.tag_filter.tags == frozenset({"tagA", "tagB"})
    assert table.subscription("G", "U") is None


def test_consumer_table_connection_close_removes_member_and_empty_group() -> None:
    table: ConsumerTable[str] = ConsumerTable()
    table.register("G", _entry(1, "c1"), [_sub("T")])
    table.register("H", _entry(1, "c1"), [_sub("T")])
    table.register("H", _entry(2, "c2"), [_sub("T")])
    assert sorted(table.on_connection_closed(1)) == ["G", "H"]
    assert table.get("G") is None
    assert table.client_ids("H") == ["c2"]


def test_consumer_table_unregister_reports_membership() -> None:
    table: ConsumerTable[str] = ConsumerTable()
    table.register("G", _entry(1, "c1"), [_sub("T")])
    assert table.unregister("G", 2) is False
    assert table.unregister("G", 1) is True
    assert table.client_ids("G") == []


def test_consumer_table_expiry_after_silence() -> None:
    table: ConsumerTable[str] = ConsumerTable()
    table.register("G", _entry(1, "c1", now_ms=0), [_sub("T")])
    table.register("G", _entry(2, "c2", now_ms=100_000), [_sub("T")])
    assert table.scan_expired(now_ms=120_000, expiry_ms=120_000) == []
    assert table.scan_expired(now_ms=120_001, expiry_ms=120_000) == ["G"]
    assert table.client_ids("G") == ["c2"]
    assert [entry.channel for entry in table.channels("G")] == ["conn-2"]


def test_producer_table_register_close_and_expiry() -> None:
    table: ProducerTable[str] = ProducerTable()
    table.register("PG", _entry(1, "p1", 0))
    table.register("PG", _entry(2, "p2", 50_000))
    assert table.on_connection_closed(1) == ["PG"]
    assert [entry.client_id for entry in table.channels("PG")] == ["p2"]
    assert table.scan_expired(now_ms=170_001, expiry_ms=120_000) == [("PG", "p2")]
    assert table.groups() == []
