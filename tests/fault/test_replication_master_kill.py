"""SYNC_MASTER: SIGKILL the master while OrbitMQ's producer and the C++ producer send.

Goal (issue acceptance 1): every acknowledged message reads back from the slave byte for
byte, the slave's CommitLog is a byte prefix of the master's, and the store verifier is clean
on both. Method: a nameserver, a SYNC_MASTER and one slave as processes; eight OrbitMQ
senders and a ``rocketmq==0.4.4`` producer child send to one topic and every SEND_OK goes to
a ledger (unique key, queue, queue offset, body). The slave is paused (SIGSTOP) for a second,
so that the master writes bytes no slave holds, then the master is SIGKILLed mid-stream and
the slave resumed: run with ASYNC_MASTER, this loses acknowledged messages. Then
every queue of the slave is read with raw pulls and each ledger entry must be there, at its
queue offset, with its body; the slave is stopped cleanly, the master restarted (crash
recovery) and stopped cleanly, and their logs compared and verified.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from orbitmq.client import Producer, SendStatus
from orbitmq.errors import OrbitError
from orbitmq.model.message import Message
from tests.integration.client.test_producer import create_topic, pull_all
from tests.integration.conftest import REPO_ROOT, CppClient
from tests.support.cpp_client import body_for
from tests.support.replica_group import (
    commit_log_bytes,
    fetch_ha_status,
    start_replica_group,
    verify_store,
)

pytestmark = pytest.mark.fault

TOPIC = "HaKillTopic"
QUEUES = 4
SENDERS = 8
CPP_BODY_BYTES = 300


async def _orbit_senders(namesrv: str, stop: asyncio.Event, ledger: dict[str, tuple[int, int, bytes]]) -> int:
    failures = 0

    async def sender(index: int) -> None:
        nonlocal failures
        seq = 0
        while not stop.is_set():
            seq += 1
            body = f"orbit-{index}-{seq}-".encode() * 9
            try:
                result = await producer.send(Message(TOPIC, body))
            except OrbitError:
                failures += 1
                await asyncio.sleep(0.05)
                continue
            if result.status is SendStatus.OK:
                ledger[result.msg_id] = (result.message_queue.queue_id, result.queue_offset, body)

    async with Producer(
        "PG_HA_KILL", namesrv, send_msg_timeout_ms=2000, retry_times_when_send_failed=0
    ) as producer:
        await asyncio.gather(*(sender(index) for index in range(SENDERS)))
    return failures


def _cpp_producer(cpp: CppClient, namesrv: str) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "tests.support.cpp_client", "produce", "--namesrv", namesrv, "--topic", TOPIC,
        "--group", "PG_HA_KILL_CPP", "--count", "1000000", "--size", str(CPP_BODY_BYTES), "--timeout-ms", "2000",
    ]  # fmt: skip
    out = open(cpp.home / "producer.jsonl", "wb")  # noqa: SIM115 - the child owns it until it exits
    proc = subprocess.Popen(cmd, env=cpp.env(), cwd=REPO_ROOT, stdout=out, stderr=subprocess.DEVNULL)
    out.close()
    return proc


def _cpp_ledger(cpp: CppClient) -> dict[str, tuple[int, bytes]]:
    """unique key -> (queue offset, body) of every SEND_OK the C++ producer printed."""
    ledger = {}
    for line in (cpp.home / "producer.jsonl").read_text().splitlines():
        if not line.startswith("{") or not line.endswith("}"):
            continue  # a line cut by the kill
        event = json.loads(line)
        if event["event"] == "sent" and event["status"] == "OK":
            ledger[str(event["msg_id"])] = (int(event["offset"]), body_for(int(event["seq"]), CPP_BODY_BYTES))
    return ledger


async def test_sync_master_kill_keeps_every_acknowledged_message_on_the_slave(tmp_path: Path) -> None:
    group = start_replica_group(tmp_path, "SYNC_MASTER")
    cpp = CppClient(tmp_path / "cpp-home")
    try:
        master, slave = group.master, group.slaves[0]
        await create_topic(group.namesrv_addr, TOPIC, QUEUES)
        orbit_ledger: dict[str, tuple[int, int, bytes]] = {}
        stop = asyncio.Event()
        cpp_proc = _cpp_producer(cpp, group.namesrv_addr)
        senders = asyncio.create_task(_orbit_senders(group.namesrv_addr, stop, orbit_ledger))
        await asyncio.sleep(2.0)
        acknowledged_before_kill = len(orbit_ledger)
        # The slave falls behind first (paused), so that the master holds bytes no slave has:
        # an acknowledgement that did not wait for the slave would now lose them.
        assert slave.proc is not None
        os.kill(slave.proc.pid, signal.SIGSTOP)
        await asyncio.sleep(1.0)
        master.kill()
        os.kill(slave.proc.pid, signal.SIGCONT)
        await asyncio.sleep(0.5)
        stop.set()
        await senders
        try:
            cpp_proc.wait(20)
        except subprocess.TimeoutExpired:
            cpp_proc.kill()
            cpp_proc.wait()
        cpp_ledger = _cpp_ledger(cpp)
        assert acknowledged_before_kill > 100 and len(cpp_ledger) > 50, (
            acknowledged_before_kill,
            len(cpp_ledger),
        )
        print("ledger", len(orbit_ledger), len(cpp_ledger))

        # Every acknowledged message is on the slave, at its queue offset, byte for byte.
        stored = {}
        for queue_id in range(QUEUES):
            for message in await pull_all(slave.addr, TOPIC, queue_id):
                stored[message.uniq_key] = (queue_id, message.queue_offset, message.body)
        for key, (queue_id, queue_offset, body) in orbit_ledger.items():
            assert stored.get(key) == (queue_id, queue_offset, body), key
        for key, (queue_offset, body) in cpp_ledger.items():
            found = stored.get(key)
            assert found is not None and found[1:] == (queue_offset, body), key

        # The slave's log is a prefix of the master's, and both stores verify clean.
        slave_end = int((await fetch_ha_status(slave.addr))["haClientRuntimeInfo"]["maxOffset"])
        assert slave.stop() == 0
        master.start()  # crash recovery on the killed master's store
        assert master.stop() == 0
        slave_store, master_store = group.store_dir(slave), group.store_dir(master)
        assert commit_log_bytes(slave_store, 0, slave_end) == commit_log_bytes(master_store, 0, slave_end)
        verify_store(slave_store)
        verify_store(master_store)
    finally:
        cpp.kill_all()
        group.kill_all()
