"""Tests that run once with an optional C helper and once with its pure-Python twin.

A test module makes a module-scoped fixture with ``params=MODES`` that yields from
:func:`use_mode`; every test of the module then runs in both modes (see ``orbitmq/native.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

MODES = ("compiled", "pure-python")


def use_mode(
    request: pytest.FixtureRequest,
    module: ModuleType,
    attribute: str,
    compiled: object,
    pure: object,
    name: str,
) -> Iterator[str]:
    """Set ``module.attribute`` to ``compiled`` or ``pure`` for the mode, and back afterwards.

    The compiled mode is skipped, naming ``name``, when the helper did not build (``compiled`` None).
    """
    saved = getattr(module, attribute)
    if request.param == "compiled":
        if compiled is None:
            pytest.skip(f"the compiled {name} is not built (see orbitmq/native.py)")
        setattr(module, attribute, compiled)
    else:
        setattr(module, attribute, pure)
    yield request.param
    setattr(module, attribute, saved)
