"""The broker's configuration as GET_BROKER_CONFIG shows it and UPDATE_BROKER_CONFIG changes it.

Pure functions over the frozen config dataclasses. GET_BROKER_CONFIG answers every key of
``BrokerConfig`` and ``StoreConfig`` under its RocketMQ name as ``key=value`` lines (Java's
``MixAll.properties2String``). UPDATE_BROKER_CONFIG sends the same form; only the keys in
:data:`LIVE_KEYS` can change while the broker runs (a new config object is built and
validated, then swapped in), and an update naming any other key is refused as a whole, naming
the keys that need a restart. Updates live in memory: put them in ``broker.conf`` to keep them
across restarts.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orbitmq.broker.config import BrokerConfig
from orbitmq.conf import coerce_value, config_keys
from orbitmq.errors import ConfigError
from orbitmq.store.config import StoreConfig

__all__ = ["LIVE_KEYS", "apply_live_updates", "parse_properties_text", "render_configs"]

LIVE_KEYS = frozenset(
    {
        "brokerPermission",
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "defaultTopicQueueNums",
        "longPollingEnable",
        "shortPollingTimeMills",
        "maxReconsumeTimes",
        "enablePropertyFilter",
        "traceTopicEnable",
        "traceOn",
        "regionId",
        "storeReplyMessageEnable",
    }
)
"""RocketMQ keys whose new value takes effect at once; handlers read the config per request."""


def _render(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.name)
    if isinstance(value, tuple):
        return ";".join(str(item) for item in value)
    if isinstance(value, Path):
        return str(value)
    return str(value)


def render_configs(*configs: object) -> dict[str, str]:
    """Every key of the given config dataclasses (primary RocketMQ names) with its value as text.

    Unset optional values (``brokerIP1`` without a value) are left out.
    """
    rendered: dict[str, str] = {}
    for config in configs:
        for item in dataclasses.fields(config):  # type: ignore[arg-type]
            key = item.metadata.get("key")
            if key is None:
                continue
            text = _render(getattr(config, item.name))
            if text is not None:
                rendered[str(key)] = text
    return dict(sorted(rendered.items()))


def parse_properties_text(text: str) -> dict[str, str]:
    """``key=value`` lines (``#`` comments and blank lines skipped) as a dict.

    Raises:
        ConfigError: a line that is not ``key=value``.
    """
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, separator, value = line.partition("=")
        if not separator or not key.strip():
            raise ConfigError(f"line {number}: expected 'key=value', got {raw.strip()!r}")
        values[key.strip()] = value.strip()
    return values


def apply_live_updates(config: BrokerConfig, updates: Mapping[str, str]) -> BrokerConfig:
    """A new BrokerConfig with ``updates`` (RocketMQ keys) applied, validated.

    Raises:
        ConfigError: a key that cannot change live (a store key, or a broker key outside
            :data:`LIVE_KEYS`), an unknown key, or a value its field refuses; names the key.
    """
    broker_keys = config_keys(BrokerConfig)
    store_keys = config_keys(StoreConfig)
    unknown = sorted(key for key in updates if key not in broker_keys and key not in store_keys)
    if unknown:
        raise ConfigError(f"unknown config keys: {', '.join(unknown)}")
    needs_restart = sorted(key for key in updates if key not in LIVE_KEYS)
    if needs_restart:
        raise ConfigError(
            f"config keys {', '.join(needs_restart)} cannot change while the broker runs; set them in "
            f"broker.conf and restart (live keys: {', '.join(sorted(LIVE_KEYS))})"
        )
    hints = typing.get_type_hints(BrokerConfig)
    changes = {
        broker_keys[key]: coerce_value(key, value, hints[broker_keys[key]]) for key, value in updates.items()
    }
    return dataclasses.replace(config, **changes)  # type: ignore[arg-type]
