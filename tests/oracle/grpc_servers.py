"""Apache RocketMQ's 5.x gRPC proxy for the oracle tier's gRPC corpus, resolved from Maven Central.

``tests/oracle/grpc_java/pom.xml`` pins ``rocketmq-proxy`` (and ``rocketmq-namesrv``) 5.5.0;
:func:`proxy_classpath` resolves them into the git-ignored ``.cache/m2`` as
``tests/support/oracle_servers.py`` does for the remoting tier, and :func:`start_apache_proxy`
starts ``ProxyStartup`` in LOCAL mode: the broker runs inside the proxy's JVM, as OrbitMQ's
broker runs its proxy in its own process. Apache's gRPC port accepts plaintext and TLS alike;
the corpus speaks plaintext.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import subprocess
from pathlib import Path

from tests.support.oracle_servers import BUILDS, JVM_OPTIONS, MAVEN_REPO, RESOLVE_TIMEOUT_S, JavaServer
from tests.support.processes import ServerProcess, free_port, free_port_block, start_on_free_ports, write_conf

POM = Path(__file__).resolve().parent / "grpc_java" / "pom.xml"


def _resolve(classpath_file: Path) -> None:
    base = [
        "mvn",
        "-B",
        "-q",
        "-f",
        str(POM),
        f"-Dmaven.repo.local={MAVEN_REPO}",
        "dependency:build-classpath",
        f"-Dmdep.outputFile={classpath_file}",
        "-Dmaven.artifact.threads=8",
        "-Dmaven.wagon.http.retryHandler.count=3",
    ]
    done = subprocess.run([*base, "-o"], capture_output=True, timeout=120)
    if done.returncode == 0:
        return
    try:
        done = subprocess.run(base, capture_output=True, timeout=RESOLVE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"resolving {POM} took more than {RESOLVE_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        output = done.stdout.decode(errors="replace")[-3000:] + done.stderr.decode(errors="replace")[-3000:]
        raise RuntimeError(f"resolving {POM} failed ({done.returncode}):\n{output}")


def proxy_classpath() -> str:
    """The classpath of the pinned Apache proxy, resolved once per content of the pom."""
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    classpath_file = BUILDS / f"proxy-{digest}.classpath"
    if not classpath_file.exists():
        BUILDS.mkdir(parents=True, exist_ok=True)
        # Maven's local repository is not safe for concurrent writers (shared lock with the
        # remoting tier's resolution).
        with open(BUILDS / "resolve.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not classpath_file.exists():
                partial = classpath_file.with_suffix(".partial")
                _resolve(partial)
                partial.rename(classpath_file)
    return classpath_file.read_text().strip()


def start_apache_proxy(tmp_path: Path, namesrv_addr: str, name: str = "broker-a") -> ServerProcess:
    """ProxyStartup in LOCAL mode with broker ``name``; the server's port is the gRPC port.

    The broker listens on listenPort (and listenPort + 1 for HA), the proxy on its gRPC port and
    on a remoting port of its own.
    """
    classpath = proxy_classpath()
    workdir = tmp_path / f"apache-proxy-{name}"

    def build() -> ServerProcess:
        base = free_port_block(4)
        broker_port = base + 2
        grpc_port, remoting_port = free_port(), free_port()
        home = workdir / "home"
        home.mkdir(parents=True, exist_ok=True)
        store = workdir / "store"
        broker_conf = write_conf(
            workdir / "broker.conf",
            {
                "brokerClusterName": "DefaultCluster",
                "brokerName": name,
                "brokerId": 0,
                "listenPort": broker_port,
                "brokerIP1": "127.0.0.1",
                "namesrvAddr": namesrv_addr,
                "storePathRootDir": str(store),
                "storePathCommitLog": str(store / "commitlog"),
                "mappedFileSizeCommitLog": 16 * 1024 * 1024,
                "flushDiskType": "ASYNC_FLUSH",
                "brokerRole": "ASYNC_MASTER",
                "autoCreateTopicEnable": True,
                "autoCreateSubscriptionGroup": True,
                # RecallMessage: off by default in both brokers, as in RocketMQ.
                "recallMessageEnable": True,
            },
        )
        proxy_conf = workdir / "rmq-proxy.json"
        proxy_conf.write_text(
            json.dumps(
                {
                    "rocketMQClusterName": "DefaultCluster",
                    "grpcServerPort": grpc_port,
                    "remotingListenPort": remoting_port,
                    "namesrvAddr": namesrv_addr,
                    "proxyMode": "LOCAL",
                }
            )
        )
        args = [
            "env",
            f"ROCKETMQ_HOME={home}",
            "java",
            *JVM_OPTIONS,
            f"-Duser.home={home}",
            f"-Drocketmq.home.dir={home}",
            "-cp",
            classpath,
            "org.apache.rocketmq.proxy.ProxyStartup",
            "-pc",
            str(proxy_conf),
            "-pm",
            "local",
            "-bc",
            str(broker_conf),
        ]
        return JavaServer(
            f"apache-proxy-{name}",
            args,
            grpc_port,
            workdir,
            tmp_path / f"apache-proxy-{name}.log",
            extra_ports=[broker_port, remoting_port],
        )

    return start_on_free_ports(build)
