"""Planning and reading against a fake client: partitions, data loss, limits, availableNow."""

from __future__ import annotations

import json
import pickle
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from orbitmq.errors import ClientError, RequestTimeoutError
from orbitmq.model.message import MessageQueue
from orbitmq.spark._offsets import DataLossError, from_offset_json
from orbitmq.spark._options import parse_read_options
from orbitmq.spark._reader import (
    OrbitBatchReader,
    OrbitStreamReader,
    QueueRange,
    QueueReadError,
    QueueUnavailableError,
    read_range,
)
from orbitmq.spark._schema import source_arrow_schema

if TYPE_CHECKING:
    from tests.unit.spark.conftest import FakeBroker, FakeFactory

NS = {"namesrvAddr": "127.0.0.1:9876"}


def _mq(queue_id: int, topic: str = "Orders") -> MessageQueue:
    return MessageQueue(topic, "broker-a", queue_id)


def _stream(factory: FakeFactory, **options: str) -> OrbitStreamReader:
    return OrbitStreamReader(
        parse_read_options({**NS, "topic": "Orders", **options}, streaming=True), factory
    )


def _batch(factory: FakeFactory, **options: str) -> OrbitBatchReader:
    return OrbitBatchReader(
        parse_read_options({**NS, "topic": "Orders", **options}, streaming=False), factory
    )


def _fill(broker: FakeBroker, per_queue: int) -> None:
    for queue_id in range(4):
        broker.append(_mq(queue_id), per_queue)


def _rows(reader: Any, parts: list[Any]) -> list[dict[str, Any]]:
    return [row for part in parts for batch in reader.read(part) for row in batch.to_pylist()]


def test_batch_reader_reads_every_message_of_each_queue_once(
    broker: FakeBroker, factory: FakeFactory
) -> None:
    _fill(broker, 50)
    reader = OrbitBatchReader(parse_read_options({**NS, "topic": "Orders"}, streaming=False), factory)
    parts = list(reader.partitions())
    assert [(p.queue_id, p.start_offset, p.end_offset) for p in parts] == [(q, 0, 50) for q in range(4)]
    rows = _rows(reader, parts)
    assert len(rows) == 200
    assert {(r["queue_id"], r["queue_offset"]) for r in rows} == {(q, o) for q in range(4) for o in range(50)}
    assert all(r["body"] == f"{r['queue_id']}:{r['queue_offset']}".encode() for r in rows)
    assert factory.admins[0].closed


def test_batch_reader_reads_nothing_from_spark_placeholder_of_an_empty_topic(
    broker: FakeBroker, factory: FakeFactory
) -> None:
    # With every queue empty partitions() plans none, and Spark hands read() InputPartition(None).
    broker.append(_mq(0), 0)
    reader = OrbitBatchReader(parse_read_options({**NS, "topic": "Orders"}, streaming=False), factory)
    assert list(reader.partitions()) == []
    assert _rows(reader, [InputPartition(None)]) == []
    stream = _stream(factory)
    assert _rows(stream, [InputPartition(None)]) == []


def test_batch_reader_honours_explicit_start_and_end(broker: FakeBroker, factory: FakeFactory) -> None:
    _fill(broker, 20)
    options = {
        **NS,
        "topic": "Orders",
        "startingOffsets": '{"Orders": {"0": 5}}',
        "endingOffsets": '{"Orders": {"broker-a": {"0": 8, "1": 3}}}',
    }
    reader = OrbitBatchReader(parse_read_options(options, streaming=False), factory)
    ranges = {(p.queue_id, p.start_offset, p.end_offset) for p in reader.partitions()}
    assert ranges == {(0, 5, 8), (1, 0, 3), (2, 0, 20), (3, 0, 20)}


def test_read_range_filters_tags_inside_the_range(broker: FakeBroker, factory: FakeFactory) -> None:
    broker.append(_mq(0), 10, tags="a")
    broker.append(_mq(0), 10, tags="b")
    part = QueueRange("Orders", "broker-a", 0, 5, 15, "ns:1", "b", 3, 1000)
    rows = [row for batch in read_range(part, factory) for row in batch.to_pylist()]
    assert [r["queue_offset"] for r in rows] == list(range(10, 15))
    assert all(r["tags"] == "b" and r["msg_id"] == f"Orders-0-{r['queue_offset']}" for r in rows)


