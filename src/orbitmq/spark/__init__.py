"""PySpark data source ``orbitmq``: read topics as rows, write rows as messages.

Public API: :class:`OrbitDataSource` (format name ``orbitmq``) and :func:`register`.
This package talks to OrbitMQ only through ``orbitmq.client``.
"""

from __future__ import annotations

import sys
from typing import Any

from orbitmq.spark.source import FORMAT_NAME, OrbitDataSource

__all__ = ["FORMAT_NAME", "OrbitDataSource", "register"]

_PYSPARK_DEFAULT_PYTHON = "python3"
"""What PySpark runs its Python workers with when PYSPARK_PYTHON is unset: ``python3`` from PATH."""
_SAME_HOST_MASTERS = ("local", "local-cluster")


def register(spark: Any) -> None:
    """Register the ``orbitmq`` format with a SparkSession (once per session is enough).

    The class is pickled by reference: every Python worker of the session (driver-side helpers
    included) must be able to ``import orbitmq``. When nothing names the workers' interpreter
    (``PYSPARK_PYTHON`` unset, so PySpark would run ``python3`` from PATH, which in a virtual
    environment that is not activated cannot import ``orbitmq``) and the workers run on this
    host (``local[...]``, ``local-cluster[...]`` masters), this source's workers run the
    driver's own interpreter. ``spark.pyspark.python`` in the session's configuration names
    another one; other masters keep PySpark's choice (see docs/spark.md, "Running on a
    cluster"). Only this data source is affected: the session's own Python UDFs are not.
    """
    try:
        context: Any = spark.sparkContext
    except Exception:  # a Spark Connect session has no SparkContext (and workers elsewhere)
        context = None
    interpreter = _worker_interpreter(context) if context is not None else None
    if interpreter is None:
        spark.dataSource.register(OrbitDataSource)
        return
    # The registration captures the context's interpreter into the source's Python function.
    default, context.pythonExec = context.pythonExec, interpreter
    try:
        spark.dataSource.register(OrbitDataSource)
    finally:
        context.pythonExec = default


def _worker_interpreter(context: Any) -> str | None:
    """The interpreter this source's workers should run, or None to leave PySpark's choice."""
    if context.pythonExec != _PYSPARK_DEFAULT_PYTHON:
        return None  # PYSPARK_PYTHON names one
    configured = context.getConf().get("spark.pyspark.python")
    if configured:
        return str(configured)
    if str(context.master).split("[", 1)[0] not in _SAME_HOST_MASTERS:
        return None
    return sys.executable
