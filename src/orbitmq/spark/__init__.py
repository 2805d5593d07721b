"""PySpark data source ``orbitmq``: read topics as rows, write rows as messages.

Public API: :class:`OrbitDataSource` (format name ``orbitmq``) and :func:`register`.
This package talks to OrbitMQ only through ``orbitmq.client``.
"""

from __future__ import annotations

from typing import Any

from orbitmq.spark.source import FORMAT_NAME, OrbitDataSource

__all__ = ["FORMAT_NAME", "OrbitDataSource", "register"]


def register(spark: Any) -> None:
    """Register the ``orbitmq`` format with a SparkSession (once per session is enough).

    The class is pickled by reference: every Python worker of the session (driver-side helpers
    included) must be able to ``import orbitmq`` — see docs/spark.md, "Running on a cluster".
    """
    spark.dataSource.register(OrbitDataSource)
