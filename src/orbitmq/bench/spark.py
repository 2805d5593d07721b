"""Spark source throughput beside OrbitMQ's own pull consumer, on the same data in the same run.

A topic of ``--queues`` queues gets ``--prefill`` messages of ``--size`` bytes (a temporary
``orbitmq standalone`` is started unless ``-n/--namesrv`` names a running cluster; there the
topic is removed at the end unless it existed before). Then, one after the other, each round:

1. ``pull``: the asyncio :class:`~orbitmq.client.pull_consumer.PullConsumer` reads every queue
   from its min to its max offset with ``pull_range`` (decoded messages, queues concurrently);
2. ``count``: a ``local[N]`` Spark session runs a batch read's ``count()`` over the same offsets;
3. ``parquet``: the ``orbitmq`` streaming source under ``Trigger.AvailableNow`` writes the same
   offsets into Parquet files (every column);
4. ``floor``: ``count()`` over a Python data source that yields the source's own Arrow batches
   of the first messages again and again (same rows, partitions and schema; no broker, no
   pull, no decoding: ``_spark_floor.py``): what Spark alone costs, so the best ratio
   ``count()`` could reach on this machine;
5. ``floor-parquet``: the same no-broker source read as a stream under ``Trigger.AvailableNow``
   into Parquet files: the best ratio the Parquet phase could reach.

A warm-up batch read runs first, so Python helper start-up is not counted; the Spark figures
are wall times from the action's start to its end. The readers alternate ``--rounds`` times
and the best round of each is compared (the machine may be shared, so single runs are noisy);
every round is printed. The two ratios printed last, each Spark rate over the pull consumer's,
are the figures of merit (target: at least 0.7 each on ``local[2]``); each is printed beside
its floor, the ratio Spark itself allows in the same run. Because other load on the
machine moves wall-clock rates, each phase also reports the CPU time spent by this process and
all its descendants (broker, Spark JVM, Python workers; read from /proc on Linux) as messages
per CPU-second, which does not depend on what else runs.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbitmq.bench import _spark_floor
from orbitmq.bench._servers import add_namesrv_argument, start_standalone
from orbitmq.bench._topics import BenchTopic
from orbitmq.client.blocking import BlockingAdminClient, BlockingProducer
from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.model.message import Message, MessageQueue
from orbitmq.transport.runner import new_event_loop

TARGET_RATIO = 0.7
_PULL_GROUP = "bench-spark-pull"
_PHASES = ("pull", "count", "parquet", "floor", "floor-parquet")
_FLOOR_SAMPLE_ROWS = 4096


@dataclass(frozen=True, slots=True)
class Phase:
    """One reader's run in one round: wall seconds, CPU seconds of the process tree, rows read."""

    wall_s: float
    cpu_s: float
    rows: int


Round = dict[str, Phase]
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
    """Each round: the pull consumer, the batch count() and the availableNow query into Parquet."""
    spark = _spark_session(namesrv, args)
    _spark_floor.save_sample(spark, _read_options(namesrv, args), _FLOOR_SAMPLE_ROWS, workdir / "floor.arrow")
    _spark_floor.register(spark)
    try:
        rounds = []
        for index in range(args.rounds):
            pull = _timed(functools.partial(_pull_all_blocking, namesrv, queues, args))
            count = _timed(functools.partial(_spark_count, spark, namesrv, args))
            parquet = _timed(
                functools.partial(_spark_parquet, spark, namesrv, args, workdir / f"round-{index}")
            )
            floor = _timed(functools.partial(_spark_floor_count, spark, args, workdir / "floor.arrow"))
            floor_parquet = _timed(
                functools.partial(
                    _spark_floor_parquet, spark, args, workdir / "floor.arrow", workdir / f"floor-{index}"
                )
            )
            rounds.append(
                {
                    "pull": pull,
                    "count": count,
                    "parquet": parquet,
                    "floor": floor,
                    "floor-parquet": floor_parquet,
                }
            )
        return rounds
    finally:
        spark.stop()


def _pull_all_blocking(
    namesrv: str, queues: dict[MessageQueue, tuple[int, int]], args: argparse.Namespace
) -> int:
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(_pull_all(namesrv, queues, args))
    return int(args.prefill)


def _timed(run: Callable[[], int]) -> Phase:
    cpu_before, started = _tree_cpu_s(), time.monotonic()
    rows = run()
    return Phase(time.monotonic() - started, _tree_cpu_s() - cpu_before, rows)


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
    """CPU seconds (user + system) used so far by this process and its live descendants,
    including the descendants they reaped (Spark's Python workers come and go)."""
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
        ticks[int(entry.name)] = sum(int(value) for value in fields[11:15])
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


