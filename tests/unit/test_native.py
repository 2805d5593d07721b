"""The optional C helpers: built by the set-up, in use, and turned off by ORBITMQ_PURE_PYTHON."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orbitmq import native

_PROBE = (
    "import orbitmq.protocol.batch as b, orbitmq.store.batch_put as p, orbitmq.filter.records as r;"
    "import orbitmq.spark._arrow_records as s;"
    "print(b._native_scan is not None, p.pack_records is not p.pack_records_py,"
    " r.record_values is not r.record_values_py, s._native is not None)"
)


def test_the_set_up_builds_every_helper_and_they_are_in_use() -> None:
    if native.pure_python_forced():
        pytest.skip("ORBITMQ_PURE_PYTHON is set: this run tests the pure-Python versions")
    assert native.status() == {
        "batch_scan": True,
        "record_pack": True,
        "property_scan": True,
        "record_columns": True,
    }
    probe = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
    assert probe.stdout.split() == ["True", "True", "True", "True"]


def test_orbitmq_pure_python_turns_every_helper_off() -> None:
    environment = {**os.environ, native.PURE_PYTHON_ENV: "1"}
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, env=environment
    )
    assert probe.stdout.split() == ["False", "False", "False", "False"]
