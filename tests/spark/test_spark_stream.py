"""Streaming read: rate-limited micro-batches over 8 queues, the query SIGKILLed mid-run (driver,
JVM and Python workers at once) and restarted from its checkpoint; every message lands in the
exactly-once Parquet sink exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from orbitmq.model.message import Message
from tests.spark.conftest import Broker

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_PER_TRIGGER = 300


def _start_child(
    orbit: Broker, topic: str, output: Path, checkpoint: Path, log: Path
) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "tests.spark.stream_child", orbit.namesrv_addr, topic, str(output),
           str(checkpoint), str(MAX_PER_TRIGGER)]  # fmt: skip
    with open(log, "wb") as out:
        return subprocess.Popen(
            cmd, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _wait_commits(child: subprocess.Popen[bytes], checkpoint: Path, count: int, log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        commits = checkpoint / "commits"
        if commits.is_dir() and len([p for p in commits.iterdir() if p.name.isdigit()]) >= count:
            return
        if child.poll() is not None:
            raise AssertionError(f"streaming child exited {child.returncode}:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} committed batches in 120 s:\n{log.read_text()[-3000:]}")


def _batch_sizes(checkpoint: Path) -> list[int]:
    """Messages per logged micro-batch, from the end offsets Spark wrote for each batch."""
    ends = []
    for path in sorted(
        (checkpoint / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1
    ):
        if path.name.isdigit():
            doc = json.loads(path.read_text().splitlines()[2])
            ends.append(
                sum(o for brokers in doc.values() for queues in brokers.values() for o in queues.values())
            )
    return [b - a for a, b in zip([0, *ends], ends, strict=False)]


def test_stream_killed_and_restarted_delivers_every_message_once(
    spark: Any, orbit: Broker, tmp_path: Path
) -> None:
    topic = orbit.new_topic("SparkStream", queues=8)
    orbit.produce([Message(topic, f"a{i}".encode()) for i in range(3000)])
    output, checkpoint, log = tmp_path / "out", tmp_path / "ckpt", tmp_path / "child.log"
    child = _start_child(orbit, topic, output, checkpoint, log)
    try:
        _wait_commits(child, checkpoint, 2, log)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
    orbit.produce([Message(topic, f"b{i}".encode()) for i in range(500)])

    frame = (
        spark.readStream.format("orbitmq")
        .option("namesrvAddr", orbit.namesrv_addr)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(MAX_PER_TRIGGER))
        .load()
        .select("topic", "queue_id", "queue_offset", "body")
    )
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None

    rows = spark.read.parquet(str(output)).collect()
    keys = [(r.queue_id, r.queue_offset) for r in rows]
    assert len(keys) == len(set(keys)) == 3500
    expected = [f"a{i}".encode() for i in range(3000)] + [f"b{i}".encode() for i in range(500)]
    assert sorted(bytes(r.body) for r in rows) == sorted(expected)
    assert {r.queue_id for r in rows} == set(range(8))
    sizes = _batch_sizes(checkpoint)
    assert len(sizes) >= 12 and all(0 <= size <= MAX_PER_TRIGGER for size in sizes)
