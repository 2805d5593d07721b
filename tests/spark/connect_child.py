"""A Spark Connect client of test_spark_cluster: the orbitmq source and sink through a Connect
server, printing JSON. It has no JVM: every query runs on the server's cluster.

Usage: python -m tests.spark.connect_child sc://HOST:PORT NAMESRV SOURCE TARGET CHECKPOINT
"""

from __future__ import annotations

import json
import sys


def main(remote: str, namesrv: str, source: str, target: str, checkpoint: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.builder.remote(remote).getOrCreate()
    connect = type(spark).__module__
    read = spark.read.format("orbitmq").option("namesrvAddr", namesrv)
    batch_rows = read.option("topic", source).load().count()
    # Batch write, exactly once, then a stream source -> sink, exactly once.
    frame = spark.range(0, 300, 1, 2).select(F.concat(F.lit("w"), F.col("id").cast("string")).alias("body"))
    frame.write.format("orbitmq").options(namesrvAddr=namesrv, topic=target, exactlyOnce="true").mode(
        "append"
    ).save()
    query = (
        spark.readStream.format("orbitmq")
        .options(namesrvAddr=namesrv, topic=source, startingOffsets="earliest")
        .load()
        .select(F.col("body"))
        .writeStream.format("orbitmq")
        .options(namesrvAddr=namesrv, topic=target, exactlyOnce="true")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    written = read.option("topic", target).load().select(F.col("body").cast("string").alias("b")).collect()
    print(json.dumps({"session": connect, "batch_rows": batch_rows, "bodies": sorted(r.b for r in written),
                      "stream_error": str(query.exception()) if query.exception() else None,
                      "client_imported_orbitmq": "orbitmq" in sys.modules}))  # fmt: skip
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
