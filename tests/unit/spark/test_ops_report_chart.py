"""The operations report's chart, drawn from hand-made rows: one lag line per group, legends
beside the panels, and time labels that never repeat, however short the sampled span."""

from __future__ import annotations

from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from orbitmq.spark.pipelines.ops_report import GROUP_COLORS, draw_chart

T0 = datetime(2026, 1, 1, 12, 0, 0)


def _rows(span_s: float, samples: int, topics: int, groups: dict[str, list[int]]) -> list[Any]:
    times = [T0 + timedelta(seconds=span_s * i / (samples - 1)) for i in range(samples)]
    rows = []
    for index, ts in enumerate(times):
        for topic in range(topics):
            rate = None if index == 0 else 100.0 + topic
            rows.append(
                SimpleNamespace(
                    sample_ts=ts, topic=f"Topic{topic:02d}", consumer_group="", lag_total=0, msgs_per_s=rate
                )
            )
        for group, lags in groups.items():
            # Two topics per group: the chart sums them into one line.
            for topic in ("Topic00", "Topic01"):
                rows.append(
                    SimpleNamespace(
                        sample_ts=ts,
                        topic=topic,
                        consumer_group=group,
                        lag_total=lags[index],
                        msgs_per_s=None,
                    )
                )
    return rows


@pytest.mark.parametrize("span_s", [0.6, 2.0, 11.0, 55.0, 7200.0])
def test_ops_report_chart_time_labels_never_repeat(span_s: float) -> None:
    fig = draw_chart(_rows(span_s, 12, 2, {"g": [1] * 12}))
    fig.canvas.draw()
    labels = [tick.get_text() for tick in fig.axes[1].get_xticklabels() if tick.get_visible()]
    assert len(labels) >= 2 and len(set(labels)) == len(labels), labels


def test_ops_report_chart_draws_one_lag_line_per_group_beside_a_long_legend() -> None:
    groups = {"billing": [110] * 6, "audit": [5, 4, 3, 2, 1, 0], "search": [0] * 6}
    fig = draw_chart(_rows(10.0, 6, 15, groups))
    top, bottom = fig.axes[:2]
    lines = bottom.get_lines()
    assert [line.get_label() for line in lines] == sorted(groups)
    assert [list(line.get_ydata()) for line in lines] == [[10, 8, 6, 4, 2, 0], [220] * 6, [0] * 6]
    assert [line.get_color() for line in lines] == list(GROUP_COLORS[:3])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    lag_panel = bottom.get_window_extent(renderer)
    for axis in (top, bottom):
        legend = axis.get_legend().get_window_extent(renderer)
        assert not legend.overlaps(lag_panel) and not legend.overlaps(top.get_window_extent(renderer))
    assert len(top.get_legend().get_texts()) == 15
