"""The source's Python workers run the driver's interpreter when nothing names one.

Goal: the README's Spark snippet works from a virtual environment that is not activated.
PySpark runs its Python workers with ``python3`` from PATH unless PYSPARK_PYTHON names an
interpreter; from a venv that is not activated that ``python3`` cannot import orbitmq.
Method: a child driver process (this venv's interpreter) with PYSPARK_PYTHON unset, this
venv's ``bin`` taken off PATH and, first on PATH, the ``python3`` of a bare venv that has
pyspark and pyarrow but not orbitmq; a ``local[1]`` session reads a topic in batch and with a
streaming query (tests/spark/cluster_child.py), and must count every message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orbitmq.model.message import Message
from tests.spark.conftest import Broker
from tests.spark.test_spark_cluster import REPO_ROOT, _bare_python

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_source_workers_run_the_driver_interpreter_when_pyspark_python_is_unset(
    orbit: Broker, tmp_path: Path
) -> None:
    topic = orbit.new_topic("SparkPath", queues=2)
    orbit.produce([Message(topic, b"p%d" % i) for i in range(200)])
    bare_bin = _bare_python(tmp_path / "bare").parent
    probe = subprocess.run([bare_bin / "python3", "-c", "import orbitmq"], capture_output=True, cwd=tmp_path)
    assert probe.returncode != 0, "the python3 on PATH must not see orbitmq by itself"

    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")
    }
    venv_bin = str(Path(sys.executable).parent)
    path = [entry for entry in env.get("PATH", "").split(os.pathsep) if entry and entry != venv_bin]
    env["PATH"] = os.pathsep.join([str(bare_bin), *path])
    env["PYTHONPATH"] = str(REPO_ROOT)  # for tests.spark.cluster_child; src/orbitmq is not on it
    cmd = [sys.executable, "-m", "tests.spark.cluster_child", orbit.namesrv_addr, topic,
           str(tmp_path / "work"), "local[1]", "register"]  # fmt: skip
    done = subprocess.run(
        cmd, env=env, cwd=tmp_path, capture_output=True, timeout=280, start_new_session=True
    )
    lines = [line for line in done.stdout.decode().splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, done.stderr.decode()[-4000:]
    result = json.loads(lines[-1])
    assert result["batch_rows"] == result["stream_rows"] == 200
