"""Reference streaming ETL: JSON events from a topic -> windowed aggregates -> a topic and Parquet.

Input messages carry one JSON event each::

    {"event_time_ms": 1700000000123, "user": "u1", "kind": "click", "amount": 2.5}

The job parses them (malformed events are dropped), groups by a tumbling event-time window
and ``kind`` with a watermark, and emits each window once it closes (append mode) to

* Parquet files under ``--output`` through Spark's file sink: exactly once, because the file
  sink records each micro-batch's files in its own log inside the checkpoint, and the source
  replays a failed batch with the same offsets;
* the ``--sink-topic`` topic as JSON, at least once (see docs/spark.md; consumers de-duplicate
  by ``msg_id``).

Run it with ``python -m orbitmq.spark.pipelines.etl --namesrv 127.0.0.1:9876 ...`` or
``spark-submit src/orbitmq/spark/pipelines/etl.py ...``; ``--master`` defaults to ``local[*]``.
It prints a line per micro-batch of each query (messages read, windows or messages written)
and, when it stops, what it read and wrote in all.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from orbitmq.spark import FORMAT_NAME, register

EVENT_SCHEMA = "event_time_ms BIGINT, user STRING, kind STRING, amount DOUBLE"
PARQUET_QUERY = "etl_parquet"
TOPIC_QUERY = "etl_topic"


@dataclass(frozen=True, slots=True)
class EtlConfig:
    """Where the ETL reads and writes, and its window settings."""

    namesrv_addr: str
    source_topic: str
    sink_topic: str
    output_dir: str
    checkpoint_dir: str
    window_s: int = 60
    watermark_s: int = 30
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    consumer_group: str | None = None


def windowed_aggregates(events: DataFrame, config: EtlConfig) -> DataFrame:
    """Per (window, kind): event count and amount total, for rows of the orbitmq source schema."""
    parsed = (
        events.select(F.from_json(F.col("body").cast("string"), EVENT_SCHEMA).alias("event"))
        .select("event.*")
        .where(F.col("kind").isNotNull() & F.col("event_time_ms").isNotNull())
        .withColumn("event_time", F.timestamp_millis("event_time_ms"))
    )
    return (
        parsed.withWatermark("event_time", f"{config.watermark_s} seconds")
        .groupBy(F.window("event_time", f"{config.window_s} seconds"), F.col("kind"))
        .agg(F.count(F.lit(1)).alias("events"), F.sum("amount").alias("amount_total"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "kind",
            "events",
            "amount_total",
        )
    )


def source_frame(spark: SparkSession, config: EtlConfig) -> DataFrame:
    """The streaming read of the source topic."""
    reader = (
        spark.readStream.format(FORMAT_NAME)
        .option("namesrvAddr", config.namesrv_addr)
        .option("topic", config.source_topic)
        .option("startingOffsets", config.starting_offsets)
    )
    if config.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
    if config.consumer_group:
        reader = reader.option("consumerGroup", config.consumer_group)
    return reader.load()


def start_etl(spark: SparkSession, config: EtlConfig, *, available_now: bool = False) -> list[StreamingQuery]:
    """Start the two queries (Parquet and topic); each has its own checkpoint directory."""
    register(spark)
    aggregates = windowed_aggregates(source_frame(spark, config), config)
    checkpoint = Path(config.checkpoint_dir)
    to_files = (
        aggregates.writeStream.format("parquet")
        .option("path", config.output_dir)
        .option("checkpointLocation", str(checkpoint / "parquet"))
        .outputMode("append")
        .queryName(PARQUET_QUERY)
    )
    as_messages = aggregates.select(
        F.to_json(F.struct("window_start", "window_end", "kind", "events", "amount_total")).alias("body"),
        F.col("kind").alias("tags"),
    )
    to_topic = (
        as_messages.writeStream.format(FORMAT_NAME)
        .option("namesrvAddr", config.namesrv_addr)
        .option("topic", config.sink_topic)
        .option("checkpointLocation", str(checkpoint / "topic"))
        .outputMode("append")
        .queryName(TOPIC_QUERY)
    )
    if available_now:
        to_files, to_topic = to_files.trigger(availableNow=True), to_topic.trigger(availableNow=True)
    return [to_files.start(), to_topic.start()]


@dataclass
class EtlTotals:
    """What the ETL's queries read and wrote, summed over the micro-batches seen so far."""

    read_by_query: dict[str, int] = field(default_factory=dict)
    windows_to_parquet: int = 0
    messages_to_topic: int = 0
    _seen_batch: dict[str, int] = field(default_factory=dict)

    def add_new_batches(
        self, queries: Sequence[StreamingQuery], config: EtlConfig, out: Callable[[str], None]
    ) -> None:
        """Count (and print a line for) each micro-batch finished since the last call."""
        for query in queries:
            for progress in query.recentProgress:
                if progress["batchId"] <= self._seen_batch.get(query.name, -1):
                    continue
                self._seen_batch[query.name] = progress["batchId"]
                line, read, written = batch_line(query.name, progress, config)
                out(line)
                self.read_by_query[query.name] = self.read_by_query.get(query.name, 0) + read
                if query.name == PARQUET_QUERY:
                    self.windows_to_parquet += written
                else:
                    self.messages_to_topic += written


