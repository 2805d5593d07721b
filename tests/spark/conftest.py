"""Fixtures of the Spark tier: one local SparkSession and one standalone OrbitMQ per session.

Starting Spark costs ~6-15 s and a Python data source's first query ~9 s more, so every test
of this directory shares one session (2 task slots, a failed task retried once, 2 shuffle
partitions, no UI) and one
``orbitmq standalone`` process; each test uses its own topics. Every process is killed at the
end of the session.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from orbitmq.model.message import Message
from tests.support.processes import ServerProcess, create_topic, start_standalone

# The Spark tier needs the ``spark`` extra (pyspark, pyarrow); without it, skip rather than fail.
pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

_topic_numbers = itertools.count()


@dataclass
class Broker:
    """The session's standalone OrbitMQ."""

    proc: ServerProcess

    @property
    def namesrv_addr(self) -> str:
        return self.proc.addr

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.proc.extra_ports[0]}"

    def new_topic(self, prefix: str, queues: int = 8) -> str:
        topic = f"{prefix}{next(_topic_numbers)}"
        create_topic(self.broker_addr, topic, queues=queues)
        return topic

    def produce(self, messages: list[Message], batch_size: int = 50) -> dict[bytes, tuple[int, int]]:
        """Send ``messages`` in batches (spread over the topic's queues); body -> (queue_id, queue_offset)."""
        from orbitmq.client.blocking import BlockingProducer

        placed: dict[bytes, tuple[int, int]] = {}
        producer = BlockingProducer("spark-tests", self.namesrv_addr)
        producer.start()
        try:
            for first in range(0, len(messages), batch_size):
                chunk = messages[first : first + batch_size]
                for msg, result in zip(chunk, producer.send_batch(chunk), strict=True):
                    placed[msg.body] = (result.message_queue.queue_id, result.queue_offset)
        finally:
            producer.shutdown()
        return placed


@pytest.fixture(scope="session")
def orbit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    proc = start_standalone(tmp_path_factory.mktemp("orbitmq"))
    try:
        yield Broker(proc)
    finally:
        proc.kill()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    # Every Python helper Spark starts (driver-side ones included) must run this venv's
    # interpreter, where orbitmq, pyarrow and pyspark are installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        # local[2,2]: two task slots, and a failed task is retried once (as on a cluster).
        SparkSession.builder.master("local[2,2]")
        .appName("orbitmq-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    # No orbitmq.spark.register(session): format "orbitmq" resolves through the installed
    # pyspark_orbitmq module (static registration), as in any new session.
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()
