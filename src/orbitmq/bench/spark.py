"""Spark source throughput beside OrbitMQ's own pull consumer, on the same data in the same run.

A topic of ``--queues`` queues gets ``--prefill`` messages of ``--size`` bytes (a temporary
``orbitmq standalone`` is started unless ``-n/--namesrv`` names a running cluster; there the
topic is removed at the end unless it existed before). Then, one after the other:

1. ``pull``: the asyncio :class:`~orbitmq.client.pull_consumer.PullConsumer` reads every queue
   from its min to its max offset with ``pull_range`` (decoded messages, queues concurrently);
2. ``spark``: a ``local[N]`` Spark session reads the same offsets with the ``orbitmq`` streaming
   source under ``Trigger.AvailableNow`` into the ``noop`` sink. A warm-up batch read runs
   first, so Python helper start-up is not counted; the figure is the query's wall time from
   ``start()`` to termination, and the in-batch rate (rows over summed trigger durations)
   is printed beside it.

The two run alternately ``--rounds`` times and the best round of each is compared (the
machine is shared, so single runs are noisy); every round is printed. Because other load on
the machine moves wall-clock rates, each phase also reports the CPU time spent by this process
and all its descendants (broker, Spark JVM, Python workers; read from /proc on Linux) as
messages per CPU-second, which does not depend on what else runs. The target is a Spark rate
of at least half the pull consumer's.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orbitmq.bench._servers import add_namesrv_argument, start_standalone
from orbitmq.bench._topics import BenchTopic
from orbitmq.client.blocking import BlockingAdminClient, BlockingProducer
from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.model.message import Message, MessageQueue
from orbitmq.transport.runner import new_event_loop

TARGET_RATIO = 0.5
_PULL_GROUP = "bench-spark-pull"

Round = tuple[float, float, float, float, float, int]
"""pull s, pull CPU-s, Spark wall s, Spark in-batch s, Spark CPU-s, Spark rows."""
_MB = 1_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_namesrv_argument(parser)
    parser.add_argument("--topic", default="BenchSpark", help="topic (created when missing)")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topic when it is created")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--prefill", type=int, default=500_000, help="messages produced first")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument(
        "--max-offsets-per-trigger", type=int, default=0, help="cap per micro-batch (0: none)"
    )
    parser.add_argument("--pull-batch-size", type=int, default=1024, help="maxMsgNums per pull")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of both readers")


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-spark-") as workdir:
        server = None
        namesrv = args.namesrv
        if namesrv is None:
            server, namesrv_port, _ = start_standalone(Path(workdir))
            namesrv = f"127.0.0.1:{namesrv_port}"
        bench_topic = BenchTopic(namesrv, args.topic, args.queues, groups=(_PULL_GROUP,))
        try:
            asyncio.run(bench_topic.create())
            queues = _prefill(namesrv, args)
            rounds = _measure(namesrv, queues, args, Path(workdir))
        finally:
            asyncio.run(bench_topic.remove_created())
            if server is not None:
                server.terminate()
                server.wait(30)
    return _summary(args, rounds)


def _measure(
    namesrv: str, queues: dict[MessageQueue, tuple[int, int]], args: argparse.Namespace, workdir: Path
) -> list[Round]:
    """Per round: pull seconds, pull CPU-s, Spark wall s, Spark in-batch s, Spark CPU-s, Spark rows."""
    spark = _spark_session(namesrv, args)
    try:
        rounds = []
        for index in range(args.rounds):
            cpu_before = _tree_cpu_s()
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                pull_s = runner.run(_pull_all(namesrv, queues, args))
            cpu_between = _tree_cpu_s()
            spark_s, in_batch_s, rows = _spark_read(spark, namesrv, args, workdir / f"ckpt-{index}")
            cpu_after = _tree_cpu_s()
            rounds.append(
                (pull_s, cpu_between - cpu_before, spark_s, in_batch_s, cpu_after - cpu_between, rows)
            )
        return rounds
    finally:
        spark.stop()


def _prefill(namesrv: str, args: argparse.Namespace) -> dict[MessageQueue, tuple[int, int]]:
    """Produce ``--prefill`` messages; queue -> (min, max) offsets."""
    admin = BlockingAdminClient(namesrv)
    admin.start()
    try:
        producer = BlockingProducer("bench-spark", namesrv)
        producer.start()
        started = time.monotonic()
        try:
            body = os.urandom(args.size)
            batch = [
                Message(args.topic, body) for _ in range(min(256, max(1, 4_000_000 // (args.size + 200))))
            ]
            for first in range(0, args.prefill, len(batch)):
                producer.send_batch(batch[: min(len(batch), args.prefill - first)])
        finally:
            producer.shutdown()
        print(f"prefilled {args.prefill} x {args.size} B in {time.monotonic() - started:.1f} s", flush=True)
        return {mq: (s.min_offset, s.max_offset) for mq, s in admin.topic_status(args.topic).items()}
    finally:
        admin.close()


async def _pull_all(
    namesrv: str, queues: dict[MessageQueue, tuple[int, int]], args: argparse.Namespace
) -> float:
    consumer = PullConsumer(_PULL_GROUP, namesrv, auto_commit=False)
    await consumer.start()
    count = 0

    async def read(mq: MessageQueue, start: int, end: int) -> None:
        nonlocal count
        async for messages in consumer.pull_range(mq, start, end, max_msg_nums=args.pull_batch_size):
            count += len(messages)

    try:
        started = time.monotonic()
        await asyncio.gather(*(read(mq, lo, hi) for mq, (lo, hi) in queues.items()))
        elapsed = time.monotonic() - started
    finally:
        await consumer.shutdown()
    print(f"pull consumer: {count} messages in {elapsed:.2f} s", flush=True)
    return elapsed


def _tree_cpu_s() -> float:
    """CPU seconds (user + system) used so far by this process and its live descendants."""
    proc = Path("/proc")
    if not proc.is_dir():
        return float("nan")
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = int(fields[11]) + int(fields[12])
    tree = {os.getpid()}
    grew = True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in tree} - tree
        grew = bool(found)
        tree |= found
    return sum(ticks.get(pid, 0) for pid in tree) / os.sysconf("SC_CLK_TCK")


def _spark_session(namesrv: str, args: argparse.Namespace) -> Any:
    """A session with the data source registered and its Python helpers already started."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    # Looked up at run time: bench and spark are sibling layers of the import contract, and the
    # connector (with its pyspark dependency) is only needed by this subcommand.
    register = importlib.import_module("orbitmq.spark").register
    spark = (
        SparkSession.builder.master(args.master).appName("orbitmq-bench-spark")
        .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    warm = json.dumps({args.topic: {str(q): 100 for q in range(args.queues)}})
    options = {"namesrvAddr": namesrv, "topic": args.topic, "endingOffsets": warm}
    spark.read.format("orbitmq").options(**options).load().write.format("noop").mode("overwrite").save()
    return spark


def _spark_read(
    spark: Any, namesrv: str, args: argparse.Namespace, checkpoint: Path
) -> tuple[float, float, int]:
    options = {"namesrvAddr": namesrv, "topic": args.topic, "pullBatchSize": str(args.pull_batch_size)}
    options["startingOffsets"] = "earliest"
    if args.max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)
    frame = spark.readStream.format("orbitmq").options(**options).load()
    started = time.monotonic()
    query = (
        frame.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    wall_s = time.monotonic() - started
    progress = query.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    in_batch_s = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    print(f"spark source: {rows} rows in {wall_s:.2f} s wall, {len(progress)} batches", flush=True)
    return wall_s, in_batch_s, rows


def _rates(count: int, size: int, seconds: float) -> str:
    seconds = max(seconds, 1e-9)
    return f"{count / seconds:>10,.0f} msgs/s {count * size / seconds / _MB:>8.1f} MB/s"


def _summary(args: argparse.Namespace, rounds: list[Round]) -> int:
    count = args.prefill
    print(f"\n{count} messages of {args.size} B over {args.queues} queues, master {args.master}")
    for index, (pull_s, pull_cpu_s, spark_s, in_batch_s, spark_cpu_s, rows) in enumerate(rounds):
        print(f"  round {index}: pull {count / pull_s:>9,.0f} msgs/s ({count / pull_cpu_s:>9,.0f} per CPU-s)"
              f"   spark wall {rows / spark_s:>9,.0f} msgs/s ({rows / spark_cpu_s:>9,.0f} per CPU-s)"
              f"   in-batch {rows / max(in_batch_s, 1e-9):>9,.0f} msgs/s")  # fmt: skip
    pull_s = min(r[0] for r in rounds)
    spark_s = min(r[2] for r in rounds)
    in_batch_s = min(r[3] for r in rounds)
    pull_cpu_s = min(r[1] for r in rounds)
    spark_cpu_s = min(r[4] for r in rounds)
    print("best rounds:")
    print(f"  pull consumer (pull_range)      {_rates(count, args.size, pull_s)}")
    print(f"  spark source, query wall time   {_rates(count, args.size, spark_s)}")
    print(f"  spark source, in micro-batches  {_rates(count, args.size, in_batch_s)}")
    print(f"  CPU per message (all processes): pull {pull_cpu_s / count * 1e6:.1f} us, "
          f"spark {spark_cpu_s / count * 1e6:.1f} us")  # fmt: skip
    ratio = pull_s / spark_s
    verdict = "meets" if ratio >= TARGET_RATIO else "misses"
    print(f"  spark/pull ratio: wall {ratio:.2f}, in-batch {pull_s / max(in_batch_s, 1e-9):.2f}, "
          f"per CPU-s {pull_cpu_s / spark_cpu_s:.2f}; wall {verdict} the target of {TARGET_RATIO:.2f}")  # fmt: skip
    return 0 if all(r[5] == count for r in rounds) else 1
