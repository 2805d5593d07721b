"""Exactly-once writes (exactlyOnce=true) against the session's broker, with Spark tasks that fail
on their first attempt and are retried: the target topic holds every input row exactly once,
where the at-least-once sink, fed the same failing job, holds duplicates."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from orbitmq.model.message import Message
from tests.spark.conftest import Broker

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS = 2000
FAIL_AT = 700  # partition 0's first attempt fails in the sink at this row, after earlier rows went out


def _failing_first_attempt(column: Any) -> Any:
    """The column, except that row FAIL_AT is null on a task's first attempt.

    The sink refuses a null body, so the first attempt of the task holding that row fails
    inside the write, after its earlier rows were sent (or staged) in batches of 50; Spark
    retries it (local[2,2]) and the second attempt writes every row.
    """
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    def body(value):  # type: ignore[no-untyped-def]  # no hints: PySpark would read them as a pandas UDF
        context = TaskContext.get()
        first_attempt = context is not None and context.attemptNumber() == 0
        return None if first_attempt and value.endswith(f"-{FAIL_AT}") else value

    return F.udf(body, "string")(column)


def _bodies(spark: Any, orbit: Broker, topic: str) -> Counter[str]:
    frame = (
        spark.read.format("orbitmq").option("namesrvAddr", orbit.namesrv_addr).option("topic", topic).load()
    )
    return Counter(bytes(row.body).decode() for row in frame.select("body").collect())


def _write(frame: Any, orbit: Broker, topic: str, exactly_once: bool) -> None:
    (
        frame.write.format("orbitmq")
        .option("namesrvAddr", orbit.namesrv_addr)
        .option("topic", topic)
        .option("writeBatchSize", "50")
        .option("exactlyOnce", str(exactly_once).lower())
        .mode("append")
        .save()
    )


def test_exactly_once_batch_write_with_retried_tasks_holds_each_row_once(spark: Any, orbit: Broker) -> None:
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        rows = spark.range(0, ROWS, 1, 2).select(
            F.concat(F.lit("row-"), F.col("id").cast("string")).alias("v")
        )
        failing = rows.select(_failing_first_attempt(F.col("v")).alias("body"))
        plain, once = orbit.new_topic("EoPlain", queues=4), orbit.new_topic("EoOnce", queues=4)
        _write(failing, orbit, plain, exactly_once=False)
        _write(failing, orbit, once, exactly_once=True)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    expected = Counter(f"row-{i}" for i in range(ROWS))
    at_least_once = _bodies(spark, orbit, plain)
    # The failed first attempt had sent rows before it died: the plain sink duplicated them.
    assert set(at_least_once) == set(expected) and sum(at_least_once.values()) > ROWS
    assert _bodies(spark, orbit, once) == expected


def test_exactly_once_stream_with_retried_tasks_holds_each_row_once(
    spark: Any, orbit: Broker, tmp_path: Any
) -> None:
    from pyspark.sql import functions as F

    source, target = orbit.new_topic("EoStreamIn", queues=2), orbit.new_topic("EoStreamOut", queues=4)
    orbit.produce([Message(source, f"row-{i}".encode()) for i in range(ROWS)])
    query = (
        spark.readStream.format("orbitmq")
        .options(namesrvAddr=orbit.namesrv_addr, topic=source, startingOffsets="earliest")
        .load()
        .select(_failing_first_attempt(F.col("body").cast("string")).alias("body"))
        .writeStream.format("orbitmq")
        .options(namesrvAddr=orbit.namesrv_addr, topic=target, exactlyOnce="true", writeBatchSize="50")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None
    assert _bodies(spark, orbit, target) == Counter(f"row-{i}" for i in range(ROWS))
