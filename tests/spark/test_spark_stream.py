"""Streaming queries SIGKILLed mid-run (driver, JVM and Python workers at once) and restarted from
their checkpoints: every message lands exactly once in Spark's Parquet sink and, with
exactlyOnce=true, in an OrbitMQ topic.

One child process runs both queries over 8 queues with rate-limited micro-batches, so one JVM
start serves both tests; it is killed once both have committed a few batches. For the topic
sink the newest committed batch is also dropped from Spark's commit log, as a crash between
the sink's commit and Spark's commit-log write leaves it: the restart replays a batch whose
messages are already in the topic, which an at-least-once sink would duplicate.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orbitmq.model.message import Message
from tests.spark.conftest import Broker
from tests.spark.stream_child import source, to_files, to_messages

# The first test also runs the killed child (its own JVM); a busy machine can take minutes.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_PER_TRIGGER = 300


@dataclass
class Killed:
    """What the killed child left: its source and target topics and its directories."""

    topic: str
    target: str
    output: Path
    checkpoint: Path
    replayed_batch: int


def _commits(checkpoint: Path) -> list[int]:
    commits = checkpoint / "commits"
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else []


def _wait_commits(child: subprocess.Popen[bytes], checkpoints: list[Path], count: int, log: Path) -> None:
    deadline = time.monotonic() + 240  # generous: the 2-core machine may be busy with other suites
    while time.monotonic() < deadline:
        if all(len(_commits(checkpoint)) >= count for checkpoint in checkpoints):
            return
        if child.poll() is not None:
            raise AssertionError(f"streaming child exited {child.returncode}:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} committed batches in 240 s:\n{log.read_text()[-3000:]}")


def _wait_group_gone(pgid: int) -> None:
    """Until no process of the killed group (the driver's JVM included) is left to touch the
    checkpoint: on a busy machine the JVM may outlive the Python driver by a moment."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"processes of the killed group {pgid} still run after 30 s")


@pytest.fixture(scope="module")
def killed(orbit: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Killed]:
    workdir = tmp_path_factory.mktemp("killed-stream")
    topic, target = orbit.new_topic("SparkStream", queues=8), orbit.new_topic("SparkStreamOut", queues=4)
    orbit.produce([Message(topic, f"a{i}".encode()) for i in range(3000)])
    output, checkpoint, log = workdir / "out", workdir / "ckpt", workdir / "child.log"
    cmd = [sys.executable, "-m", "tests.spark.stream_child", orbit.namesrv_addr, topic, str(output),
           str(checkpoint), str(MAX_PER_TRIGGER), target]  # fmt: skip
    with open(log, "wb") as out:
        child = subprocess.Popen(
            cmd, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        _wait_commits(child, [checkpoint / "files", checkpoint / "messages"], 2, log)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
        _wait_group_gone(child.pid)
    newest = _commits(checkpoint / "messages")[-1]
    planned = max(int(p.name) for p in (checkpoint / "messages" / "offsets").iterdir() if p.name.isdigit())
    if planned == newest:
        # Killed between batches: make it a crash before Spark's commit-log write of the newest
        # batch (the file and its checksum gone), so the restart must replay that batch.
        for name in (str(newest), f".{newest}.crc"):
            (checkpoint / "messages" / "commits" / name).unlink(missing_ok=True)
    # Else killed mid-batch (its offsets logged, no commit): the restart replays that batch as it
    # is. Removing a commit below it would not make Spark replay that one (it reruns only the
    # newest logged batch), so nothing is removed.
    orbit.produce([Message(topic, f"b{i}".encode()) for i in range(500)])
    yield Killed(topic, target, output, checkpoint, planned)


def _expected() -> list[bytes]:
    return [f"a{i}".encode() for i in range(3000)] + [f"b{i}".encode() for i in range(500)]


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
    spark: Any, orbit: Broker, killed: Killed
) -> None:
    frame = source(spark, orbit.namesrv_addr, killed.topic, str(MAX_PER_TRIGGER))
    query = to_files(frame, str(killed.output), str(killed.checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination(180)
    assert query.exception() is None

    rows = spark.read.parquet(str(killed.output)).collect()
    keys = [(r.queue_id, r.queue_offset) for r in rows]
    assert len(keys) == len(set(keys)) == 3500
    assert sorted(bytes(r.body) for r in rows) == sorted(_expected())
    assert {r.queue_id for r in rows} == set(range(8))
    sizes = _batch_sizes(killed.checkpoint / "files")
    assert len(sizes) >= 12 and all(0 <= size <= MAX_PER_TRIGGER for size in sizes)


def test_exactly_once_sink_killed_and_replayed_holds_every_message_once(
    spark: Any, orbit: Broker, killed: Killed
) -> None:
    # The replayed batch keeps its logged range; what follows is read without a cap.
    frame = source(spark, orbit.namesrv_addr, killed.topic, None)
    query = to_messages(frame, orbit.namesrv_addr, killed.target, str(killed.checkpoint))
    started = query.trigger(availableNow=True).start()
    started.awaitTermination(180)
    assert started.exception() is None
    # The interrupted batch (or the one whose commit was dropped) ran again, its messages already committed.
    assert killed.replayed_batch in _commits(killed.checkpoint / "messages")

    written = (
        spark.read.format("orbitmq")
        .option("namesrvAddr", orbit.namesrv_addr)
        .option("topic", killed.target)
        .load()
    )
    assert Counter(bytes(r.body) for r in written.select("body").collect()) == Counter(_expected())