def _read_options(namesrv: str, args: argparse.Namespace) -> dict[str, str]:
    return {
        "namesrvAddr": namesrv,
        "topic": args.topic,
        "pullBatchSize": str(args.pull_batch_size),
        "startingOffsets": "earliest",
    }


def _spark_count(spark: Any, namesrv: str, args: argparse.Namespace) -> int:
    rows = int(spark.read.format("orbitmq").options(**_read_options(namesrv, args)).load().count())
    print(f"spark batch count(): {rows} rows", flush=True)
    return rows


def _spark_floor_count(spark: Any, args: argparse.Namespace, sample: Path) -> int:
    options = {"path": str(sample), "rows": str(args.prefill), "partitions": str(args.queues)}
    rows = int(spark.read.format(_spark_floor.FORMAT).options(**options).load().count())
    print(f"spark floor count(): {rows} rows", flush=True)
    return rows


def _spark_floor_parquet(spark: Any, args: argparse.Namespace, sample: Path, workdir: Path) -> int:
    options = {"path": str(sample), "rows": str(args.prefill), "partitions": str(args.queues)}
    frame = spark.readStream.format(_spark_floor.FORMAT).options(**options).load()
    rows = _available_now_into_parquet(frame, workdir)
    print(f"spark floor availableNow into Parquet: {rows} rows", flush=True)
    return rows


def _spark_parquet(spark: Any, namesrv: str, args: argparse.Namespace, workdir: Path) -> int:
    options = _read_options(namesrv, args)
    if args.max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)
    frame = spark.readStream.format("orbitmq").options(**options).load()
    rows = _available_now_into_parquet(frame, workdir)
    print(f"spark availableNow into Parquet: {rows} rows", flush=True)
    return rows


def _available_now_into_parquet(frame: Any, workdir: Path) -> int:
    """Run ``frame`` into Parquet files under ``Trigger.AvailableNow``; the rows it read."""
    query = (
        frame.writeStream.format("parquet").option("path", str(workdir / "out"))
        .option("checkpointLocation", str(workdir / "checkpoint")).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    return int(sum(p["numInputRows"] for p in query.recentProgress))


def _rates(count: int, size: int, seconds: float) -> str:
    seconds = max(seconds, 1e-9)
    return f"{count / seconds:>10,.0f} msgs/s {count * size / seconds / _MB:>8.1f} MB/s"


def _summary(args: argparse.Namespace, rounds: list[Round]) -> int:
    count = args.prefill
    print(f"\n{count} messages of {args.size} B over {args.queues} queues, master {args.master}")
    for index, phases in enumerate(rounds):
        cells = [
            f"{name} {phase.rows / phase.wall_s:>9,.0f} msgs/s ({phase.rows / max(phase.cpu_s, 1e-9):>9,.0f} per CPU-s)"
            for name, phase in phases.items()
        ]
        print(f"  round {index}: " + "   ".join(cells))
    best = {name: min(r[name].wall_s for r in rounds) for name in _PHASES}
    best_cpu = {name: min(r[name].cpu_s for r in rounds) for name in _PHASES}
    print("best rounds:")
    print(f"  pull consumer (pull_range)         {_rates(count, args.size, best['pull'])}")
    print(f"  spark batch count()                {_rates(count, args.size, best['count'])}")
    print(f"  spark availableNow into Parquet    {_rates(count, args.size, best['parquet'])}")
    print(f"  spark floor count() (no broker)    {_rates(count, args.size, best['floor'])}")
    print(f"  spark floor into Parquet           {_rates(count, args.size, best['floor-parquet'])}")
    print("  CPU per message (all processes): " + ", ".join(
        f"{name} {best_cpu[name] / count * 1e6:.1f} us" for name in _PHASES))  # fmt: skip
    print("ratios (each Spark rate over the pull consumer's; the floor: the same with no broker):")
    for name, floor, label in (
        ("count", "floor", "batch count()"),
        ("parquet", "floor-parquet", "availableNow into Parquet"),
    ):
        ratio = best["pull"] / best[name]
        verdict = "meets" if ratio >= TARGET_RATIO else "misses"
        print(
            f"  {label + ':':<28} {ratio:.2f} wall, {best_cpu['pull'] / best_cpu[name]:.2f} per CPU-s;"
            f" {verdict} the target of {TARGET_RATIO:.2f}; floor (Spark alone) {best['pull'] / best[floor]:.2f}"
            f" wall, {best_cpu['pull'] / best_cpu[floor]:.2f} per CPU-s"
        )
    return 0 if all(phase.rows == count for r in rounds for phase in r.values()) else 1
