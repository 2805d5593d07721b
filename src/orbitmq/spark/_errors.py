"""Errors the ``orbitmq`` source raises for users, shown by Spark as one line, not a traceback.

PySpark reports an exception raised in a data source's driver-side helper (option parsing,
planning, the streaming source runner) as ``[ERROR_CLASS] Failed to ...: `` followed by the
Python traceback, so the line that says what is wrong comes last, after 10-50 lines of
frames. For OrbitMQ's own errors (:class:`~orbitmq.errors.OrbitError`: a bad option, data
loss, a broker group that does not answer) the frames say nothing a user can act on, so
:func:`plain_errors` asks PySpark to print only the exception's last line there (the
worker's ``SPARK_HIDE_TRACEBACK``, read when the exception is reported; Spark sets the same
for ``spark.sql.execution.pyspark.udf.hideTraceback.enabled``). The message then reads
``[PYTHON_DATA_SOURCE_ERROR] Failed to ...: orbitmq.errors.ConfigError: option ...``. Any
other exception (a defect) keeps its traceback: the flag is withdrawn again at the start of
the next call, unless the user had set it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from orbitmq.errors import OrbitError

_P = ParamSpec("_P")
_T = TypeVar("_T")

_HIDE_TRACEBACK = "SPARK_HIDE_TRACEBACK"
_set_here = False


def plain_errors(method: Callable[_P, _T]) -> Callable[_P, _T]:
    """Wrap a driver-side data source method: its OrbitError is reported as one line."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        global _set_here
        if _set_here:
            os.environ.pop(_HIDE_TRACEBACK, None)
            _set_here = False
        try:
            return method(*args, **kwargs)
        except OrbitError:
            if _HIDE_TRACEBACK not in os.environ:
                os.environ[_HIDE_TRACEBACK] = "1"
                _set_here = True
            raise

    return wrapper
