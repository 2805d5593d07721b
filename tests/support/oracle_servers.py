"""Apache RocketMQ's own Java NameServer and Broker, resolved from Maven Central, for tests/oracle.

``tests/oracle/java/pom.xml`` pins ``rocketmq-namesrv`` and ``rocketmq-broker``.
:func:`apache_classpath` resolves them into the git-ignored ``.cache/m2``
(``dependency:build-classpath``, offline first, under a file lock so that parallel test
workers wait for one resolution) and :func:`start_apache_pair` starts ``NamesrvStartup`` and
``BrokerStartup`` from that classpath on free ports with small heaps, each with its own
``ROCKETMQ_HOME``, ``user.home`` (the servers log under it) and store under a temp dir.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path

from tests.support.processes import ServerProcess, free_port, free_port_block, start_on_free_ports, write_conf

REPO_ROOT = Path(__file__).resolve().parents[2]
POM = REPO_ROOT / "tests" / "oracle" / "java" / "pom.xml"
CACHE = REPO_ROOT / ".cache"
MAVEN_REPO = CACHE / "m2"
BUILDS = CACHE / "oracle"
RESOLVE_TIMEOUT_S = 360
START_TIMEOUT_S = 90.0

JVM_OPTIONS = [
    "-Xms256m",
    "-Xmx512m",
    "-XX:MaxDirectMemorySize=512m",
    "-XX:+UseSerialGC",
    # Start-up on two shared cores: the C1 compiler alone is plenty for a test's traffic.
    "-XX:TieredStopAtLevel=1",
    "-Djava.net.preferIPv4Stack=true",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
]


def tools_available() -> str | None:
    """None when java and mvn are on PATH, else what is missing."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    return ", ".join(missing) or None


def _resolve(pom: Path, classpath_file: Path) -> None:
    base = [
        "mvn",
        "-B",
        "-q",
        "-f",
        str(pom),
        f"-Dmaven.repo.local={MAVEN_REPO}",
        "dependency:build-classpath",
        f"-Dmdep.outputFile={classpath_file}",
        "-Dmaven.artifact.threads=8",
        "-Dmaven.wagon.http.retryHandler.count=3",
    ]
    done = subprocess.run([*base, "-o"], capture_output=True, timeout=120)
    if done.returncode == 0:
        return
    # Maven retries each download itself (retryHandler.count); the whole fetch is bounded so
    # that the first test on a fresh machine stays within its timeout.
    try:
        done = subprocess.run(base, capture_output=True, timeout=RESOLVE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"resolving {pom} took more than {RESOLVE_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        output = done.stdout.decode(errors="replace")[-3000:] + done.stderr.decode(errors="replace")[-3000:]
        raise RuntimeError(f"resolving {pom} failed ({done.returncode}):\n{output}")


def apache_classpath() -> str:
    """The classpath of the pinned Apache servers, resolved once per content of the pom."""
    return resolved_classpath(POM, "servers")


def resolved_classpath(pom: Path, name: str) -> str:
    """The classpath of ``pom``'s dependencies, resolved into ``.cache/m2`` once per its content."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    classpath_file = BUILDS / f"{name}-{digest}.classpath"
    if not classpath_file.exists():
        BUILDS.mkdir(parents=True, exist_ok=True)
        # Maven's local repository is not safe for concurrent writers.
        with open(BUILDS / "resolve.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not classpath_file.exists():
                partial = classpath_file.with_suffix(".partial")
                _resolve(pom, partial)
                partial.rename(classpath_file)
    return classpath_file.read_text().strip()


class JavaServer(ServerProcess):
    """A JVM server: it gets longer than a Python server to open its ports on busy cores."""

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ServerProcess:
        return super().start(timeout_s)


def _java(classpath: str, workdir: Path, main: str, *args: str) -> list[str]:
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    # env execs java in place, so the process started is the JVM itself (its pid owns the ports).
    return [
        "env",
        f"ROCKETMQ_HOME={home}",
        "java",
        *JVM_OPTIONS,
        f"-Duser.home={home}",
        f"-Drocketmq.home.dir={home}",
        "-cp",
        classpath,
        main,
        *args,
    ]


def start_apache_namesrv(tmp_path: Path, name: str = "apache-namesrv") -> ServerProcess:
    classpath = apache_classpath()
    workdir = tmp_path / name

    def build() -> ServerProcess:
        port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        conf = write_conf(workdir / "namesrv.properties", {"listenPort": port})
        args = _java(classpath, workdir, "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(conf))
        return JavaServer(name, args, port, workdir, tmp_path / f"{name}.log")

    return start_on_free_ports(build)


def start_apache_broker(
    tmp_path: Path, namesrv_addr: str, name: str = "broker-a", **conf: object
) -> ServerProcess:
    """An Apache broker; it listens on listenPort and also on listenPort - 2 (VIP) and + 1 (HA)."""
    classpath = apache_classpath()
    workdir = tmp_path / f"apache-{name}"

    def build() -> ServerProcess:
        base = free_port_block(4)
        port = base + 2
        workdir.mkdir(parents=True, exist_ok=True)
        store = workdir / "store"
        values: dict[str, object] = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": name,
            "brokerId": 0,
            "listenPort": port,
            "brokerIP1": "127.0.0.1",
            "namesrvAddr": namesrv_addr,
            "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"),
            "mappedFileSizeCommitLog": 16 * 1024 * 1024,
            "flushDiskType": "ASYNC_FLUSH",
            "brokerRole": "ASYNC_MASTER",
            "autoCreateTopicEnable": True,
            "autoCreateSubscriptionGroup": True,
        }
        values.update(conf)
        conf_path = write_conf(workdir / "broker.conf", values)
        args = _java(classpath, workdir, "org.apache.rocketmq.broker.BrokerStartup", "-c", str(conf_path))
        return JavaServer(
            f"apache-{name}",
            args,
            port,
            workdir,
            tmp_path / f"apache-{name}.log",
            extra_ports=[base, port + 1],
        )

    return start_on_free_ports(build)