def test_read_range_yields_batches_with_the_declared_schema(broker: FakeBroker, factory: FakeFactory) -> None:
    broker.append(_mq(1), 3)
    part = QueueRange("Orders", "broker-a", 1, 0, 3, "ns:1", "*", 32, 1000)
    batches = list(read_range(part, factory))
    assert len(batches) == 1 and batches[0].schema.equals(source_arrow_schema())
    assert pickle.loads(pickle.dumps(part)) == part


def test_stream_data_loss_fails_naming_queue_and_offsets(broker: FakeBroker, factory: FakeFactory) -> None:
    _fill(broker, 30)
    broker.min_offsets[_mq(2)] = 12
    reader = _stream(factory, startingOffsets="earliest")
    start = reader.initialOffset()
    end = reader.latestOffset({"Orders": {"broker-a": {str(q): 0 for q in range(4)}}}, ReadAllAvailable())
    with pytest.raises(DataLossError, match=r"Orders broker broker-a queue 2.*\[0, 12\)"):
        reader.partitions({"Orders": {"broker-a": {str(q): 0 for q in range(4)}}}, end)
    assert from_offset_json(start)[_mq(2)] == 12


def test_stream_data_loss_skips_when_allowed(broker: FakeBroker, factory: FakeFactory) -> None:
    _fill(broker, 30)
    broker.min_offsets[_mq(2)] = 12
    reader = _stream(factory, failOnDataLoss="false")
    zero = {"Orders": {"broker-a": {str(q): 0 for q in range(4)}}}
    parts = reader.partitions(zero, reader.latestOffset(zero, ReadAllAvailable()))
    assert {(p.queue_id, p.start_offset) for p in parts} == {(0, 0), (1, 0), (2, 12), (3, 0)}


def test_stream_max_offsets_per_trigger_walks_to_the_end(broker: FakeBroker, factory: FakeFactory) -> None:
    _fill(broker, 25)
    reader = _stream(factory, startingOffsets="earliest", maxOffsetsPerTrigger="30")
    assert reader.getDefaultReadLimit() == ReadMaxRows(30)
    position = reader.initialOffset()
    seen: list[tuple[int, int]] = []
    for _ in range(10):
        end = reader.latestOffset(position, reader.getDefaultReadLimit())
        if json.dumps(end) == json.dumps(position):
            break
        parts = reader.partitions(position, end)
        batch_rows = _rows(reader, list(parts))
        assert len(batch_rows) <= 30
        seen += [(r["queue_id"], r["queue_offset"]) for r in batch_rows]
        position = json.loads(json.dumps(end))
    assert sorted(seen) == [(q, o) for q in range(4) for o in range(25)]


def test_stream_latest_start_is_persisted_under_consumer_group(
    broker: FakeBroker, factory: FakeFactory
) -> None:
    _fill(broker, 10)
    first = _stream(factory, consumerGroup="etl").initialOffset()
    _fill(broker, 5)
    again = _stream(factory, consumerGroup="etl").initialOffset()
    without_group = _stream(factory).initialOffset()
    assert first == again == {"Orders": {"broker-a": {str(q): 10 for q in range(4)}}}
    assert without_group == {"Orders": {"broker-a": {str(q): 15 for q in range(4)}}}


def test_stream_commit_publishes_progress_to_the_group(broker: FakeBroker, factory: FakeFactory) -> None:
    _fill(broker, 10)
    reader = _stream(factory, consumerGroup="etl", startingOffsets="earliest")
    reader.commit({"Orders": {"broker-a": {"0": 4, "1": 10}}})
    assert broker.group_offsets[("etl", _mq(0))] == 4 and broker.group_offsets[("etl", _mq(1))] == 10


def test_stream_available_now_stops_at_the_snapshot(broker: FakeBroker, factory: FakeFactory) -> None:
    _fill(broker, 10)
    reader = _stream(factory, startingOffsets="earliest")
    reader.prepareForTriggerAvailableNow()
    _fill(broker, 10)
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert end == {"Orders": {"broker-a": {str(q): 10 for q in range(4)}}}