def batch_line(query_name: str, progress: Any, config: EtlConfig) -> tuple[str, int, int]:
    """One micro-batch of an ETL query as a line, with the messages it read and the rows it wrote.

    The topic sink reports its rows; Spark's file sink does not (-1), so for Parquet the
    windows the aggregation closed and emitted (rows removed from its state) are counted.
    """
    read = int(progress["numInputRows"])
    written = int(progress["sink"]["numOutputRows"])
    if written < 0:
        written = sum(int(op["numRowsRemoved"]) for op in progress["stateOperators"])
    where = (
        f"windows to Parquet {config.output_dir}"
        if query_name == PARQUET_QUERY
        else f"messages to topic {config.sink_topic}"
    )
    line = f"{query_name} batch {progress['batchId']}: read {read} messages, wrote {written} {where}"
    return line, read, written


def follow(
    queries: Sequence[StreamingQuery],
    config: EtlConfig,
    totals: EtlTotals,
    *,
    poll_s: float = 2.0,
    out: Callable[[str], None] = print,
) -> None:
    """Print each finished micro-batch of ``queries`` into ``totals`` until they all stop.

    Raises:
        StreamingQueryException: a query failed (its batches so far are printed first).
    """
    while True:
        running = any(query.isActive for query in queries)
        totals.add_new_batches(queries, config, out)
        if not running:
            break
        time.sleep(poll_s)
    for query in queries:
        failure = query.exception()
        if failure is not None:
            raise failure


def summary(totals: EtlTotals, config: EtlConfig) -> str:
    """The closing line: what was read from the source topic and written to each sink."""
    read = ", ".join(f"{count} by {name}" for name, count in sorted(totals.read_by_query.items()))
    return (
        f"ETL read messages from topic {config.source_topic} ({read}); wrote {totals.windows_to_parquet} "
        f"windows to Parquet {config.output_dir} and {totals.messages_to_topic} messages to topic "
        f"{config.sink_topic}"
    )


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m orbitmq.spark.pipelines.etl", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--namesrv", required=True, help="name servers, host:port;host:port")
    parser.add_argument("--source-topic", required=True)
    parser.add_argument("--sink-topic", required=True)
    parser.add_argument("--output", required=True, help="Parquet output directory")
    parser.add_argument("--checkpoint", required=True, help="checkpoint root directory")
    parser.add_argument("--window-s", type=int, default=60)
    parser.add_argument("--watermark-s", type=int, default=30)
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument("--consumer-group", help="publish progress under this group (lag tools)")
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    parser.add_argument(
        "--shuffle-partitions",
        type=int,
        default=8,
        help="state store partitions of the aggregation (default 8)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ETL until its queries stop (Ctrl-C stops a continuous run)."""
    args = _parse_args(argv)
    config = EtlConfig(
        args.namesrv, args.source_topic, args.sink_topic, args.output, args.checkpoint,
        args.window_s, args.watermark_s, args.starting_offsets, args.max_offsets_per_trigger, args.consumer_group,
    )  # fmt: skip
    # Spark's default of 200 shuffle partitions means 200 state-store tasks per micro-batch.
    spark = (
        SparkSession.builder.master(args.master)
        .appName("orbitmq-etl")
        .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
        .getOrCreate()
    )
    totals = EtlTotals()
    try:
        queries = start_etl(spark, config, available_now=args.available_now)
        try:
            follow(queries, config, totals)
        except KeyboardInterrupt:
            for query in queries:
                query.stop()
            follow(queries, config, totals)
    finally:
        spark.stop()
    print(summary(totals, config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
