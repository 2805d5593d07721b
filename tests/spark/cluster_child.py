"""Batch and streaming reads of one topic, printing JSON: a spark-submit application of
test_spark_cluster, and a plain driver script of test_spark_interpreter.

Usage: spark-submit [--master ...] tests/spark/cluster_child.py NAMESRV TOPIC WORKDIR
       python -m tests.spark.cluster_child NAMESRV TOPIC WORKDIR MASTER register

Under spark-submit the session comes from it (master, shipped files) and the script never
calls ``orbitmq.spark.register``: format ``orbitmq`` must resolve by itself. With MASTER and
``register`` the script builds its session on MASTER and registers the format explicitly.
"""

from __future__ import annotations

import json
import sys


def main(namesrv: str, topic: str, workdir: str, master: str | None, register: bool) -> None:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder if master is None else SparkSession.builder.master(master)
    spark = builder.config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if register:
        import orbitmq.spark

        orbitmq.spark.register(spark)
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
    main(*sys.argv[1:4], sys.argv[4] if len(sys.argv) > 4 else None, sys.argv[5:6] == ["register"])
