"""Reference operations report: per-topic throughput and per-group lag over time.

The driver samples OrbitMQ through the admin client every ``--interval-s`` seconds: for each
topic the sum of its queues' max offsets (messages ever written) and, for each consumer group,
its total lag per topic (broker max offset minus committed offset, summed over queues). Spark
then derives throughput between consecutive samples with a window function and writes

* ``<output>/samples`` (Parquet) and ``<output>/samples_csv`` (CSV with a header): one row per
  (sample time, topic, group) with ``max_offset_total``, ``lag_total`` and ``msgs_per_s``;
* ``<output>/report.png``: throughput per topic and lag per group over time (matplotlib, Agg).

Run: ``python -m orbitmq.spark.pipelines.ops_report --namesrv 127.0.0.1:9876 --groups g1,g2``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from orbitmq.spark._reader import is_system_topic

SAMPLE_SCHEMA = (
    "sample_ts timestamp, topic string, consumer_group string, max_offset_total long, lag_total long"
)


@dataclass(frozen=True, slots=True)
class Sample:
    """One observation of one topic (``consumer_group`` empty) or one group on one topic."""

    sample_ts_ms: int
    topic: str
    consumer_group: str
    max_offset_total: int
    lag_total: int


def sample_once(admin: Any, topics: Sequence[str], groups: Sequence[str], now_ms: int) -> list[Sample]:
    """Observe every topic's written total and every group's lag per topic, now."""
    samples = []
    for topic in topics:
        status = admin.topic_status(topic)
        samples.append(Sample(now_ms, topic, "", sum(s.max_offset for s in status.values()), 0))
    for group in groups:
        lag_by_topic: dict[str, int] = {}
        for mq, progress in admin.consumer_progress(group).items():
            if mq.topic in topics:
                lag_by_topic[mq.topic] = lag_by_topic.get(mq.topic, 0) + max(0, progress.lag)
        for topic, lag in sorted(lag_by_topic.items()):
            samples.append(Sample(now_ms, topic, group, 0, lag))
    return samples


def collect_samples(
    namesrv_addr: str, topics: Sequence[str] | None, groups: Sequence[str], count: int, interval_s: float
) -> list[Sample]:
    """``count`` rounds of :func:`sample_once`, ``interval_s`` apart."""
    from orbitmq.client.blocking import BlockingAdminClient

    admin = BlockingAdminClient(namesrv_addr)
    admin.start()
    try:
        chosen = list(topics) if topics else [t for t in admin.list_topics() if not is_system_topic(t)]
        samples: list[Sample] = []
        for round_index in range(count):
            if round_index:
                time.sleep(interval_s)
            samples += sample_once(admin, chosen, groups, int(time.time() * 1000))
        return samples
    finally:
        admin.close()


def report_frame(spark: SparkSession, samples: Sequence[Sample]) -> DataFrame:
    """Samples with ``msgs_per_s``: written messages per second since the previous topic sample."""
    rows = [
        (s.sample_ts_ms / 1000.0, s.topic, s.consumer_group, s.max_offset_total, s.lag_total) for s in samples
    ]
    frame = spark.createDataFrame(
        rows, "ts double, topic string, consumer_group string, max_offset_total long, lag_total long"
    )
    frame = frame.withColumn("sample_ts", F.timestamp_seconds("ts"))
    previous = Window.partitionBy("topic", "consumer_group").orderBy("ts")
    rate = (F.col("max_offset_total") - F.lag("max_offset_total").over(previous)) / (
        F.col("ts") - F.lag("ts").over(previous)
    )
    return frame.withColumn(
        "msgs_per_s", F.when(F.col("consumer_group") == "", rate).otherwise(F.lit(None).cast("double"))
    ).select("sample_ts", "topic", "consumer_group", "max_offset_total", "lag_total", "msgs_per_s")


def write_report(frame: DataFrame, output_dir: str) -> Path:
    """Write the table (Parquet and CSV) and the PNG chart; returns the chart's path."""
    out = Path(output_dir)
    frame.write.mode("overwrite").parquet(str(out / "samples"))
    frame.coalesce(1).write.mode("overwrite").option("header", "true").csv(str(out / "samples_csv"))
    chart = out / "report.png"
    _draw_chart(frame.orderBy("sample_ts").collect(), chart)
    return chart


def _draw_chart(rows: Sequence[Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on servers; must precede pyplot
    from matplotlib import pyplot as plt
    from matplotlib.dates import DateFormatter

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for topic in sorted({r.topic for r in rows if r.consumer_group == ""}):
        points = [(r.sample_ts, r.msgs_per_s) for r in rows if r.topic == topic and r.consumer_group == ""]
        points = [p for p in points if p[1] is not None]
        if points:
            top.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=topic)
    for key in sorted({(r.consumer_group, r.topic) for r in rows if r.consumer_group}):
        points = [(r.sample_ts, r.lag_total) for r in rows if (r.consumer_group, r.topic) == key]
        bottom.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"{key[0]} / {key[1]}")
    times = [r.sample_ts for r in rows]
    if times:
        # Pin the axis to the sampled span; a lone point otherwise widens it to years.
        span = max(max(times) - min(times), timedelta(seconds=1))
        bottom.set_xlim(min(times) - span * 0.05, max(times) + span * 0.05)
    bottom.xaxis.set_major_formatter(DateFormatter("%H:%M:%S"))  # type: ignore[no-untyped-call]
    top.set_ylabel("messages written / s")
    bottom.set_ylabel("lag (messages)")
    for axis in (top, bottom):
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize="small")
        axis.grid(True, alpha=0.3)
    fig.suptitle("OrbitMQ operations report")
    fig.autofmt_xdate()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """Sample, then write the table and the chart."""
    parser = argparse.ArgumentParser(
        prog="python -m orbitmq.spark.pipelines.ops_report", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--namesrv", required=True, help="name servers, host:port;host:port")
    parser.add_argument(
        "--topics", default="", help="comma-separated topics (default: every non-system topic)"
    )
    parser.add_argument("--groups", default="", help="comma-separated consumer groups to report lag for")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--interval-s", type=float, default=5.0)
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    args = parser.parse_args(argv)
    topics = [t for t in args.topics.split(",") if t] or None
    groups = [g for g in args.groups.split(",") if g]
    samples = collect_samples(args.namesrv, topics, groups, max(2, args.samples), args.interval_s)
    spark = SparkSession.builder.master(args.master).appName("orbitmq-ops-report").getOrCreate()
    try:
        chart = write_report(report_frame(spark, samples), args.output)
    finally:
        spark.stop()
    print(f"wrote {len(samples)} samples to {args.output} and the chart {chart}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
