"""TopicConfigTable: system topics, auto-creation through TBW102, versions and persistence."""

from __future__ import annotations

import orjson

from orbitmq.broker.topics import TopicConfigTable
from orbitmq.model.route import TopicConfig
from orbitmq.protocol.bodies import encode_topic_config_wrapper
from tests.support.calls import python_calls


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


def test_topic_table_document_encodes_only_the_topics_changed_since_the_last() -> None:
    # Every auto-created topic rewrites topics.json: encoding the whole table each time made
    # creating 50,000 topics quadratic and held the event loop a quarter second per topic.
    work = []
    for topics in (10, 2_000):
        table = _table()
        for index in range(topics):
            table.create_from_template(f"T{index}", "TBW102", 4)
        table.encode()
        table.create_from_template("OneMore", "TBW102", 4)
        work.append(python_calls(table.encode))
    assert work[0] == work[1]


def test_topic_table_document_is_the_whole_table_after_any_changes() -> None:
    table = _table()
    for index in range(50):
        table.create_from_template(f"T{index}", "TBW102", 4)
    assert table.encode() == encode_topic_config_wrapper(table.snapshot())
    table.remove("T3")
    table.put(TopicConfig("T4", 2, 2, perm=4))
    table.find_or_create("%RETRY%G", 1)
    table.update_perm("T5", 2)
    assert table.document() == encode_topic_config_wrapper(table.snapshot())
    assert table.document() is table.document()  # nothing changed: the same bytes again
    master = _table()
    master.create_from_template("FromMaster", "TBW102", 1)
    assert table.adopt(master.snapshot())
    assert table.document() == encode_topic_config_wrapper(master.snapshot())
    loaded = TopicConfigTable.decode(table.document())
    assert loaded.document() == table.document()
