"""Broker statistics windows and runtime rates, with time passed in.

Method: scripted puts and gets at known times; the minute, hour and day windows and the
10/60/600-second rates must hold the sums and per-second figures of what happened in them.
"""

from __future__ import annotations

import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.live_config import LIVE_KEYS, apply_live_updates, parse_properties_text, render_configs
from orbitmq.broker.stats import BrokerStats
from orbitmq.errors import ConfigError
from tests.support.calls import python_calls


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


def test_stats_sample_costs_the_same_whatever_the_number_of_items() -> None:
    # Sampling runs on the broker's event loop once a second: with 50,000 topics, a pass over
    # every item held the loop for most of a second. Ticks must cost the same for 10 or 5,000.
    work = []
    for topics in (10, 5_000):
        stats = BrokerStats("C", 0)
        for index in range(topics):
            stats.on_put(f"T{index}", 1, 10)
            stats.on_get("G", f"T{index}", 1, 10)
        # One call per second, past minute, 10-minute and hour ticks.
        work.append(
            python_calls(lambda stats=stats: [stats.sample(second * 1_000) for second in range(1, 3_602)])
        )
    assert work[0] == work[1]


class _EagerStats:
    """The reference: every tick appends a snapshot to every item's rings at once."""

    steps = ((10_000, 7), (600_000, 7), (3_600_000, 25))

    def __init__(self) -> None:
        self.items: dict[str, list[int]] = {}
        self.rings: dict[str, list[list[tuple[int, int, int]]]] = {}
        self.last_tick = [0, 0, 0]
        self.last_sample = 0

    def put(self, key: str, count: int) -> None:
        if key not in self.items:
            self.items[key] = [0, 0]
            self.rings[key] = [[(self.last_sample, 0, 0)] for _ in self.steps]
        self.items[key][0] += count
        self.items[key][1] += 1

    def sample(self, now_ms: int) -> None:
        self.last_sample = now_ms
        for ring, (step, length) in enumerate(self.steps):
            if now_ms - self.last_tick[ring] >= step:
                self.last_tick[ring] = now_ms
                for key, (value, times) in self.items.items():
                    snapshots = self.rings[key][ring]
                    snapshots.append((now_ms, value, times))
                    del snapshots[:-length]

    def figures(self, key: str, now_ms: int) -> list[tuple[int, float, float]] | None:
        if key not in self.items:
            return None
        value, times = self.items[key]
        out = []
        for snapshots in self.rings[key]:
            first_ms, first_value, first_times = snapshots[0]
            total = value - first_value
            calls = times - first_times
            out.append((total, total * 1000 / max(now_ms - first_ms, 1000), total / calls if calls else 0.0))
        return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["put", "sample", "read"]), st.integers(0, 900_000), st.sampled_from("abc")
        ),
        max_size=60,
    )
)
def test_stats_windows_match_sampling_every_item_at_every_tick(steps: list[tuple[str, int, str]]) -> None:
    # Items catch up on the ticks they missed when next counted or read: the figures must be
    # those of the eager way, in which every tick walked every item.
    stats, reference = BrokerStats("C", 0), _EagerStats()
    now = 0
    for action, advance_ms, key in steps:
        now += advance_ms
        if action == "put":
            stats.on_put(key, 2, 10)
            reference.put(key, 2)
        elif action == "sample":
            stats.sample(now)
            reference.sample(now)
        else:
            found = stats.figures("TOPIC_PUT_NUMS", key, now)
            expected = reference.figures(key, now)
            assert (found is None) == (expected is None)
            if found is not None and expected is not None:
                assert [(item.sum, item.tps, item.avgpt) for item in found] == expected


def test_stats_items_leave_the_full_collections_nothing_to_walk() -> None:
    # A full collection walks every object the collector tracks, holding the event loop: at
    # 50,000 topics the stats items were 700,000 of them (seven objects per item).
    gc.collect()
    before = len(gc.get_objects())
    stats = BrokerStats("C", 0)
    for index in range(2_000):
        stats.on_put(f"T{index}", 1, 10)
    for second in range(1, 30):
        stats.sample(second * 1_000)
    stats.figures("TOPIC_PUT_NUMS", "T1", 30_000)
    for _ in range(3):  # a collection stops tracking a tuple once what it holds is untracked
        gc.collect()
    assert len(gc.get_objects()) - before < 100
