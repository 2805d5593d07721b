"""The sink's row -> message mapping, batching, ordered sends and deterministic row keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from orbitmq.errors import ClientError
from orbitmq.spark._options import parse_write_options
from orbitmq.spark._writer import (
    OrbitBatchWriter,
    OrbitStreamWriter,
    RowSender,
    RowSource,
    RowStager,
    SentMessages,
    StagedMessages,
    build_message,
    row_key,
)

if TYPE_CHECKING:
    from tests.unit.spark.conftest import FakeBroker, FakeFactory

NS = {"namesrvAddr": "127.0.0.1:9876"}


def _batch(**columns: list[object]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(columns)


def test_row_sender_batches_per_topic_and_keys_rows_deterministically(
    broker: FakeBroker, factory: FakeFactory
) -> None:
    options = parse_write_options({**NS, "writeBatchSize": "3"})
    rows = _batch(
        body=[b"a", b"b", b"c", b"d", b"e"],
        topic=["T1", "T2", "T1", "T1", "T1"],
        tags=["x", None, "y", None, None],
    )
    sender = RowSender(options, factory.producer("g", "ns", 1), RowSource("q1", 7, 2))
    result = sender.send_all(iter([rows]))
    assert result == SentMessages(2, 5, "q1-7-2-0")
    sent = [(topic, msg.body, msg.uniq_key, msg.tags) for topic, msg, _ in broker.sent]
    assert sent[:3] == [
        ("T1", b"a", "q1-7-2-0", "x"),
        ("T1", b"c", "q1-7-2-2", "y"),
        ("T1", b"d", "q1-7-2-3", None),
    ]
    assert sorted(s[2] for s in sent) == [row_key("q1", 7, 2, i) for i in range(5)]


def test_row_sender_is_repeatable_so_retries_can_be_deduplicated(
    broker: FakeBroker, factory: FakeFactory
) -> None:
    options = parse_write_options({**NS, "topic": "Out"})
    rows = _batch(body=[b"1", b"2", b"3"])
    for _ in range(2):
        RowSender(options, factory.producer("g", "ns", 1), RowSource("job", 0, 4)).send_all(iter([rows]))
    keys = [msg.uniq_key for _, msg, _ in broker.sent]
    assert keys[:3] == keys[3:] and len(set(keys)) == 3


def test_row_sender_sends_sharding_keys_in_order(broker: FakeBroker, factory: FakeFactory) -> None:
    options = parse_write_options({**NS, "topic": "Out"})
    rows = _batch(body=["p", "q", "r"], sharding_key=["k1", None, "k1"])
    RowSender(options, factory.producer("g", "ns", 1), RowSource("w", 0, 0)).send_all(iter([rows]))
    ordered = [(msg.body, key) for _, msg, key in broker.sent if key is not None]
    assert ordered == [(b"p", "k1"), (b"r", "k1")]
    assert [msg.body for _, msg, key in broker.sent if key is None] == [b"q"]


def test_build_message_maps_columns_and_topic_option_wins() -> None:
    row = {"body": "hé", "topic": "RowTopic", "keys": "k1 k2", "properties": [("color", "red")], "tags": "t"}
    msg = build_message(row, "Opt", "w-0-0-0", 0)
    assert msg.topic == "Opt" and msg.body == "hé".encode()
    assert msg.keys == ["k1", "k2", "w-0-0-0"] and msg.properties["color"] == "red" and msg.tags == "t"
    assert build_message({"body": b"x", "keys": ["a"]}, "T", "id", 0).keys == ["a", "id"]
    with pytest.raises(ClientError, match="row 3"):
        build_message({"body": b"x"}, None, "w-0-0-3", 3)
    with pytest.raises(ClientError, match="null body"):
        build_message({"body": None}, "T", "w-0-0-1", 1)


def test_batch_writer_uses_one_write_id_outside_a_task(broker: FakeBroker, factory: FakeFactory) -> None:
    writer = OrbitBatchWriter(parse_write_options({**NS, "topic": "Out"}), factory)
    result = writer.write(iter([_batch(body=[b"z"])]))
    assert result.messages_sent == 1 and result.first_row_key == f"{writer.write_id}-0-0-0"


def test_row_stager_stages_chunks_per_topic_and_key_queue_in_order(
    broker: FakeBroker, factory: FakeFactory
) -> None:
    options = parse_write_options({**NS, "topic": "Out", "writeBatchSize": "2", "exactlyOnce": "true"})
    rows = _batch(body=["a", "b", "c", "d", "e"], sharding_key=[None, "kk", None, "kk", "kk"])
    result = RowStager(options, factory.producer("g", "ns", 1), RowSource("q", 3, 1)).stage_all(iter([rows]))
    assert isinstance(result, StagedMessages) and (
        result.write_id,
        result.batch_id,
        result.messages_sent,
    ) == ("q", 3, 5)
    assert broker.sent == [] and len(result.chunks) == 3
    staged = [([m.body for m in msgs], chunk.queue_id) for _, _, chunk, msgs in broker.staged]
    # the "kk" rows go to the key's queue (2) in order; the others round robin (-1 here)
    assert staged == [([b"a", b"c"], -1), ([b"b", b"d"], 2), ([b"e"], 2)]
    assert [m.uniq_key for _, _, _, msgs in broker.staged for m in msgs] == [
        row_key("q", 3, 1, i) for i in (0, 2, 1, 3, 4)
    ]


def test_exactly_once_commit_commits_every_task_once_and_never_on_abort(
    broker: FakeBroker, factory: FakeFactory
) -> None:
    writer = OrbitBatchWriter(parse_write_options({**NS, "topic": "Out", "exactlyOnce": "true"}), factory)
    messages = [writer.write(iter([_batch(body=[b"x", b"y"])])) for _ in range(2)]
    writer.abort(messages)
    assert broker.committed == {}
    writer.commit(messages)
    assert list(broker.committed) == [(writer.write_id, 0)]
    assert len(broker.committed[(writer.write_id, 0)]) == 2
    stream = OrbitStreamWriter(parse_write_options({**NS, "topic": "Out", "exactlyOnce": "true"}), factory)
    with pytest.raises(ClientError, match="different batch|come from writes"):
        stream.commit(messages, 5)  # chunks of batch 0 offered as batch 5
    stream.commit([], 5)  # no task reported: nothing to commit
    assert len(broker.committed) == 1
