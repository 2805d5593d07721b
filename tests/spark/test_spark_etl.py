"""The reference ETL pipeline against a plain-Python computation over the same events."""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from orbitmq.model.message import Message
from orbitmq.spark.pipelines.etl import EtlConfig, EtlTotals, follow, start_etl, summary
from tests.spark.conftest import Broker

pytestmark = [pytest.mark.spark, pytest.mark.slow]

WINDOW_S, WATERMARK_S = 10, 5
BASE_MS = 1_700_000_000_000


def _events(count: int) -> list[dict[str, Any]]:
    rng = random.Random(7)
    return [
        {"event_time_ms": BASE_MS + rng.randrange(0, 60_000), "user": f"u{rng.randrange(20)}",
         "kind": rng.choice(["click", "view", "buy"]), "amount": float(rng.randrange(1, 100))}
        for _ in range(count)
    ]  # fmt: skip


def _expected(events: list[dict[str, Any]]) -> dict[tuple[int, str], tuple[int, float]]:
    totals: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for event in events:
        window_start_ms = event["event_time_ms"] // (WINDOW_S * 1000) * WINDOW_S * 1000
        totals[(window_start_ms, event["kind"])][0] += 1
        totals[(window_start_ms, event["kind"])][1] += event["amount"]
    return {key: (int(count), amount) for key, (count, amount) in totals.items()}


def test_etl_output_equals_plain_python(spark: Any, orbit: Broker, tmp_path: Path) -> None:
    source, sink = orbit.new_topic("EtlIn", queues=4), orbit.new_topic("EtlOut", queues=2)
    events = _events(1500)
    # A late-arriving flush event moves the watermark past every window of the real events.
    flush = {"event_time_ms": BASE_MS + 600_000, "user": "x", "kind": "flush", "amount": 0.0}
    bodies = [json.dumps(e).encode() for e in events] + [b"not json", json.dumps(flush).encode()]
    orbit.produce([Message(source, body) for body in bodies[:-1]])
    orbit.produce([Message(source, bodies[-1])])
    config = EtlConfig(orbit.namesrv_addr, source, sink, str(tmp_path / "out"), str(tmp_path / "ckpt"),
                       window_s=WINDOW_S, watermark_s=WATERMARK_S)  # fmt: skip
    printed: list[str] = []
    totals = EtlTotals()
    follow(start_etl(spark, config, available_now=True), config, totals, poll_s=0.2, out=printed.append)
    rows = spark.read.parquet(config.output_dir).collect()
    got = {(int(r.window_start.timestamp() * 1000), r.kind): (r.events, r.amount_total) for r in rows}
    assert got == _expected(events)
    # What it read and wrote: every message by each query, every window to both sinks.
    assert totals.read_by_query == {"etl_parquet": len(bodies), "etl_topic": len(bodies)}
    assert totals.windows_to_parquet == totals.messages_to_topic == len(got)
    # A line per micro-batch of each query (the two run side by side, in either order).
    assert {line.split(":")[0] for line in printed} >= {"etl_parquet batch 0", "etl_topic batch 0"}
    assert all(
        re.fullmatch(r"etl_(parquet|topic) batch \d+: read \d+ messages, wrote \d+ .+", line)
        for line in printed
    )
    assert summary(totals, config) == (
        f"ETL read messages from topic {source} ({len(bodies)} by etl_parquet, {len(bodies)} by etl_topic); "
        f"wrote {len(got)} windows to Parquet {config.output_dir} and {len(got)} messages to topic {sink}"
    )
    published = (
        spark.read.format("orbitmq").option("namesrvAddr", orbit.namesrv_addr).option("topic", sink).load()
    )
    docs = [json.loads(bytes(r.body)) for r in published.collect()]
    assert sorted((d["kind"], d["events"]) for d in docs) == sorted((k[1], v[0]) for k, v in got.items())
