"""Reference operations report: per-topic throughput and per-group lag over time.

The driver samples OrbitMQ through the admin client every ``--interval-s`` seconds: for each
topic the sum of its queues' max offsets (messages ever written) and, for each consumer group,
its total lag per topic (the admin client's consumer progress summed over queues: max offset
minus committed offset, or minus the min offset on a queue the group never committed). By
default the topics are the user topics (``AdminClient.user_topics``: no retry, dead-letter or
system topics, none a broker names after its cluster or itself). Spark then derives throughput
between consecutive samples with a window function and writes

* ``<output>/samples`` (Parquet) and ``<output>/samples_csv`` (CSV with a header): one row per
  (sample time, topic, group) with ``max_offset_total``, ``lag_total`` and ``msgs_per_s``;
* ``<output>/report.png``: throughput per topic (top) and one line of total lag per group
  (bottom) over time (matplotlib, Agg); legends sit beside the panels, never over them.

Run: ``python -m orbitmq.spark.pipelines.ops_report --namesrv 127.0.0.1:9876 --groups g1,g2``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from orbitmq.errors import OrbitError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
        chosen = list(topics) if topics else admin.user_topics()
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


TOPIC_COLORS = tuple(f"C{index}" for index in range(10))
"""Throughput lines, by topic (matplotlib's default cycle)."""
GROUP_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d")
"""Lag lines, by group in sorted order (ColorBrewer Dark2 without its grey, which text uses):
none is a topic line's color."""


def draw_chart(rows: Sequence[Any]) -> Figure:
    """The report's figure: messages written per second by topic, and total lag by group.

    ``rows`` have ``sample_ts`` (datetime), ``topic``, ``consumer_group`` (empty for a topic
    row), ``lag_total`` and ``msgs_per_s``, as :func:`report_frame` yields them.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)  # no display on servers: draw with Agg, without pyplot's global state
    top, bottom = fig.subplots(2, 1, sharex=True)
    for index, topic in enumerate(sorted({r.topic for r in rows if r.consumer_group == ""})):
        points = [(r.sample_ts, r.msgs_per_s) for r in rows if r.topic == topic and r.consumer_group == ""]
        points = [p for p in points if p[1] is not None]
        if points:
            color = TOPIC_COLORS[index % len(TOPIC_COLORS)]
            top.plot([p[0] for p in points], [p[1] for p in points], marker="o", color=color, label=topic)
    for index, group in enumerate(sorted({r.consumer_group for r in rows if r.consumer_group})):
        # One line per group: its lag summed over the reported topics at each sample.
        lag_by_ts: dict[Any, int] = {}
        for r in rows:
            if r.consumer_group == group:
                lag_by_ts[r.sample_ts] = lag_by_ts.get(r.sample_ts, 0) + r.lag_total
        times = sorted(lag_by_ts)
        color = GROUP_COLORS[index % len(GROUP_COLORS)]
        bottom.plot(times, [lag_by_ts[t] for t in times], marker="o", linewidth=2, color=color, label=group)
    times = [r.sample_ts for r in rows]
    if times:
        # Pin the axis to the sampled span; a lone point otherwise widens it to years.
        span = max(max(times) - min(times), timedelta(seconds=1))
        bottom.set_xlim(min(times) - span * 0.05, max(times) + span * 0.05)
    _label_times(bottom)
    top.set_ylabel("messages written / s")
    bottom.set_ylabel("lag (messages)")
    for axis, title in ((top, "topic"), (bottom, "consumer group")):
        handles, _ = axis.get_legend_handles_labels()
        if handles:
            # Beside the panel, not over it: a long list of topics never hides a line.
            axis.legend(
                title=title, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                ncols=1 + len(handles) // 12,
            )  # fmt: skip
        axis.grid(True, alpha=0.3)
    fig.suptitle("OrbitMQ operations report")
    return fig


def _label_times(axis: Any) -> None:
    """Time labels precise enough that no two ticks read the same (sub-second spans included)."""
    from matplotlib.dates import AutoDateLocator, num2date
    from matplotlib.ticker import FuncFormatter

    locator = AutoDateLocator()  # type: ignore[no-untyped-call]
    axis.xaxis.set_major_locator(locator)
    ticks = sorted(locator())
    step_s = min((b - a for a, b in zip(ticks, ticks[1:], strict=False)), default=1.0) * 86_400
    decimals = 0 if step_s >= 0.999 else min(3, max(1, -int(math.floor(math.log10(step_s)))))
    cut = 6 - decimals + (1 if decimals == 0 else 0)  # drop unneeded microsecond digits (and the dot)

    def label(value: float, _: object) -> str:
        moment: datetime = num2date(value)  # type: ignore[no-untyped-call]
        return moment.strftime("%H:%M:%S.%f")[:-cut]

    axis.xaxis.set_major_formatter(FuncFormatter(label))
    for tick in axis.get_xticklabels():
        tick.set_rotation(30)
        tick.set_horizontalalignment("right")


def _draw_chart(rows: Sequence[Any], path: Path) -> None:
    fig = draw_chart(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def main(argv: Sequence[str] | None = None) -> int:
    """Sample, then write the table and the chart."""
    parser = argparse.ArgumentParser(
        prog="python -m orbitmq.spark.pipelines.ops_report", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--namesrv", required=True, help="name servers, host:port;host:port")
    parser.add_argument(
        "--topics", default="", help="comma-separated topics (default: every topic users made)"
    )
    parser.add_argument("--groups", default="", help="comma-separated consumer groups to report lag for")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--interval-s", type=float, default=5.0)
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    args = parser.parse_args(argv)
    topics = [t for t in args.topics.split(",") if t] or None
    groups = [g for g in args.groups.split(",") if g]
    try:
        samples = collect_samples(args.namesrv, topics, groups, max(2, args.samples), args.interval_s)
    except OrbitError as exc:  # a mistyped group or topic, an unreachable name server
        print(f"ops_report: {exc}", file=sys.stderr)
        return 1
    spark = SparkSession.builder.master(args.master).appName("orbitmq-ops-report").getOrCreate()
    try:
        chart = write_report(report_frame(spark, samples), args.output)
    finally:
        spark.stop()
    print(f"wrote {len(samples)} samples to {args.output} and the chart {chart}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
