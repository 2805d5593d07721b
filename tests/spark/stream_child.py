"""Child process of test_spark_stream: two streaming queries over one topic that run until killed.

Usage: python -m tests.spark.stream_child NAMESRV TOPIC OUTPUT CHECKPOINT MAX_OFFSETS_PER_TRIGGER TARGET

* ``files``: orbitmq -> Parquet under OUTPUT (checkpoint CHECKPOINT/files);
* ``messages``: orbitmq -> orbitmq topic TARGET with exactlyOnce=true (checkpoint
  CHECKPOINT/messages).

Both read from the earliest offset, at most MAX_OFFSETS_PER_TRIGGER messages per micro-batch.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def source(spark: Any, namesrv: str, topic: str, max_offsets: str | None) -> Any:
    """The streaming read both queries (and their restarts in the test) use."""
    reader = (
        spark.readStream.format("orbitmq")
        .option("namesrvAddr", namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
    )
    return (reader if max_offsets is None else reader.option("maxOffsetsPerTrigger", max_offsets)).load()


def to_files(frame: Any, output: str, checkpoint: str) -> Any:
    return (
        frame.select("topic", "queue_id", "queue_offset", "body")
        .writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", f"{checkpoint}/files")
    )


def to_messages(frame: Any, namesrv: str, target: str, checkpoint: str) -> Any:
    return (
        frame.selectExpr("body", "CAST(queue_offset AS STRING) AS keys")
        .writeStream.format("orbitmq")
        .option("namesrvAddr", namesrv)
        .option("topic", target)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", f"{checkpoint}/messages")
    )


def main(namesrv: str, topic: str, output: str, checkpoint: str, max_offsets: str, target: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    frame = source(spark, namesrv, topic, max_offsets)
    to_files(frame, output, checkpoint).trigger(processingTime="200 milliseconds").start()
    to_messages(frame, namesrv, target, checkpoint).trigger(processingTime="200 milliseconds").start()
    spark.streams.awaitAnyTermination()


if __name__ == "__main__":
    main(*sys.argv[1:7])
