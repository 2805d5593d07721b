"""Batch reads and writes through a real local Spark session against a real standalone broker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orbitmq.model.message import Message
from tests.spark.conftest import Broker

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _messages(topic: str, count: int) -> list[Message]:
    messages = []
    for index in range(count):
        msg = Message(topic, f"m{index:05d}".encode(), properties={"color": "red" if index % 2 else "blue"})
        msg.tags = "even" if index % 2 == 0 else "odd"
        msg.keys = [f"k{index}"]
        messages.append(msg)
    return messages


def _read(spark: Any, **options: str) -> list[Any]:
    return spark.read.format("orbitmq").options(**options).load().collect()  # type: ignore[no-any-return]


def test_batch_read_of_an_offset_range_equals_what_was_produced(spark: Any, orbit: Broker) -> None:
    topic = orbit.new_topic("SparkBatch")
    placed = orbit.produce(_messages(topic, 400))
    start = {str(q): 3 for q in range(8)}
    end = {str(q): 30 for q in range(8)}
    rows = _read(
        spark, namesrvAddr=orbit.namesrv_addr, topic=topic,
        startingOffsets=json.dumps({topic: start}), endingOffsets=json.dumps({topic: end}),
    )  # fmt: skip
    expected = {body for body, (queue_id, offset) in placed.items() if 3 <= offset < 30}
    assert len(rows) == len(expected) > 0
    assert {bytes(r.body) for r in rows} == expected
    for row in rows:
        index = int(bytes(row.body)[1:])
        assert placed[bytes(row.body)] == (row.queue_id, row.queue_offset)
        assert row.tags == ("even" if index % 2 == 0 else "odd") and row.keys == f"k{index}"
        assert row.properties["color"] == ("red" if index % 2 else "blue")
        assert row.topic == topic and row.msg_id and row.store_timestamp >= row.born_timestamp


def test_batch_read_tag_filter_and_full_range(spark: Any, orbit: Broker) -> None:
    topic = orbit.new_topic("SparkTags")
    orbit.produce(_messages(topic, 120))
    odd = _read(spark, namesrvAddr=orbit.namesrv_addr, topic=topic, subExpression="odd")
    everything = _read(spark, namesrvAddr=orbit.namesrv_addr, topic=topic)
    assert len(everything) == 120
    assert sorted(bytes(r.body) for r in odd) == sorted(bytes(r.body) for r in everything if r.tags == "odd")
    assert len(odd) == 60


def test_write_then_read_round_trips_rows(spark: Any, orbit: Broker) -> None:
    topic = orbit.new_topic("SparkWrite", queues=4)
    data = [(f"body-{i}".encode(), "t1" if i % 3 else "t2", f"key{i}", {"n": str(i)}) for i in range(300)]
    frame = spark.createDataFrame(
        data, "body binary, tags string, keys string, properties map<string,string>"
    )
    frame.repartition(3).write.format("orbitmq").option("namesrvAddr", orbit.namesrv_addr).option(
        "topic", topic
    ).mode("append").save()
    rows = _read(spark, namesrvAddr=orbit.namesrv_addr, topic=topic)
    assert sorted(bytes(r.body) for r in rows) == sorted(d[0] for d in data)
    by_body = {bytes(r.body): r for r in rows}
    for body, tags, key, props in data:
        row = by_body[body]
        assert row.tags == tags and row.keys.split()[0] == key and row.properties["n"] == props["n"]
        # The de-duplication id: <write id>-<batch id 0>-<partition>-<row index>, also in KEYS.
        write_id, batch_id, partition, row_index = row.msg_id.rsplit("-", 3)
        assert batch_id == "0" and int(partition) in range(3) and int(row_index) >= 0
        assert row.keys.split()[-1] == row.msg_id
    assert len({r.msg_id for r in rows}) == 300


def test_write_with_sharding_key_keeps_per_key_order(spark: Any, orbit: Broker) -> None:
    topic = orbit.new_topic("SparkOrdered", queues=4)
    data = [(f"{key}:{seq}", key) for seq in range(40) for key in ("a", "b", "c")]
    frame = spark.createDataFrame(data, "body string, sharding_key string").coalesce(1)
    frame.write.format("orbitmq").option("namesrvAddr", orbit.namesrv_addr).option("topic", topic).mode(
        "append"
    ).save()
    rows = sorted(
        _read(spark, namesrvAddr=orbit.namesrv_addr, topic=topic), key=lambda r: (r.queue_id, r.queue_offset)
    )
    for key in ("a", "b", "c"):
        mine = [r for r in rows if bytes(r.body).decode().startswith(f"{key}:")]
        assert len({r.queue_id for r in mine}) == 1
        assert [int(bytes(r.body).decode().split(":")[1]) for r in mine] == list(range(40))


def test_batch_read_of_an_empty_topic_is_an_empty_frame(spark: Any, orbit: Broker) -> None:
    # The session was never given orbitmq.spark.register(): the format resolves by itself.
    topic = orbit.new_topic("SparkEmpty", queues=4)
    frame = (
        spark.read.format("orbitmq").option("namesrvAddr", orbit.namesrv_addr).option("topic", topic).load()
    )
    assert frame.collect() == []
    assert frame.columns[:3] == ["topic", "queue_id", "queue_offset"]


def test_batch_read_of_an_assigned_queue_whose_start_equals_its_end_is_empty(
    spark: Any, orbit: Broker
) -> None:
    topic = orbit.new_topic("SparkStartIsEnd", queues=2)
    placed = orbit.produce(_messages(topic, 40))
    on_queue_0 = sum(1 for queue_id, _ in placed.values() if queue_id == 0)
    assert on_queue_0 > 0
    rows = _read(
        spark, namesrvAddr=orbit.namesrv_addr, assign=json.dumps({topic: [0]}),
        startingOffsets=json.dumps({topic: {"0": on_queue_0}}), endingOffsets=json.dumps({topic: {"0": -1}}),
    )  # fmt: skip
    assert rows == []


def test_batch_read_starting_past_the_end_is_empty(spark: Any, orbit: Broker) -> None:
    topic = orbit.new_topic("SparkPastEnd", queues=2)
    orbit.produce(_messages(topic, 40))
    rows = _read(
        spark, namesrvAddr=orbit.namesrv_addr, topic=topic,
        startingOffsets=json.dumps({topic: {"0": 500, "1": 500}}),
    )  # fmt: skip
    assert rows == []
