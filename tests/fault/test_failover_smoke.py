"""Controller mode smoke: a master is elected, sends are acknowledged, a killed master is replaced."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orbitmq.client import Producer, SendStatus
from orbitmq.model.message import Message
from tests.support.failover_group import broker_status, start_failover_group

pytestmark = pytest.mark.fault

TOPIC = "FailoverSmoke"


async def _send(namesrv: str, count: int) -> int:
    ok = 0
    async with Producer("PG_SMOKE", namesrv, send_msg_timeout_ms=3000) as producer:
        for index in range(count):
            try:
                result = await producer.send(Message(TOPIC, f"m-{index}".encode()))
            except Exception:
                await asyncio.sleep(0.1)
                continue
            ok += result.status is SendStatus.OK
    return ok


def test_failover_smoke_master_killed_is_replaced(tmp_path: Path) -> None:
    group = start_failover_group(tmp_path, topic=TOPIC)
    try:
        master, epoch = group.master()
        assert asyncio.run(_send(group.namesrv_addr, 50)) == 50
        shown = subprocess.run(
            [sys.executable, "-m", "orbitmq.cli", "admin", "-n", group.namesrv_addr, "controller", "list",
             "-c", group.controller_addrs],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        print(shown.stdout)
        master_rows = [line.split() for line in shown.stdout.splitlines() if " MASTER " in line]
        assert len(master_rows) == 1 and master_rows[0][3] == master.addr and master_rows[0][5] == str(epoch)
        group.wait_full_sync_state_set()
        view = group.view()
        print("view", view)
        master.kill()
        started = time.monotonic()
        new_master, new_epoch = group.master(not_epoch_below=epoch + 1)
        print(f"new master after {time.monotonic() - started:.2f} s")
        assert new_master is not master
        assert asyncio.run(_send(group.namesrv_addr, 20)) == 20
        master.start()
        time.sleep(3)
        status = broker_status(master.addr)
        print("old master", status)
        assert status is not None and status["role"] == "SLAVE"
    except BaseException:
        print(group.logs())
        raise
    finally:
        group.kill_all()
