"""The source's Python workers run the driver's interpreter when nothing names one.

Goal: the README's Spark snippet works from a virtual environment that is not activated.
PySpark runs its Python workers with ``python3`` from PATH unless PYSPARK_PYTHON names an
interpreter; from a venv that is not activated that ``python3`` cannot import orbitmq (nor,
usually, pyspark). Method: the tier's session, with its interpreter set back to PySpark's
default (``python3``, as with PYSPARK_PYTHON unset) while the source registers; the ``python3``
on the JVM's PATH (this process's PATH when the session started) must not import orbitmq, or
the test cannot tell anything and is skipped. A batch read and a streaming query must then
count every message. The README test runs the snippet itself, from a fresh clone.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from orbitmq.model.message import Message
from orbitmq.spark import register
from tests.spark.conftest import Broker

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_source_workers_run_the_driver_interpreter_when_pyspark_python_is_unset(
    spark: Any, orbit: Broker, tmp_path: Path
) -> None:
    python3 = shutil.which("python3")
    if python3 is not None:
        probe = subprocess.run([python3, "-c", "import orbitmq"], capture_output=True, cwd=tmp_path)
        if probe.returncode == 0:
            pytest.skip(f"{python3} (first python3 on PATH) imports orbitmq: a venv is activated")
    topic = orbit.new_topic("SparkPath", queues=2)
    orbit.produce([Message(topic, b"p%d" % i) for i in range(200)])
    context = spark.sparkContext
    default = context.pythonExec
    context.pythonExec = "python3"  # what PySpark runs with PYSPARK_PYTHON unset
    try:
        register(spark)
    finally:
        context.pythonExec = default
    try:
        options = {"namesrvAddr": orbit.namesrv_addr, "topic": topic}
        batch_rows = spark.read.format("orbitmq").options(**options).load().count()
        query = (
            spark.readStream.format("orbitmq")
            .options(**options, startingOffsets="earliest")
            .load()
            .select("queue_id", "queue_offset")
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        stream_rows = spark.read.parquet(str(tmp_path / "out")).count()
    finally:
        register(spark)  # the tier's own registration, for the tests after this one
    assert batch_rows == stream_rows == 200
