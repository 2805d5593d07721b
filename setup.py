"""Build hook for OrbitMQ's two optional C helpers (everything else is in pyproject.toml).

``orbitmq.protocol._batch_scan`` splits a batch send body into columns and
``orbitmq.store._record_pack`` writes a batch's records into the commit log; each has a
pure-Python twin in the module that imports it (``batch.py``, ``batch_put.py``), used when the
helper did not build (``optional=True``: no compiler, no Python headers) or when
``ORBITMQ_PURE_PYTHON=1`` is set.
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
    ]
)
