"""A real Spark standalone cluster and Spark Connect server from the installed PySpark, on 127.0.0.1.

The pip package has no ``sbin/start-master.sh``, so the master and the worker are started with
``bin/spark-class`` (``org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), the
Connect server with ``bin/spark-submit --class ...SparkConnectServer``, as its
``start-connect-server.sh`` does. Every port comes from a free port; each process runs in its
own session and :meth:`SparkProcess.kill` SIGKILLs its whole group (the scripts exec the JVM,
and the JVM starts Python helpers). Logs go to files, printed when a start times out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import free_port, wait_connectable

START_TIMEOUT_S = 120.0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def spark_env(**extra: str) -> dict[str, str]:
    """The environment Spark's scripts need from a pip install (SPARK_HOME, the venv on PATH)."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    env.update(extra)
    return env


@dataclass
class SparkProcess:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(30)


def _start(name: str, cmd: list[str], workdir: Path, env: dict[str, str]) -> SparkProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    return SparkProcess(name, proc, log_path)


def _wait_log(process: SparkProcess, text: str, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in process.log_path.read_text(errors="replace"):
            return
        if process.proc.poll() is not None:
            raise RuntimeError(f"{process.name} exited {process.proc.returncode}:\n{process.log()}")
        time.sleep(0.2)
    raise RuntimeError(f"{process.name} did not log {text!r} within {timeout_s:g} s:\n{process.log()}")


@dataclass
class StandaloneCluster:
    """One master and one worker; ``url`` is the master URL for ``--master``."""

    master: SparkProcess
    worker: SparkProcess
    url: str

    def kill(self) -> None:
        self.worker.kill()
        self.master.kill()


def start_standalone_cluster(workdir: Path, cores: int = 2, memory: str = "2g") -> StandaloneCluster:
    """Start a master and a worker (``cores`` cores, ``memory`` for executors) and wait until the
    worker has registered."""
    spark_class = str(spark_home() / "bin" / "spark-class")
    env = spark_env(SPARK_DAEMON_MEMORY="512m")
    port = free_port()
    master = _start(
        "spark-master",
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(free_port())],
        workdir, env,
    )  # fmt: skip
    url = f"spark://127.0.0.1:{port}"
    worker = None
    try:
        wait_connectable(port, master.proc, master.log_path, START_TIMEOUT_S)
        worker = _start(
            "spark-worker",
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
             "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
             "--work-dir", str(workdir / "work")],
            workdir, env,
        )  # fmt: skip
        _wait_log(master, "Registering worker")
    except BaseException:
        if worker is not None:
            worker.kill()
        master.kill()
        raise
    return StandaloneCluster(master, worker, url)


def spark_submit(
    args: list[str], workdir: Path, env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess[bytes]:
    """Run ``bin/spark-submit ARGS`` to completion (its process group is killed on timeout)."""
    cmd = [str(spark_home() / "bin" / "spark-submit"), *args]
    proc = subprocess.Popen(
        cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def start_connect_server(
    workdir: Path, master: str, env: dict[str, str], *conf: str
) -> tuple[SparkProcess, int]:
    """A Spark Connect server on ``master``; returns it and its gRPC port once it listens."""
    port = free_port()
    server = _start(
        "spark-connect",
        [str(spark_home() / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--master", master, "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false", *conf],
        workdir, env,
    )  # fmt: skip
    try:
        wait_connectable(port, server.proc, server.log_path, START_TIMEOUT_S)
    except BaseException:
        server.kill()
        raise
    return server, port
