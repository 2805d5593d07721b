"""Static registration of the ``orbitmq`` Spark data source.

PySpark 4 looks for top-level modules named ``pyspark_*`` on the Python path of its worker
interpreter and registers the ``DefaultSource`` each one exports, under
``DefaultSource.name()``. Installing OrbitMQ installs this module, so every new session
resolves ``spark.read.format("orbitmq")`` without calling :func:`orbitmq.spark.register`.
"""

from orbitmq.spark.source import OrbitDataSource as DefaultSource

__all__ = ["DefaultSource"]