def test_stream_min_offsets_holds_back_until_delay(broker: FakeBroker, factory: FakeFactory) -> None:
    _fill(broker, 2)
    reader = _stream(factory, startingOffsets="earliest", minOffsetsPerTrigger="100", maxTriggerDelay="50ms")
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadAllAvailable()) == start
    reader._last_trigger_ms -= 60
    assert reader.latestOffset(start, ReadAllAvailable()) != start


def test_stream_reader_pickles_without_connections(broker: FakeBroker, factory: FakeFactory) -> None:
    reader = _stream(factory)
    reader.initialOffset()
    assert reader.planner._admin is not None
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.planner._admin is None and copy.options == reader.options


def test_topic_pattern_skips_system_topics_and_finds_new_topics(
    broker: FakeBroker, factory: FakeFactory
) -> None:
    reader = OrbitStreamReader(parse_read_options({**NS, "topicPattern": ".*"}, streaming=True), factory)
    start = reader.initialOffset()
    assert list(start) == ["Orders"]
    broker.add_topic("Payments", queues=1)
    broker.append(MessageQueue("Payments", "broker-a", 0), 3)
    end = reader.latestOffset(start, ReadAllAvailable())
    parts = reader.partitions(start, end)
    assert [(p.topic, p.start_offset, p.end_offset) for p in parts] == [("Payments", 0, 3)]


def test_batch_reader_starts_by_timestamp_and_fails_or_skips_queues_without_a_match(
    broker: FakeBroker, factory: FakeFactory
) -> None:
    _fill(broker, 10)  # store times 1001..1010 on every queue
    by_queue = json.dumps({"Orders": {"0": 1005, "1": 5000}})
    with pytest.raises(ClientError, match="queue 1 has no message stored at or after timestamp 5000"):
        _batch(factory, startingOffsetsByTimestamp=by_queue).partitions()
    parts = _batch(factory, startingOffsetsByTimestamp=by_queue, startingOffsetsByTimestampStrategy="latest")
    ranges = {p.queue_id: (p.start_offset, p.end_offset) for p in parts.partitions()}
    # queue 0 from the match, queue 1 at latest (nothing), queues 2 and 3 not named: earliest.
    assert ranges == {0: (4, 10), 2: (0, 10), 3: (0, 10)}


def test_batch_reader_ends_by_timestamp(broker: FakeBroker, factory: FakeFactory) -> None:
    _fill(broker, 10)
    ranges = {
        p.queue_id: (p.start_offset, p.end_offset)
        for p in _batch(factory, endingTimestamp="1004").partitions()
    }
    assert ranges == {q: (0, 3) for q in range(4)}
    per_queue = _batch(factory, endingOffsetsByTimestamp=json.dumps({"Orders": {"1": 1002, "2": 99_999}}))
    ranges = {p.queue_id: (p.start_offset, p.end_offset) for p in per_queue.partitions()}
    assert ranges == {0: (0, 10), 1: (0, 1), 2: (0, 10), 3: (0, 10)}


def test_batch_reader_splits_queues_into_partitions(broker: FakeBroker, factory: FakeFactory) -> None:
    _fill(broker, 10)
    reader = _batch(factory, maxRecordsPerPartition="4")
    parts = reader.partitions()
    assert len(parts) == 12 and max(p.end_offset - p.start_offset for p in parts) == 4
    assert sorted(r["queue_offset"] for r in _rows(reader, parts)) == sorted(list(range(10)) * 4)
    assert len(_batch(factory, minPartitions="10").partitions()) == 12  # 4 queues, ~2.5 pieces each


def test_planner_retries_offset_lookups_on_retriable_faults(broker: FakeBroker, factory: FakeFactory) -> None:
    _fill(broker, 3)
    broker.failures_left = 2  # the next two admin calls fail with a request timeout
    assert (
        len(
            _batch(
                factory, **{"fetchOffset.numRetries": "2", "fetchOffset.retryIntervalMs": "1"}
            ).partitions()
        )
        == 4
    )
    broker.failures_left = 1
    with pytest.raises(RequestTimeoutError):
        _batch(factory, **{"fetchOffset.numRetries": "0"}).partitions()


