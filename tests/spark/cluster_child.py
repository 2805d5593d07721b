"""A spark-submit application of test_spark_cluster: batch and streaming reads, printing JSON.

Usage: spark-submit [--master ...] tests/spark/cluster_child.py NAMESRV TOPIC WORKDIR

The session comes from spark-submit (master, shipped files); the script never calls
``orbitmq.spark.register``: format ``orbitmq`` must resolve by itself.
"""

from __future__ import annotations

import json
import sys


def main(namesrv: str, topic: str, workdir: str) -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    options = {"namesrvAddr": namesrv, "topic": topic}
    batch_rows = spark.read.format("orbitmq").options(**options).load().count()
    query = (
        spark.readStream.format("orbitmq")
        .options(**options, startingOffsets="earliest")
        .load()
        .select("queue_id", "queue_offset")
        .writeStream.format("parquet")
        .option("path", f"{workdir}/out")
        .option("checkpointLocation", f"{workdir}/ckpt")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    stream_rows = spark.read.parquet(f"{workdir}/out").count()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()  # driver + executors
    import orbitmq.spark

    print(json.dumps({"batch_rows": batch_rows, "stream_rows": stream_rows, "block_managers": executors,
                      "master": spark.sparkContext.master, "orbitmq_file": orbitmq.spark.__file__}))  # fmt: skip
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
