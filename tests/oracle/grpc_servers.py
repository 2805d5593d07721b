"""Apache RocketMQ's 5.x gRPC proxy for the oracle tier's gRPC corpus, resolved from Maven Central.

``tests/oracle/grpc_java/pom.xml`` pins ``rocketmq-proxy`` (and ``rocketmq-namesrv``) 5.5.0;
:func:`proxy_classpath` resolves them into the git-ignored ``.cache/m2`` as
``tests/support/oracle_servers.py`` does for the remoting tier, and :func:`start_apache_proxy`
starts ``ProxyStartup`` in LOCAL mode: the broker runs inside the proxy's JVM, as OrbitMQ's
broker runs its proxy in its own process. Apache's gRPC port accepts plaintext and TLS alike;
the corpus speaks plaintext.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.oracle_servers import JVM_OPTIONS, JavaServer, resolved_classpath
from tests.support.processes import (
    ServerProcess,
    free_port_block,
    free_ports,
    start_on_free_ports,
    write_conf,
)

POM = Path(__file__).resolve().parent / "grpc_java" / "pom.xml"


def proxy_classpath() -> str:
    """The classpath of the pinned Apache proxy, resolved once per content of the pom."""
    return resolved_classpath(POM, "proxy")


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
        grpc_port, remoting_port = free_ports(2)
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
