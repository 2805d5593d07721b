"""Child process of test_spark_cluster: batch and streaming reads on a given master, printing JSON.

Usage: python -m tests.spark.cluster_child MASTER NAMESRV TOPIC WORKDIR [ZIP]

With ZIP, the connector is shipped to every Python worker as that archive: it is added with
``addPyFile`` (executor tasks) and must also be on PYTHONPATH of this process, which Spark's
driver-side helpers inherit (see docs/spark.md, "Running on a cluster").
"""

from __future__ import annotations

import json
import sys


def main(master: str, namesrv: str, topic: str, workdir: str, archive: str | None) -> None:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).config("spark.ui.enabled", "false")
    builder = builder.config("spark.sql.shuffle.partitions", "2").config("spark.executor.memory", "512m")
    if archive:
        builder = builder.config("spark.executorEnv.PYTHONPATH", archive)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if archive:
        spark.sparkContext.addPyFile(archive)
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
    print(json.dumps({"batch_rows": batch_rows, "stream_rows": stream_rows, "block_managers": executors,
                      "orbitmq_file": orbitmq.spark.__file__}))  # fmt: skip
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5], sys.argv[5] if len(sys.argv) > 5 else None)
