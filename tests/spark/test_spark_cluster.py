"""The connector on a multi-JVM master, shipped as a zip to an interpreter that lacks it.

Method: build orbitmq.zip from src/orbitmq; make a bare virtualenv whose site-packages points
at this venv's packages (pyspark, pyarrow, orjson...) but not at the editable orbitmq install;
run tests/spark/cluster_child.py with that interpreter on ``local-cluster[2,1,1024]`` (two
executor JVMs), with the zip on PYTHONPATH (driver and driver-side helpers),
spark.executorEnv.PYTHONPATH and addPyFile (executors). Batch and streaming reads must count
every message, and the connector must have been imported from the zip.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from orbitmq.model.message import Message
from tests.spark.conftest import Broker

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]


def _zip_package(target: Path) -> Path:
    source = REPO_ROOT / "src"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted((source / "orbitmq").rglob("*.py")):
            archive.write(path, path.relative_to(source).as_posix())
    return target


def _bare_python(target: Path) -> Path:
    """A venv that sees this venv's third-party packages but not the orbitmq install."""
    venv.EnvBuilder(with_pip=False).create(target)
    packages = Path(site.getsitepackages()[0])
    bare_site = next((target / "lib").glob("python3*/site-packages"))
    (bare_site / "third_party.pth").write_text(f"{packages}\n")
    return target / "bin" / "python"


def test_cluster_reads_with_the_connector_shipped_as_a_zip(orbit: Broker, tmp_path: Path) -> None:
    topic = orbit.new_topic("SparkCluster", queues=4)
    orbit.produce([Message(topic, f"c{i}".encode()) for i in range(1000)])
    archive = _zip_package(tmp_path / "orbitmq.zip")
    python = _bare_python(tmp_path / "bare")
    probe = subprocess.run([python, "-c", "import orbitmq"], capture_output=True, cwd=tmp_path)
    assert probe.returncode != 0, "the bare interpreter must not see orbitmq by itself"

    env = dict(os.environ, PYSPARK_PYTHON=str(python), PYTHONPATH=f"{archive}{os.pathsep}{REPO_ROOT}")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [str(python), "-m", "tests.spark.cluster_child", "local-cluster[2,1,1024]", orbit.namesrv_addr, topic,
           str(tmp_path / "work"), str(archive)]  # fmt: skip
    done = subprocess.run(
        cmd, env=env, cwd=tmp_path, capture_output=True, timeout=280, start_new_session=True
    )
    lines = [line for line in done.stdout.decode().splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, done.stderr.decode()[-4000:]
    result = json.loads(lines[-1])
    assert result["batch_rows"] == result["stream_rows"] == 1000
    assert result["block_managers"] == 3
    assert result["orbitmq_file"].endswith("orbitmq.zip/orbitmq/spark/__init__.py")
