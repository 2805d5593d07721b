"""Broker statistics windows and runtime rates, with time passed in.

Method: scripted puts and gets at known times; the minute, hour and day windows and the
10/60/600-second rates must hold the sums and per-second figures of what happened in them.
"""

from __future__ import annotations

import pytest

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.live_config import LIVE_KEYS, apply_live_updates, parse_properties_text, render_configs
from orbitmq.broker.stats import BrokerStats
from orbitmq.errors import ConfigError


def test_stats_windows_count_what_happened_in_them() -> None:
    stats = BrokerStats("C", 0)
    stats.on_put("T", 3, 300)
    stats.sample(1_000)
    stats.on_put("T", 2, 200)
    for second in range(2, 80):
        stats.sample(second * 1_000)
    minute, hour, day = stats.figures("TOPIC_PUT_NUMS", "T", 80_000) or ()
    # The minute window has moved past both puts; hour and day still hold them.
    assert minute.sum == 0 and hour.sum == 5 and day.sum == 5
    assert hour.avgpt == 2.5  # two calls
    size = stats.figures("TOPIC_PUT_SIZE", "T", 80_000)
    assert size is not None and size[2].sum == 500
    assert stats.figures("TOPIC_PUT_NUMS", "Other", 80_000) is None


def test_runtime_rates_cover_their_window() -> None:
    stats = BrokerStats("C", 0)
    for second in range(0, 21):
        stats.sample(second * 1_000)
        stats.on_put("T", 10, 10)
        stats.on_get("G", "T", 5, 5)
        stats.on_get("G", "T", 0, 0)
    put, found, miss, transferred = stats.rates(21_000, 10)
    assert round(put) == 10 and round(found) == 1 and round(miss) == 1 and round(transferred) == 5


def test_live_config_changes_only_live_keys() -> None:
    config = BrokerConfig()
    updated = apply_live_updates(
        config, parse_properties_text("# c\nenablePropertyFilter=true\nbrokerPermission=4\n")
    )
    assert updated.enable_property_filter and updated.broker_permission == 4
    with pytest.raises(ConfigError, match="listenPort"):
        apply_live_updates(config, {"listenPort": "1"})
    with pytest.raises(ConfigError, match="unknown config keys: nope"):
        apply_live_updates(config, {"nope": "1"})
    with pytest.raises(ConfigError, match="brokerPermission"):
        apply_live_updates(config, {"brokerPermission": "9"})
    rendered = render_configs(config)
    assert rendered["enablePropertyFilter"] == "false" and "brokerIP1" not in rendered
    assert set(rendered) >= LIVE_KEYS
