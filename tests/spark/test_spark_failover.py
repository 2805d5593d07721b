"""Reads follow the broker group: a SIGKILLed master's slave serves planning and read tasks.

Each test starts a SYNC_MASTER ``broker-a`` with one slave (tests/support/replica_group.py),
fills a topic, lets the slave catch up and kills the master with SIGKILL, before a batch read,
before a streaming restart that replays a batch (Spark's commit log and the Parquet sink's
log lose their newest entry, as after a crash in the commit window), and in the middle of an
availableNow query with a backlog. Every row must arrive exactly once, and no data-loss error
may be raised for messages the slave still serves.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orbitmq.model.message import Message
from tests.support.processes import create_topic
from tests.support.replica_group import ReplicaGroup, start_replica_group, wait_caught_up, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]

QUEUES = 4


@pytest.fixture
def group(tmp_path: Path) -> Iterator[ReplicaGroup]:
    replicas = start_replica_group(tmp_path / "group")
    try:
        yield replicas
    finally:
        replicas.kill_all()


def _new_topic(group: ReplicaGroup, topic: str) -> str:
    from orbitmq.client.blocking import BlockingAdminClient

    create_topic(group.master.addr, topic, queues=QUEUES)
    admin = BlockingAdminClient(group.namesrv_addr)
    admin.start()
    try:
        wait_for(lambda: topic in admin.list_topics(), 15, f"a route of {topic}")
    finally:
        admin.close()
    return topic


def _produce(group: ReplicaGroup, topic: str, first: int, count: int) -> None:
    from orbitmq.client.blocking import BlockingProducer

    producer = BlockingProducer("spark-failover", group.namesrv_addr)
    producer.start()
    try:
        for start in range(first, first + count, 200):
            producer.send_batch(
                [Message(topic, b"m%06d" % n) for n in range(start, min(start + 200, first + count))]
            )
    finally:
        producer.shutdown()
    wait_caught_up(group.master, group.slaves[0])


def _options(group: ReplicaGroup, topic: str, **extra: str) -> dict[str, str]:
    return {"namesrvAddr": group.namesrv_addr, "topic": topic, **extra}


def _bodies(spark: Any, path: Path) -> list[bytes]:
    return [bytes(row.body) for row in spark.read.parquet(str(path)).select("body").collect()]


def _expected(count: int) -> list[bytes]:
    return [b"m%06d" % n for n in range(count)]


def _stream_to_parquet(spark: Any, options: dict[str, str], output: Path, checkpoint: Path) -> Any:
    return (
        spark.readStream.format("orbitmq").options(**options).load()
        .select("queue_id", "queue_offset", "body")
        .writeStream.format("parquet").option("path", str(output))
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )  # fmt: skip


def _forget_last_commit(checkpoint: Path, output: Path) -> int:
    """Drop the newest batch from Spark's commit log and the Parquet sink's log (a crash between
    the batch's end and its commit); returns its id."""
    last = max(int(path.name) for path in (checkpoint / "commits").iterdir() if path.name.isdigit())
    for log_dir in (checkpoint / "commits", output / "_spark_metadata"):
        (log_dir / str(last)).unlink()
        (log_dir / f".{last}.crc").unlink(missing_ok=True)
    return last


def test_batch_read_after_the_master_is_killed_reads_every_message_from_the_slave(
    spark: Any, group: ReplicaGroup
) -> None:
    topic = _new_topic(group, "FailoverBatch")
    _produce(group, topic, 0, 2000)
    group.master.kill()
    frame = spark.read.format("orbitmq").options(**_options(group, topic)).load()
    rows = frame.select("queue_id", "queue_offset", "body").collect()
    assert sorted(bytes(row.body) for row in rows) == _expected(2000)
    assert len({(row.queue_id, row.queue_offset) for row in rows}) == 2000


def test_stream_restarted_while_the_master_is_down_replays_from_the_slave_without_false_data_loss(
    spark: Any, group: ReplicaGroup, tmp_path: Path
) -> None:
    topic = _new_topic(group, "FailoverRestart")
    _produce(group, topic, 0, 2000)
    output, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    options = _options(group, topic, startingOffsets="earliest", maxOffsetsPerTrigger="1000")
    _stream_to_parquet(spark, options, output, checkpoint).awaitTermination(120)
    _produce(group, topic, 2000, 1000)
    _forget_last_commit(checkpoint, output)
    group.master.kill()
    # The replayed batch is planned against the slave: its min offsets are 0, nothing was lost.
    query = _stream_to_parquet(spark, options, output, checkpoint)
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert sorted(_bodies(spark, output)) == _expected(3000)
    # failOnDataLoss=false must not skip what it cannot see either.
    _forget_last_commit(checkpoint, output)
    query = _stream_to_parquet(spark, {**options, "failOnDataLoss": "false"}, output, checkpoint)
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert sorted(_bodies(spark, output)) == _expected(3000)


def test_stream_master_killed_in_the_middle_of_a_backlog_reads_every_row_once(
    spark: Any, group: ReplicaGroup, tmp_path: Path
) -> None:
    topic = _new_topic(group, "FailoverBacklog")
    _produce(group, topic, 0, 20_000)
    output, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    options = _options(group, topic, startingOffsets="earliest", maxOffsetsPerTrigger="2000")
    query = _stream_to_parquet(spark, options, output, checkpoint)
    try:
        wait_for(lambda: any(p["numInputRows"] for p in query.recentProgress), 60, "a first batch")
        group.master.kill()
        read_before_kill = sum(p["numInputRows"] for p in query.recentProgress)
        query.awaitTermination(180)
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    assert read_before_kill < 20_000  # the rest came from the slave
    assert sum(p["numInputRows"] for p in query.recentProgress) == 20_000
    rows = spark.read.parquet(str(output)).collect()
    assert sorted(bytes(row.body) for row in rows) == _expected(20_000)
    assert len({(row.queue_id, row.queue_offset) for row in rows}) == 20_000
