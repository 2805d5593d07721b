"""Build hook for OrbitMQ's optional C helpers (everything else is in pyproject.toml).

``orbitmq.protocol._batch_scan`` splits a batch send body into columns,
``orbitmq.store._record_pack`` writes a batch's records into the commit log and
``orbitmq.filter._property_scan`` reads the properties a filter names from stored records and
``orbitmq.spark._record_columns`` turns a pull body into the Spark source's Arrow columns; each
has a pure-Python twin in the module that imports it (``batch.py``, ``batch_put.py``,
``filter/records.py``, ``spark/_arrow_records.py``), used when the helper did not build (``optional=True``: no compiler, no
Python headers) or when ``ORBITMQ_PURE_PYTHON=1`` is set.
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"]

setup(
    ext_modules=[
        Extension(
            "orbitmq.protocol._batch_scan",
            ["src/orbitmq/protocol/_batch_scan.c"],
            extra_compile_args=_FLAGS,
            optional=True,
        ),
        Extension(
            "orbitmq.store._record_pack",
            ["src/orbitmq/store/_record_pack.c"],
            extra_compile_args=_FLAGS,
            optional=True,
        ),
        Extension(
            "orbitmq.filter._property_scan",
            ["src/orbitmq/filter/_property_scan.c"],
            extra_compile_args=_FLAGS,
            optional=True,
        ),
        Extension(
            "orbitmq.spark._record_columns",
            ["src/orbitmq/spark/_record_columns.c"],
            extra_compile_args=_FLAGS,
            optional=True,
        ),
    ]
)
