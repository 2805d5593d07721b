"""The peers' Java servers as subprocesses: Apache RocketMQ's NameServer and Broker, and a
one-node Apache Kafka in KRaft mode, each on free ports of 127.0.0.1 with its data, logs and
home under a temporary directory, in a session of its own (a Ctrl-C reaches the benchmark
alone, which then stops them), killed by :meth:`JavaServer.stop`.

Heaps are sized for a small shared host (1 GiB each broker, 256 MiB the name server); the JIT
is left at its defaults, since these are measured, not merely started.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from orbitmq.bench._peers import process_cpu_s

__all__ = ["JavaServer", "free_port", "rss_peak_mib", "start_kafka", "start_rocketmq"]

START_TIMEOUT_S = 120.0

_OPENS = [
    "-Djava.net.preferIPv4Stack=true",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
]
BROKER_HEAP = ["-Xms1g", "-Xmx1g", "-XX:MaxDirectMemorySize=1g", "-XX:+UseG1GC"]
NAMESRV_HEAP = ["-Xms256m", "-Xmx256m", "-XX:+UseG1GC"]
TOOL_HEAP = ["-Xms512m", "-Xmx512m", "-XX:+UseG1GC"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _free_block(size: int) -> int:
    """The first of ``size`` consecutive free ports."""
    for _ in range(200):
        base = free_port()
        if base + size > 65535:
            continue
        try:
            socks = []
            for port in range(base, base + size):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
        return base
    raise RuntimeError(f"no block of {size} free ports")


def rss_peak_mib(pid: int) -> float:
    """The peak resident set (VmHWM) of ``pid`` in MiB; 0.0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def rss_mib(pid: int) -> float:
    """The current resident set (VmRSS) of ``pid`` in MiB; 0.0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class JavaServer:
    """One JVM subprocess, its output in ``log``; ready once ``port`` accepts connections."""

    def __init__(self, name: str, cmd: Sequence[str], port: int, log: Path, env: dict[str, str]) -> None:
        self.name = name
        self.port = port
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                list(cmd), stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        try:
            self._wait_for_port()
        except BaseException:  # not ready, or Ctrl-C while it starts: it is in a session of its own
            self.stop()
            raise

    def _wait_for_port(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start-up ({self.proc.returncode}); see {self.log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{self.name} did not open port {self.port} within {START_TIMEOUT_S:g} s"
                    ) from None
                time.sleep(0.1)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_s(self) -> float:
        return process_cpu_s(self.proc.pid)

    def rss_peak_mib(self) -> float:
        return rss_peak_mib(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(30)


def _java_cmd(java: str, heap: Sequence[str], classpath: str, home: Path, main: str, *args: str) -> list[str]:
    return [
        java, *heap, *_OPENS, f"-Duser.home={home}", f"-Drocketmq.home.dir={home}",
        "-cp", classpath, main, *args,
    ]  # fmt: skip


def _env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "ROCKETMQ_HOME": str(home)}


def _write_conf(path: Path, values: dict[str, object]) -> Path:
    lines = [
        f"{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in values.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def start_rocketmq(java: str, classpath: str, workdir: Path, flush: str) -> tuple[JavaServer, JavaServer]:
    """Apache's NameServer and one Broker (``flush``: ``ASYNC_FLUSH`` or ``SYNC_FLUSH``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    home = workdir / "home"
    namesrv_port = free_port()
    conf = _write_conf(workdir / "namesrv.properties", {"listenPort": namesrv_port})
    namesrv = JavaServer(
        "Apache RocketMQ NameServer",
        _java_cmd(
            java, NAMESRV_HEAP, classpath, home, "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(conf)
        ),
        namesrv_port,
        workdir / "namesrv.log",
        _env(home),
    )
    try:
        # The broker also listens on listenPort - 2 (VIP channel) and listenPort + 1 (HA).
        broker_port = _free_block(4) + 2
        store = workdir / "store"
        broker_conf = _write_conf(
            workdir / "broker.conf",
            {
                "brokerClusterName": "DefaultCluster",
                "brokerName": "broker-a",
                "brokerId": 0,
                "listenPort": broker_port,
                "brokerIP1": "127.0.0.1",
                "namesrvAddr": f"127.0.0.1:{namesrv_port}",
                "storePathRootDir": store,
                "storePathCommitLog": store / "commitlog",
                "mappedFileSizeCommitLog": 256 * 1024 * 1024,
                "flushDiskType": flush,
                "brokerRole": "ASYNC_MASTER",
                "autoCreateTopicEnable": True,
                "autoCreateSubscriptionGroup": True,
            },
        )
        broker = JavaServer(
            "Apache RocketMQ Broker",
            _java_cmd(
                java,
                BROKER_HEAP,
                classpath,
                home,
                "org.apache.rocketmq.broker.BrokerStartup",
                "-c",
                str(broker_conf),
            ),
            broker_port,
            workdir / "broker.log",
            _env(home),
        )
    except BaseException:
        namesrv.stop()
        raise
    return namesrv, broker


def start_kafka(java: str, classpath: str, workdir: Path, partitions: int) -> JavaServer:
    """One Kafka node in KRaft mode (broker and controller), topics auto-created with ``partitions``."""
    workdir.mkdir(parents=True, exist_ok=True)
    port, controller_port = free_port(), free_port()
    conf = _write_conf(
        workdir / "server.properties",
        {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": workdir / "data",
            "num.partitions": partitions,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
        },
    )
    env = {**os.environ, "LOG_DIR": str(workdir / "logs")}
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    log4j = [f"-Dkafka.logs.dir={workdir / 'logs'}"]
    fmt = subprocess.run(
        [java, *NAMESRV_HEAP, *log4j, "-cp", classpath, "kafka.tools.StorageTool",
         "format", "-t", cluster_id, "-c", str(conf)],
        capture_output=True, env=env, timeout=120,
    )  # fmt: skip
    if fmt.returncode != 0:
        raise RuntimeError(
            f"Kafka's storage format failed: {fmt.stdout.decode()[-500:]}{fmt.stderr.decode()[-500:]}"
        )
    return JavaServer(
        "Apache Kafka (KRaft)",
        [java, *BROKER_HEAP, *log4j, "-cp", classpath, "kafka.Kafka", str(conf)],
        port,
        workdir / "kafka.log",
        env,
    )
