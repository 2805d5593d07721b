"""Child process of test_spark_stream: a streaming query orbitmq -> Parquet that runs until killed.

Usage: python -m tests.spark.stream_child NAMESRV TOPIC OUTPUT CHECKPOINT MAX_OFFSETS_PER_TRIGGER
"""

from __future__ import annotations

import os
import sys


def main(namesrv: str, topic: str, output: str, checkpoint: str, max_offsets: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    frame = (
        spark.readStream.format("orbitmq")
        .option("namesrvAddr", namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets)
        .load()
        .select("topic", "queue_id", "queue_offset", "body")
    )
    query = (
        frame.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])
