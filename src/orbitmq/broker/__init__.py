"""The broker: a thin asyncio shell over the message store, speaking RocketMQ's remoting protocol.

``BrokerApp`` and the config names are loaded on first use, so importing one of the pure table
modules (``orbitmq.broker.offsets``, ``.locks``, ...) does not pull in the store and transport.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orbitmq.broker.app import BrokerApp
    from orbitmq.broker.config import BrokerConfig, BrokerRole, load_broker_config

__all__ = ["BrokerApp", "BrokerConfig", "BrokerRole", "load_broker_config"]

_LAZY = {
    "BrokerApp": "orbitmq.broker.app",
    "BrokerConfig": "orbitmq.broker.config",
    "BrokerRole": "orbitmq.broker.config",
    "load_broker_config": "orbitmq.broker.config",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'orbitmq.broker' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
