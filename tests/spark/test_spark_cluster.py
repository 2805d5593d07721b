"""The connector on a real Spark standalone cluster (master + worker from the installed PySpark,
on 127.0.0.1) and through a local Spark Connect server.

* ``spark-submit`` runs the streaming ETL pipeline (``pipelines/etl.py``) and a batch +
  availableNow read (``cluster_child.py``) on the cluster, with OrbitMQ shipped as documented
  for nodes that lack it (docs/spark.md, "Running on a cluster"): a zip of the package with
  ``--py-files`` and ``spark.executorEnv.PYTHONPATH`` for executors, on ``PYTHONPATH`` for the
  driver and its helpers, and ``spark.pyspark.python`` naming an interpreter that has pyspark
  and pyarrow but not orbitmq. The read script never registers the format.
* A Connect server (``local[2]``), whose interpreter has OrbitMQ installed, serves a client
  process (``connect_child.py``, no JVM) that reads, writes exactly once, and runs a stream.

The cluster is shared by the module's spark-submit tests and killed at its end; every test
here has the marker ``spark_cluster``. Nothing here uses the tier's local session: results are
read with pyarrow and the OrbitMQ client, so these tests start no JVM in the test process and
run in their own pytest-xdist group (tests/conftest.py), beside the local-session tests.
"""

from __future__ import annotations

import json
import random
import site
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from orbitmq.client.blocking import BlockingAdminClient
from orbitmq.model.message import Message
from tests.spark.conftest import Broker
from tests.spark.test_spark_etl import BASE_MS, WATERMARK_S, WINDOW_S, _events, _expected
from tests.support.spark_cluster import (
    StandaloneCluster,
    spark_env,
    spark_submit,
    start_connect_server,
    start_standalone_cluster,
)

# The first test also starts the cluster; a busy 2-core machine can take minutes for that.
pytestmark = [pytest.mark.spark, pytest.mark.spark_cluster, pytest.mark.slow, pytest.mark.timeout(600)]

REPO_ROOT = Path(__file__).resolve().parents[2]
SUBMIT_TIMEOUT_S = 480  # generous: a busy 2-core machine; ~1 min when quiet


def _zip_package(target: Path) -> Path:
    """The package as docs/spark.md builds it: orbitmq/ and the pyspark_orbitmq module."""
    source = REPO_ROOT / "src"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted([*(source / "orbitmq").rglob("*.py"), source / "pyspark_orbitmq.py"]):
            archive.write(path, path.relative_to(source).as_posix())
    return target


