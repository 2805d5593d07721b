"""TopicConfigTable: system topics, auto-creation through TBW102, versions and persistence."""

from __future__ import annotations

import orjson

from orbitmq.broker.topics import TopicConfigTable
from orbitmq.model.route import TopicConfig


def _table(auto_create: bool = True) -> TopicConfigTable:
    table = TopicConfigTable()
    table.create_system_topics(
        "DefaultCluster", "broker-a", auto_create_topic_enable=auto_create, default_topic_queue_nums=8
    )
    return table


def test_topic_table_creates_tbw102_with_inherit_perm() -> None:
    tbw = _table().get("TBW102")
    assert tbw is not None
    assert (tbw.perm, tbw.read_queue_nums, tbw.write_queue_nums) == (7, 8, 8)
    assert _table().get("SCHEDULE_TOPIC_XXXX") is not None


def test_topic_table_no_tbw102_without_auto_create() -> None:
    table = _table(auto_create=False)
    assert table.get("TBW102") is None
    assert table.create_from_template("T", "TBW102", 4) is None


def test_topic_table_auto_create_takes_min_of_request_and_template() -> None:
    table = _table()
    created = table.create_from_template("NewTopic", "TBW102", 4)
    assert created is not None
    assert (created.read_queue_nums, created.write_queue_nums, created.perm) == (4, 4, 6)
    bigger = table.create_from_template("Other", "TBW102", 32)
    assert bigger is not None and bigger.write_queue_nums == 8


def test_topic_table_template_without_inherit_bit_refuses() -> None:
    table = _table()
    table.put(TopicConfig("Plain", 4, 4, perm=6))
    assert table.create_from_template("T", "Plain", 4) is None


def test_topic_table_every_change_bumps_data_version() -> None:
    table = _table()
    version = table.data_version
    assert table.put(TopicConfig("A", 2, 2)) is True
    assert table.data_version > version
    same = table.data_version
    assert table.put(TopicConfig("A", 2, 2)) is False
    assert table.data_version == same
    assert table.remove("A") is True
    assert table.data_version > same
    assert table.remove("A") is False


def test_topic_table_round_trips_through_topics_json() -> None:
    table = _table()
    table.find_or_create("%RETRY%CG", 1)
    data = table.encode()
    assert not table.dirty
    loaded = TopicConfigTable.decode(data)
    assert sorted(loaded.names()) == sorted(table.names())
    assert loaded.data_version == table.data_version
    document = orjson.loads(data)
    assert document["topicConfigTable"]["%RETRY%CG"]["readQueueNums"] == 1
