"""Fuzz the HA port of a real SYNC_MASTER (issue acceptance 4): no crash, no inflated acknowledgement.

Method: while an OrbitMQ producer sends to a SYNC_MASTER that has no real slave, 300 seeded
connections hit its HA port with random bytes, half reports, reports above the master's
max offset, and a valid first report followed by an acknowledgement above what was sent.
Every send must then be answered SLAVE_NOT_AVAILABLE or FLUSH_SLAVE_TIMEOUT (stored, not
acknowledged by any slave), never SEND_OK; every HA connection the master lists must have
its acknowledgement within what it was sent; the master must stay up and keep its log quiet.
Afterwards a real slave connects, copies the whole log and SYNC sends are SEND_OK again.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from orbitmq.broker.replication.codec import encode_offset_report
from orbitmq.client import Message, Producer, SendStatus
from orbitmq.errors import OrbitError
from tests.integration.client.test_producer import create_topic
from tests.support.replica_group import fetch_ha_status, start_replica_group, wait_caught_up

pytestmark = pytest.mark.fault

TOPIC = "HaFuzzTopic"
CONNECTIONS = 300
SEED = 20_240_611


async def _fuzz_one(ha_addr: str, rng: random.Random, master_max: int) -> None:
    host, port = ha_addr.rsplit(":", 1)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 2)
    except (OSError, TimeoutError):
        return
    kind = rng.randrange(5)
    if kind == 0:
        payload = rng.randbytes(rng.randrange(1, 200))  # random bytes
    elif kind == 1:
        payload = encode_offset_report(rng.randrange(1 << 40))[: rng.randrange(1, 8)]  # half a report
    elif kind == 2:
        payload = encode_offset_report(master_max + rng.randrange(1, 1 << 40))  # beyond the max
    elif kind == 3:
        payload = encode_offset_report(0) + encode_offset_report(master_max + rng.randrange(1, 1 << 20))
    else:
        # A real request, then an acknowledgement of more than it was sent.
        payload = encode_offset_report(0) + encode_offset_report((1 << 62) + rng.randrange(1 << 20))
    try:
        writer.write(payload)
        await writer.drain()
        await asyncio.sleep(rng.random() * 0.05)
    except OSError:
        pass
    finally:
        writer.close()


async def _sender(producer: Producer, stop: asyncio.Event, statuses: list[SendStatus]) -> None:
    while not stop.is_set():
        try:
            statuses.append((await producer.send(Message(TOPIC, b"fuzz"))).status)
        except OrbitError:
            await asyncio.sleep(0.05)


async def test_ha_port_fuzz_neither_crashes_nor_inflates_acknowledgements(tmp_path: Path) -> None:
    group = start_replica_group(tmp_path, "SYNC_MASTER", slaves=0, slaveTimeout=500)
    try:
        master = group.master
        await create_topic(group.namesrv_addr, TOPIC, 2)
        status = await fetch_ha_status(master.addr)
        ha_addr = status["haServerAddr"]
        rng = random.Random(SEED)
        statuses: list[SendStatus] = []
        stop = asyncio.Event()
        async with Producer("PG_HA_FUZZ", group.namesrv_addr, send_msg_timeout_ms=3000) as producer:
            senders = [asyncio.create_task(_sender(producer, stop, statuses)) for _ in range(4)]
            for start in range(0, CONNECTIONS, 30):
                master_max = int((await fetch_ha_status(master.addr))["masterCommitLogMaxOffset"])
                await asyncio.gather(*(_fuzz_one(ha_addr, rng, master_max) for _ in range(start, start + 30)))
                for connection in (await fetch_ha_status(master.addr))["haConnectionInfo"]:
                    assert connection["slaveAckOffset"] <= connection["transferFromWhere"], connection
            stop.set()
            await asyncio.gather(*senders)
        assert statuses and SendStatus.OK not in statuses, statuses[:5]
        after = await fetch_ha_status(master.addr)
        assert after["bogusAcks"] > 0 and after["inSyncSlaveNums"] == 0
        assert master.proc is not None and master.proc.poll() is None
        # Garbage is said, not logged once per connection.
        warnings = [
            line for line in master.log_path.read_text().splitlines() if "WARNING" in line or "ERROR" in line
        ]
        assert len(warnings) < 30, warnings[:40]

        # The master still replicates: a real slave copies everything and SYNC sends succeed.
        slave = group.add_slave(1)
        await asyncio.to_thread(wait_caught_up, master, slave)
        async with Producer("PG_HA_FUZZ_AFTER", group.namesrv_addr) as producer:
            started = time.monotonic()
            while True:
                result = await producer.send(Message(TOPIC, b"after the fuzz"))
                if result.status is SendStatus.OK or time.monotonic() - started > 10:
                    break
                await asyncio.sleep(0.2)
        assert result.status is SendStatus.OK
    finally:
        group.kill_all()