def test_stream_reports_latest_offset_and_offsets_behind(broker: FakeBroker, factory: FakeFactory) -> None:
    _fill(broker, 10)
    reader = _stream(factory, startingOffsets="earliest", maxOffsetsPerTrigger="8")
    end = reader.latestOffset(reader.initialOffset(), ReadMaxRows(8))
    report = reader.reportLatestOffset()
    assert report is not None and report["latest"] == {"Orders": {"broker-a": {str(q): 10 for q in range(4)}}}
    assert sum(from_offset_json(end).values()) == 8
    assert (report["minOffsetsBehindLatest"], report["maxOffsetsBehindLatest"]) == ("8", "8")
    assert report["avgOffsetsBehindLatest"] == "8.0"


def test_planner_reads_offsets_from_the_slave_while_the_master_is_away(
    broker: FakeBroker, factory: FakeFactory
) -> None:
    _fill(broker, 30)
    broker.unreachable = {0}  # killed, still in the route
    reader = _batch(factory)
    assert sorted((p.queue_id, p.start_offset, p.end_offset) for p in reader.partitions()) == [
        (q, 0, 30) for q in range(4)
    ]
    broker.away = {0}  # the name server dropped it
    stream = _stream(factory, startingOffsets="earliest")
    start = {"Orders": {"broker-a": {str(q): 10 for q in range(4)}}}
    parts = stream.partitions(start, stream.latestOffset(start, ReadAllAvailable()))
    assert sorted((p.queue_id, p.start_offset, p.end_offset) for p in parts) == [
        (q, 10, 30) for q in range(4)
    ]


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_planner_reports_a_group_that_does_not_answer_as_unavailable_never_as_lost(
    broker: FakeBroker, factory: FakeFactory, fail_on_data_loss: str
) -> None:
    _fill(broker, 30)
    broker.unreachable = {0, 1}
    stream = _stream(factory, failOnDataLoss=fail_on_data_loss, failoverTimeoutMs="300")
    start = {"Orders": {"broker-a": {str(q): 10 for q in range(4)}}}
    # An idle trigger does not wait and does not move: nothing is planned, nothing skipped.
    assert stream.latestOffset(start, ReadAllAvailable()) == start
    end = {"Orders": {"broker-a": {str(q): 20 for q in range(4)}}}
    with pytest.raises(QueueUnavailableError) as failed:
        stream.partitions(start, end)
    text = str(failed.value)
    assert text.startswith("offsets unavailable for topic Orders broker broker-a queue(s) 0, 1, 2, 3")
    assert "master 127.0.0.1:10911" in text and "slave 1 127.0.0.1:10921" in text
    broker.unreachable = set()
    broker.away = {0, 1}  # the whole group left the route
    with pytest.raises(QueueUnavailableError, match="queue\\(s\\) 0, 1, 2, 3"):
        stream.partitions(start, end)
    with pytest.raises(QueueUnavailableError):
        _batch(factory, failoverTimeoutMs="200").partitions()


def test_read_range_resumes_where_a_failed_member_stopped(broker: FakeBroker, factory: FakeFactory) -> None:
    broker.append(_mq(0), 100)
    broker.pull_faults = ["ok", "down", "down", "ok", "behind", "ok", "ok"]
    part = QueueRange("Orders", "broker-a", 0, 5, 95, "ns:1", "*", 20, 1000, failover_timeout_ms=5000)
    rows = [row for batch in read_range(part, factory) for row in batch.to_pylist()]
    assert [r["queue_offset"] for r in rows] == list(range(5, 95))


def test_read_range_fails_naming_queue_range_and_attempts_after_the_failover_timeout(
    broker: FakeBroker, factory: FakeFactory
) -> None:
    broker.append(_mq(2), 100)
    broker.pull_faults = ["ok"] + ["down"] * 1000
    part = QueueRange("Orders", "broker-a", 2, 0, 100, "ns:1", "*", 20, 1000, failover_timeout_ms=400)
    with pytest.raises(QueueReadError) as failed:
        list(read_range(part, factory))
    text = str(failed.value)
    assert text.startswith("cannot read topic Orders broker broker-a queue 2 offsets [0, 100): stopped at 20")
    assert "ConnectError: cannot connect" in text