def _bare_python(target: Path) -> Path:
    """A venv that sees this venv's third-party packages but not the orbitmq install."""
    venv.EnvBuilder(with_pip=False).create(target)
    packages = Path(site.getsitepackages()[0])
    bare_site = next((target / "lib").glob("python3*/site-packages"))
    (bare_site / "third_party.pth").write_text(f"{packages}\n")
    return target / "bin" / "python"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    started = start_standalone_cluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield started
    finally:
        started.kill()


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(orbitmq.zip, an interpreter that cannot import orbitmq by itself)."""
    workdir = tmp_path_factory.mktemp("shipped")
    python = _bare_python(workdir / "bare")
    probe = subprocess.run([python, "-c", "import orbitmq"], capture_output=True, cwd=workdir)
    assert probe.returncode != 0, "the bare interpreter must not see orbitmq by itself"
    return _zip_package(workdir / "orbitmq.zip"), python


def _submit(cluster: StandaloneCluster, shipped: tuple[Path, Path], workdir: Path, *args: str) -> str:
    archive, python = shipped
    submit = [
        "--master", cluster.url, "--py-files", str(archive),
        "--conf", f"spark.executorEnv.PYTHONPATH={archive.name}", "--conf", f"spark.pyspark.python={python}",
        "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=512m", *args,
    ]  # fmt: skip
    # The driver, its helpers and PySpark's data source lookup all run the bare interpreter too.
    env = spark_env(PYTHONPATH=str(archive), PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python))
    done = spark_submit(submit, workdir, env, SUBMIT_TIMEOUT_S)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    return done.stdout.decode()


def test_standalone_cluster_runs_the_etl_pipeline_with_spark_submit(
    cluster: StandaloneCluster, shipped: tuple[Path, Path], orbit: Broker, tmp_path: Path
) -> None:
    source, sink = orbit.new_topic("ClusterEtlIn", queues=4), orbit.new_topic("ClusterEtlOut", queues=2)
    events = _events(1500)
    flush = {"event_time_ms": BASE_MS + 600_000, "user": "x", "kind": "flush", "amount": 0.0}
    orbit.produce([Message(source, json.dumps(e).encode()) for e in events])
    orbit.produce([Message(source, json.dumps(flush).encode())])
    output = tmp_path / "out"
    out = _submit(
        cluster, shipped, tmp_path, str(REPO_ROOT / "src/orbitmq/spark/pipelines/etl.py"),
        "--namesrv", orbit.namesrv_addr, "--source-topic", source, "--sink-topic", sink,
        "--output", str(output), "--checkpoint", str(tmp_path / "ckpt"), "--window-s", str(WINDOW_S),
        "--watermark-s", str(WATERMARK_S), "--available-now", "--master", cluster.url, "--shuffle-partitions", "2",
    )  # fmt: skip
    # Read back without a Spark session of our own (this module needs no local JVM).
    table = pq.read_table(output)  # skips _spark_metadata
    starts = table.column("window_start").cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_pylist()
    rows = zip(
        starts, *(table.column(name).to_pylist() for name in ("kind", "events", "amount_total")), strict=True
    )
    got = {(start, kind): (events, amount) for start, kind, events, amount in rows}
    assert got == _expected(events)
    with BlockingAdminClient(orbit.namesrv_addr) as admin:
        assert sum(status.max_offset for status in admin.topic_status(sink).values()) == len(got)
    assert f"wrote {len(got)} windows to Parquet {output} and {len(got)} messages to topic {sink}" in out


def test_standalone_cluster_batch_read_with_spark_submit_needs_no_register(
    cluster: StandaloneCluster, shipped: tuple[Path, Path], orbit: Broker, tmp_path: Path
) -> None:
    topic = orbit.new_topic("SparkCluster", queues=4)
    orbit.produce([Message(topic, f"c{i}".encode()) for i in range(1000)])
    # Two executors of one core each: the reads run in two executor JVMs.
    out = _submit(
        cluster, shipped, tmp_path, "--conf", "spark.executor.cores=1",
        str(REPO_ROOT / "tests/spark/cluster_child.py"), orbit.namesrv_addr, topic, str(tmp_path / "work"),
    )  # fmt: skip
    result = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    assert result["batch_rows"] == result["stream_rows"] == 1000
    assert result["master"] == cluster.url and result["block_managers"] == 3
    assert result["orbitmq_file"].endswith("orbitmq.zip/orbitmq/spark/__init__.py")


def test_spark_connect_client_reads_and_writes_exactly_once(orbit: Broker, tmp_path: Path) -> None:
    source, target = orbit.new_topic("ConnectIn", queues=2), orbit.new_topic("ConnectOut", queues=2)
    bodies = [f"s{i}" for i in range(random.randrange(200, 400))]
    orbit.produce([Message(source, body.encode()) for body in bodies])
    # The server's interpreter has OrbitMQ installed (the production way); nothing is shipped.
    # PYSPARK_PYTHON for the server's data source lookup, spark.pyspark.python for its workers.
    server, port = start_connect_server(
        tmp_path, "local[2]", spark_env(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable),
        "--conf", f"spark.pyspark.python={sys.executable}",
        "--conf", "spark.sql.shuffle.partitions=2",
    )  # fmt: skip
    try:
        cmd = [sys.executable, "-m", "tests.spark.connect_child", f"sc://127.0.0.1:{port}", orbit.namesrv_addr,
               source, target, str(tmp_path / "ckpt")]  # fmt: skip
        done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, timeout=SUBMIT_TIMEOUT_S)
    finally:
        server.kill()
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:] + server.log()
    result = json.loads([line for line in done.stdout.decode().splitlines() if line.startswith("{")][-1])
    assert result["session"].startswith("pyspark.sql.connect") and not result["client_imported_orbitmq"]
    assert result["batch_rows"] == len(bodies) and result["stream_error"] is None
    assert result["bodies"] == sorted([f"w{i}" for i in range(300)] + bodies)
