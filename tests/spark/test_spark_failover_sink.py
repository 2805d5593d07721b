"""An exactly-once sink query keeps going through a failover in controller mode.

Method: a controller-mode group of two brokers (``tests/support/failover_group.py``) holds the
sink topic; the source topic is on the session's standalone broker. An ``availableNow`` query
reads ROWS rows in micro-batches of PER_BATCH and writes them with ``exactlyOnce=true``. Once
its first micro-batch is committed, the master is SIGKILLed and the controller makes the slave
master. The controller learns of the kill at once (the master's connection closes), so the
slave is also held stopped (SIGSTOP) for OUTAGE_S: the group has no master while the next
micro-batch stages and commits, however fast the machine. The query must finish without an
error: write tasks stage on the new master once it serves, the driver's commit follows the
group to it, and a commit the old master recorded is known to the new one (the ledger is in
the replicated CommitLog). Checker: the sink topic holds every source row exactly once, by body.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from orbitmq.model.message import Message
from tests.integration.client.test_producer import pull_all
from tests.spark.conftest import Broker
from tests.support.failover_group import start_failover_group
from tests.support.replica_group import wait_for

# 600 s: run alone, this test also pays for the tier's Spark session and first Python query.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

ROWS = 2000
PER_BATCH = 400
SINK_QUEUES = 4
SINK = "EoFailoverSink"
OUTAGE_S = 8.0  # the slave is stopped this long after the master is killed


def _sink_bodies(broker_addr: str) -> Counter[bytes]:
    async def read() -> Counter[bytes]:
        bodies: Counter[bytes] = Counter()
        for queue_id in range(SINK_QUEUES):
            bodies.update(message.body for message in await pull_all(broker_addr, SINK, queue_id))
        return bodies

    return asyncio.run(read())


def test_exactly_once_stream_survives_a_controller_failover_with_every_row_once(
    spark: Any, orbit: Broker, tmp_path: Path
) -> None:
    source = orbit.new_topic("EoFailoverIn", queues=2)
    orbit.produce([Message(source, b"row-%05d" % n) for n in range(ROWS)])
    group = start_failover_group(tmp_path / "group", brokers=2, topic=SINK, queues=SINK_QUEUES)
    try:
        master, epoch = group.master()
        group.wait_full_sync_state_set()
        (slave,) = [broker for broker in group.brokers if broker is not master]
        assert slave.proc is not None
        query = (
            spark.readStream.format("orbitmq")
            .options(namesrvAddr=orbit.namesrv_addr, topic=source, startingOffsets="earliest")
            .option("maxOffsetsPerTrigger", str(PER_BATCH))
            .load()
            .select("body")
            .writeStream.format("orbitmq")
            .options(namesrvAddr=group.namesrv_addr, topic=SINK, exactlyOnce="true", writeBatchSize="100")
            .option("commitTimeoutMs", "30000")  # a commit stuck on the dead master fails the query
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            wait_for(lambda: bool(query.recentProgress), 240, "a first committed micro-batch")
            os.kill(slave.proc.pid, signal.SIGSTOP)
            try:
                master.kill()
                written_before_kill = sum(p["numInputRows"] for p in query.recentProgress)
                time.sleep(OUTAGE_S)
            finally:
                os.kill(slave.proc.pid, signal.SIGCONT)
            query.awaitTermination(240)
        finally:
            query.stop()
        assert query.exception() is None, query.exception()
        assert written_before_kill < ROWS  # the rest went through the new master
        assert sum(p["numInputRows"] for p in query.recentProgress) == ROWS
        new_master, _ = group.master(not_epoch_below=epoch + 1)
        assert new_master is slave
        expected = Counter(b"row-%05d" % n for n in range(ROWS))
        deadline = time.monotonic() + 10
        while (bodies := _sink_bodies(new_master.addr)).total() < ROWS and time.monotonic() < deadline:
            time.sleep(0.2)  # the consume queues are built from the CommitLog asynchronously
        assert bodies == expected
    except BaseException:
        print(group.logs())
        raise
    finally:
        group.kill_all()
