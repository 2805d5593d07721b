"""The read options Spark's Kafka source has, against the session's real broker: start and end by
time, the time-match strategy, partition splitting, offset-lookup retries, min/max trigger
sizes with maxTriggerDelay, and the offsets-behind-latest metrics in query progress."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from orbitmq.model.message import Message
from tests.spark.conftest import Broker
from tests.support.tcp_proxy import DroppingProxy

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _read(spark: Any, orbit: Broker, topic: str, **options: str) -> Any:
    return spark.read.format("orbitmq").options(namesrvAddr=orbit.namesrv_addr, topic=topic, **options).load()


def _bodies(frame: Any) -> set[str]:
    return {bytes(row.body).decode() for row in frame.select("body").collect()}


def _waves(orbit: Broker, topic: str) -> tuple[dict[str, tuple[int, int]], int, int]:
    """Three waves a, b, c of 20 messages over 2 queues; times t1 (a|b) and t2 (b|c) between."""
    placed: dict[str, tuple[int, int]] = {}
    marks = []
    for wave in "abc":
        if marks or wave != "a":
            time.sleep(0.05)
            marks.append(_now_ms())
            time.sleep(0.05)
        sent = orbit.produce([Message(topic, f"{wave}{i}".encode()) for i in range(20)], batch_size=5)
        placed.update({body.decode(): where for body, where in sent.items()})
    return placed, marks[0], marks[1]


def test_batch_read_starts_and_ends_by_timestamp(spark: Any, orbit: Broker) -> None:
    topic = orbit.new_topic("SparkByTime", queues=2)
    placed, t1, t2 = _waves(orbit, topic)
    wave = {name: {b for b in placed if b[0] == name} for name in "abc"}
    assert (
        _bodies(_read(spark, orbit, topic, startingTimestamp=str(t1), endingTimestamp=str(t2))) == wave["b"]
    )
    per_queue = _read(
        spark, orbit, topic,
        startingOffsetsByTimestamp=json.dumps({topic: {"0": t1}}),
        endingOffsetsByTimestamp=json.dumps({topic: {"1": t2}}),
    )  # fmt: skip
    # queue 0 from t1 to latest; queue 1 (not named at the start) from earliest to t2
    expected = {b for b, (q, _) in placed.items() if (q == 0 and b[0] != "a") or (q == 1 and b[0] != "c")}
    assert _bodies(per_queue) == expected


def test_batch_read_timestamp_without_a_match_fails_or_starts_at_latest(spark: Any, orbit: Broker) -> None:
    topic = orbit.new_topic("SparkNoMatch", queues=2)
    orbit.produce([Message(topic, b"old") for _ in range(10)])
    future = str(_now_ms() + 3_600_000)
    with pytest.raises(Exception, match="no message stored at or after timestamp") as failed:
        _read(spark, orbit, topic, startingTimestamp=future).collect()
    assert "startingOffsetsByTimestampStrategy=latest" in str(failed.value)
    latest = _read(spark, orbit, topic, startingTimestamp=future, startingOffsetsByTimestampStrategy="latest")
    assert latest.collect() == []


def test_batch_read_splits_queues_by_min_partitions_and_max_records(spark: Any, orbit: Broker) -> None:
    topic = orbit.new_topic("SparkSplit", queues=2)
    placed = orbit.produce([Message(topic, f"s{i}".encode()) for i in range(100)], batch_size=10)
    per_queue = [sum(1 for q, _ in placed.values() if q == queue_id) for queue_id in (0, 1)]
    plain = _read(spark, orbit, topic)
    capped = _read(spark, orbit, topic, maxRecordsPerPartition="20")
    spread = _read(spark, orbit, topic, minPartitions="7")
    assert plain.rdd.getNumPartitions() == 2
    assert capped.rdd.getNumPartitions() == sum(-(-n // 20) for n in per_queue)
    assert spread.rdd.getNumPartitions() >= 7
    rows = sorted(capped.select("queue_id", "queue_offset", "body").collect())
    assert rows == sorted(plain.select("queue_id", "queue_offset", "body").collect())
    assert sorted(spread.select("queue_id", "queue_offset").collect()) == [(r[0], r[1]) for r in rows]


def test_batch_read_retries_offset_lookups_through_a_dropping_name_server(spark: Any, orbit: Broker) -> None:
    topic = orbit.new_topic("SparkRetry", queues=2)
    orbit.produce([Message(topic, f"r{i}".encode()) for i in range(30)])
    flaky = DroppingProxy(orbit.proc.port, drop_first=2)
    try:
        with pytest.raises(Exception, match="Connection|connection"):
            spark.read.format("orbitmq").options(
                namesrvAddr=flaky.addr, topic=topic, **{"fetchOffset.numRetries": "0"}
            ).load().collect()
        rows = (
            spark.read.format("orbitmq")
            .options(namesrvAddr=flaky.addr, topic=topic, **{"fetchOffset.numRetries": "3"})
            .option("fetchOffset.retryIntervalMs", "50")
            .load()
            .collect()
        )
    finally:
        flaky.close()
    assert len(rows) == 30 and flaky.drops_left == 0


def test_stream_waits_for_min_offsets_up_to_max_trigger_delay_and_reports_offsets_behind(
    spark: Any, orbit: Broker
) -> None:
    topic = orbit.new_topic("SparkTrigger", queues=1)
    orbit.produce([Message(topic, f"first{i}".encode()) for i in range(5)])
    started = time.monotonic()
    query = (
        spark.readStream.format("orbitmq")
        .options(namesrvAddr=orbit.namesrv_addr, topic=topic, startingOffsets="earliest")
        .options(minOffsetsPerTrigger="8", maxOffsetsPerTrigger="8", maxTriggerDelay="4s")
        .load()
        .select("body")
        .writeStream.format("memory")
        .queryName("trigger_delay")
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        _wait_rows(spark, query, "trigger_delay", 5)
        # 5 < minOffsetsPerTrigger: nothing may run until maxTriggerDelay has passed.
        assert time.monotonic() - started >= 4.0
        orbit.produce([Message(topic, f"more{i}".encode()) for i in range(20)])
        _wait_rows(spark, query, "trigger_delay", 25)
    finally:
        query.stop()
    batches = [p for p in query.recentProgress if p.numInputRows > 0]
    assert [p.numInputRows for p in batches] == [5, 8, 8, 4]
    reports = [json.loads(p.sources[0].latestOffset) for p in batches]
    assert list(reports[1]["latest"]) == [topic] and list(reports[1]["latest"][topic].values()) == [{"0": 25}]
    assert [r["maxOffsetsBehindLatest"] for r in reports] == ["0", "12", "4", "0"]
    assert reports[1]["minOffsetsBehindLatest"] == "12" and reports[1]["avgOffsetsBehindLatest"] == "12.0"


def _wait_rows(spark: Any, query: Any, table: str, count: int) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert query.exception() is None, query.exception()
        if spark.table(table).count() >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"{table} did not reach {count} rows: {spark.table(table).count()}")


def _first_line(failed: pytest.ExceptionInfo[BaseException]) -> str:
    return str(failed.value).splitlines()[0]


def test_option_error_first_line_names_the_option_and_the_values_allowed(spark: Any, orbit: Broker) -> None:
    with pytest.raises(Exception) as failed:
        _read(spark, orbit, "AnyTopic", startingOffsets="earlist").collect()
    line = _first_line(failed)
    assert (
        "ConfigError: option startingOffsets='earlist' must be earliest, latest (streaming reads) or offset JSON"
        in (line)
    )
    assert "(did you mean earliest?)" in line and "Traceback" not in str(failed.value)


def test_option_error_names_options_as_documented_not_lower_cased(spark: Any, orbit: Broker) -> None:
    with pytest.raises(Exception) as failed:
        _read(spark, orbit, "AnyTopic", maxOffsetsPerTrigger="10").collect()
    assert "option maxOffsetsPerTrigger applies to streaming reads only" in _first_line(failed)
    with pytest.raises(Exception) as failed:
        _read(spark, orbit, "AnyTopic", startingOffset="earliest").collect()
    assert "unknown option 'startingoffset' for format orbitmq reads (did you mean startingOffsets?" in (
        _first_line(failed)
    )


def test_streaming_option_error_is_raised_when_the_query_is_defined(spark: Any, orbit: Broker) -> None:
    def reader() -> Any:
        return spark.readStream.format("orbitmq").options(namesrvAddr=orbit.namesrv_addr, topic="AnyTopic")

    with pytest.raises(Exception) as failed:
        reader().option("startingOffsets", "latets").load()  # load(), before any start()
    line = _first_line(failed)
    assert "option startingOffsets='latets' must be earliest, latest (streaming reads) or offset JSON" in line
    assert "(did you mean latest?)" in line
    with pytest.raises(Exception) as failed:
        reader().option("maxOffsetsPerTrigger", "lots").load()
    assert "option maxOffsetsPerTrigger='lots' is not an integer" in _first_line(failed)


def test_planning_error_first_line_says_what_is_wrong(spark: Any, orbit: Broker) -> None:
    topic = orbit.new_topic("SparkPlanError", queues=1)
    orbit.produce([Message(topic, b"old")])
    future = str(_now_ms() + 3_600_000)
    with pytest.raises(Exception) as failed:
        _read(spark, orbit, topic, startingTimestamp=future).collect()
    line = _first_line(failed)
    assert f"topic {topic} broker " in line and "has no message stored at or after timestamp" in line
    assert "Traceback" not in str(failed.value)
