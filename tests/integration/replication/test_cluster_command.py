"""``orbitmq cluster``: a nameserver and a master with a slave from one command, then Ctrl-C.

Method: run the command as a child on a block of free consecutive ports with its data in a
temporary directory, wait for its table, send a message through the nameserver it printed,
read ``orbitmq admin cluster list`` (the master SYNC_MASTER, the slave in sync), check no
port is reachable through this host's non-loopback address (loopback by default), then send
SIGINT: the command must exit 0 and leave no broker or nameserver running.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orbitmq.broker.config import first_non_loopback_ipv4
from orbitmq.cli.admin import main as admin_main
from orbitmq.client import Message, SendStatus
from orbitmq.client.blocking import BlockingProducer
from tests.support.processes import free_port, free_port_block


def test_cluster_command_runs_a_replicated_group_until_interrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namesrv_port, base_port = free_port(), free_port_block(4)
    out_path = tmp_path / "cluster.out"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "orbitmq.cli", "cluster", "--masters", "1", "--slaves", "1",
             "--data-dir", str(tmp_path / "data"), "--namesrv-port", str(namesrv_port),
             "--base-port", str(base_port), "--broker-conf", "registerNameServerPeriod=1000",
             "--broker-conf", f"mapedFileSizeCommitLog={4 << 20}"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "Ctrl-C stops the cluster" not in out_path.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, out_path.read_text()
            time.sleep(0.1)
        table = out_path.read_text()
        assert f"broker-a master   SYNC_MASTER  127.0.0.1:{base_port}  127.0.0.1:{base_port + 1}" in table
        assert f"broker-a slave 1  SLAVE        127.0.0.1:{base_port + 2}  127.0.0.1:{base_port + 3}" in table
        slave_conf = (tmp_path / "data" / "broker-a" / "1" / "broker.conf").read_text()
        assert slave_conf.count("brokerRole=SLAVE") == 1
        # A local cluster, like standalone, listens on loopback only: HA ports included.
        assert slave_conf.count("bindAddress=127.0.0.1") == 1
        outside = first_non_loopback_ipv4()
        if not outside.startswith("127."):
            for port in (namesrv_port, *range(base_port, base_port + 4)):
                with pytest.raises(OSError):
                    socket.create_connection((outside, port), timeout=0.5).close()
        namesrv = f"127.0.0.1:{namesrv_port}"
        with BlockingProducer("PG_CLUSTER_CMD", namesrv) as producer:
            # The slave's first registration may land a moment after the table is printed.
            for _ in range(50):
                result = producer.send(Message("ClusterCommandTopic", b"hello"))
                if result.status is SendStatus.OK:
                    break
                time.sleep(0.2)
        assert result.status is SendStatus.OK
        assert admin_main(["-n", namesrv, "cluster", "list"]) == 0
        rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
        assert [row[2:5] for row in rows] == [
            ["0", f"127.0.0.1:{base_port}", "SYNC_MASTER"],
            ["1", f"127.0.0.1:{base_port + 2}", "SLAVE"],
        ]
        assert rows[1][-2:] == ["yes", "STREAMING"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        assert "stopped 3 processes; data, broker.conf files and logs are kept under" in out_path.read_text()
        for port in (namesrv_port, base_port, base_port + 2):
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
