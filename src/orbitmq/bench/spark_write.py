"""Spark sink throughput: exactly-once writes beside at-least-once writes, same data, same run.

A ``local[N]`` session (a temporary ``orbitmq standalone`` is started unless ``-n/--namesrv``
names a running cluster; there the topic is removed at the end unless it existed before) builds ``--messages`` rows of ``--size``-byte bodies with ``spark.range`` over
``--partitions`` write tasks, then, alternately for ``--rounds`` rounds, writes them to a topic
of ``--queues`` queues with the ``orbitmq`` sink:

1. ``at-least-once``: tasks send batches of ``writeBatchSize`` (SEND_BATCH_MESSAGE);
2. ``exactly-once``: tasks stage the same batches (STAGE_MESSAGES) and the driver commits them
   (COMMIT_STAGED), which is when the broker writes them into the topic.

A figure is the job's wall time from ``save()`` to its return (task time, the driver commit,
and Spark's scheduling) over the rows written; each phase also reports the CPU time of this
process and all its descendants (broker, JVM, Python workers) per message. The topic's max
offsets are checked to grow by exactly the row count each time. Small warm-up writes start
Spark's Python helpers first. The target is an exactly-once rate of at least half the
at-least-once rate (best rounds compared, as the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orbitmq.bench._servers import add_namesrv_argument, start_standalone
from orbitmq.bench._topics import BenchTopic
from orbitmq.bench.spark import _tree_cpu_s
from orbitmq.client.blocking import BlockingAdminClient

TARGET_RATIO = 0.5
MODES = ("at-least-once", "exactly-once")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_namesrv_argument(parser)
    parser.add_argument("--topic", default="BenchSparkWrite", help="topic (created when missing)")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topic when it is created")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--messages", type=int, default=200_000, help="rows per write")
    parser.add_argument("--partitions", type=int, default=2, help="write tasks")
    parser.add_argument("--write-batch-size", type=int, default=256, help="the sink's writeBatchSize")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of both modes")


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-spark-write-") as workdir:
        server = None
        namesrv = args.namesrv
        if namesrv is None:
            server, namesrv_port, _ = start_standalone(Path(workdir))
            namesrv = f"127.0.0.1:{namesrv_port}"
        bench_topic = BenchTopic(namesrv, args.topic, args.queues)
        try:
            asyncio.run(bench_topic.create())
            return _measure(namesrv, args)
        finally:
            asyncio.run(bench_topic.remove_created())
            if server is not None:
                server.terminate()
                server.wait(30)


def _measure(namesrv: str, args: argparse.Namespace) -> int:
    admin = BlockingAdminClient(namesrv)
    admin.start()
    spark = _session(args)
    try:
        frame = _rows(spark, args.messages, args.size, args.partitions)
        for mode in MODES:  # warm-up: Python helpers, producers, routes
            _write(_rows(spark, 1000, args.size, args.partitions), namesrv, args, mode)
        results: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
        exact = True
        for index in range(args.rounds):
            for mode in MODES:
                before = _written(admin, args.topic)
                cpu_before = _tree_cpu_s()
                started = time.monotonic()
                _write(frame, namesrv, args, mode)
                wall_s = time.monotonic() - started
                cpu_s = _tree_cpu_s() - cpu_before
                added = _written(admin, args.topic) - before
                exact = exact and added == args.messages
                results[mode].append((wall_s, cpu_s))
                print(f"round {index} {mode:>13}: {args.messages / wall_s:>9,.0f} msgs/s "
                      f"({args.messages / cpu_s:>9,.0f} per CPU-s), {added} messages added", flush=True)  # fmt: skip
    finally:
        spark.stop()
        admin.close()
    return _summary(args, results, exact)


def _session(args: argparse.Namespace) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(args.master).appName("orbitmq-bench-spark-write")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _rows(spark: Any, count: int, size: int, partitions: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(0, count, 1, partitions).select(
        F.lpad(F.col("id").cast("string"), size, "x").cast("binary").alias("body")
    )


def _write(frame: Any, namesrv: str, args: argparse.Namespace, mode: str) -> None:
    (
        frame.write.format("orbitmq").option("namesrvAddr", namesrv).option("topic", args.topic)
        .option("writeBatchSize", str(args.write_batch_size))
        .option("exactlyOnce", "true" if mode == "exactly-once" else "false")
        .mode("append").save()
    )  # fmt: skip


def _written(admin: BlockingAdminClient, topic: str) -> int:
    return sum(status.max_offset for status in admin.topic_status(topic).values())


def _summary(args: argparse.Namespace, results: dict[str, list[tuple[float, float]]], exact: bool) -> int:
    count = args.messages
    print(f"\n{count} rows of {args.size} B per write, {args.partitions} tasks, "
          f"writeBatchSize {args.write_batch_size}, {args.queues} queues, master {args.master}")  # fmt: skip
    best = {mode: min(wall for wall, _ in rounds) for mode, rounds in results.items()}
    cpu = {mode: min(cpu_s for _, cpu_s in rounds) for mode, rounds in results.items()}
    print("best rounds:")
    for mode in MODES:
        print(f"  {mode:>13}  {count / best[mode]:>10,.0f} msgs/s  {count * args.size / best[mode] / 1e6:>7.1f} MB/s"
              f"  CPU per message (all processes) {cpu[mode] / count * 1e6:.1f} us")  # fmt: skip
    ratio = best["at-least-once"] / best["exactly-once"]
    verdict = "meets" if ratio >= TARGET_RATIO else "misses"
    print(f"  exactly-once / at-least-once: {ratio:.2f} wall, "
          f"{cpu['at-least-once'] / cpu['exactly-once']:.2f} per CPU-s; {verdict} the target of {TARGET_RATIO:.2f}")  # fmt: skip
    if not exact:
        print("a write did not add exactly the rows it wrote")
    return 0 if exact else 1
