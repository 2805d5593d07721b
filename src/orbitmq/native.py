"""OrbitMQ's optional C helpers: whether they are in use.

Four hot loops have a compiled twin, built by ``pip install`` when a C compiler and the Python
headers are there (``setup.py``; the build is optional):

- ``orbitmq.protocol._batch_scan``: a batch body split into columns (``protocol/batch.py``);
- ``orbitmq.store._record_pack``: a batch's records written into the commit log
  (``store/batch_put.py``);
- ``orbitmq.filter._property_scan``: the properties a SQL92 filter names, read from the stored
  records of a filtered pull (``filter/records.py``);
- ``orbitmq.spark._record_columns``: a pull body's records as the Spark source's Arrow column
  buffers (``spark/_arrow_records.py``).

Each module that uses one keeps a pure-Python version giving the same answers, used when the
helper is missing or when the environment sets ``ORBITMQ_PURE_PYTHON=1`` (read once, at
import). The tests run both.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE_PYTHON_ENV = "ORBITMQ_PURE_PYTHON"
HELPERS = (
    "orbitmq.protocol._batch_scan",
    "orbitmq.store._record_pack",
    "orbitmq.filter._property_scan",
    "orbitmq.spark._record_columns",
)


def pure_python_forced() -> bool:
    """True when ``ORBITMQ_PURE_PYTHON`` asks for the pure-Python versions."""
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def load(name: str) -> ModuleType | None:
    """The compiled helper ``name``, or None when it did not build or is turned off."""
    if pure_python_forced():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def status() -> dict[str, bool]:
    """Each helper's name and whether it is in use (for start-up lines and ``--version``)."""
    return {name.rsplit(".", 1)[1].lstrip("_"): load(name) is not None for name in HELPERS}
