"""A /metrics scrape of a broker with thousands of topics: per-topic work in bounded steps on the loop.

Method: an in-process BrokerApp (``metricsMaxTopicLabels=20``) gets one message on each of
1,000 new topics (created by the sends). Work is counted, not timed: the Python calls the
scrape thread makes while the registry collects (a thread that shares the GIL with the event
loop must not do per-topic work), and the Python and C calls of each step the event loop runs
(``metrics.steps``: a step is what the loop does before it may serve another request).
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from orbitmq.bench._metrics_scale import send_to_topics
from orbitmq.broker import metrics_view
from orbitmq.broker.app import BrokerApp
from orbitmq.broker.handlers import now_ms
from orbitmq.broker.metrics_view import build_view
from orbitmq.metrics import broker_families, request_code_names
from orbitmq.metrics.cardinality import OTHER, cap_labels, most_active_topics
from orbitmq.metrics.steps import run_steps
from tests.support.calls import python_calls
from tests.unit.broker._apps import start_broker_app

if TYPE_CHECKING:
    from orbitmq.metrics.steps import Steps

TOPICS = 1000
CAP = 20
SCRAPE_THREAD_CALLS = 1500
"""Far fewer Python calls than topics: what the scrape thread may do (wait, then hand over families)."""
STEP_CALLS = 3 * 2048
"""Python and C calls in one step: a few per row, ROWS_PER_STEP (256) rows at most."""


PER_TOPIC = (
    "rocketmq_messages_in",
    "rocketmq_throughput_in",
    "rocketmq_message_size",
    "rocketmq_producer_offset",
)


def _samples(families: list[Metric]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The per-topic series and the topic count (the others move between two scrapes)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in families
        for sample in family.samples
        if sample.name.startswith(PER_TOPIC) or sample.name == "rocketmq_topic_number"
    }


def _calls_per_step(make: Callable[[], Steps[list[Metric]]]) -> tuple[list[Metric], list[int]]:
    """Run every step of ``make()`` here, counting the Python and C calls each one makes."""
    calls = 0

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    steps = make()
    per_step: list[int] = []
    sent: object = None
    collecting = gc.isenabled()
    gc.disable()
    try:
        while True:
            before = calls
            sys.setprofile(count)
            try:
                request = steps.send(sent)
            except StopIteration as done:
                sys.setprofile(None)
                per_step.append(calls - before)
                return list(done.value), per_step
            sys.setprofile(None)
            per_step.append(calls - before)
            # A call the steps make off the loop (the store's list of queues) is not a step.
            sent = request.call() if request is not None else None
    finally:
        sys.setprofile(None)
        if collecting:
            gc.enable()


async def _broker(tmp_path: Path) -> BrokerApp:
    app = await start_broker_app(
        tmp_path,
        metricsExporterType="PROM",
        metricsPromExporterPort="0",
        metricsPromExporterHost="127.0.0.1",
        metricsMaxTopicLabels=str(CAP),
        metricsMaxGroupLabels=str(CAP),
    )
    await send_to_topics(app.address, TOPICS, "StepTopic")
    return app


async def test_metrics_scrape_does_no_per_topic_work_on_the_scrape_thread_and_bounded_steps_on_the_loop(
    tmp_path: Path,
) -> None:
    # The scrape thread built every topic's rows while the loop waited for the GIL it held:
    # with 50,000 topics a request waited up to a second behind a scrape.
    app = await _broker(tmp_path)
    try:
        exporter = app._metrics
        assert exporter is not None
        collected: list[Metric] = []

        def collect() -> None:
            collected.extend(exporter.registry.collect())

        scrape_thread_calls = await asyncio.to_thread(python_calls, collect)
        assert scrape_thread_calls < SCRAPE_THREAD_CALLS, scrape_thread_calls
        state = app.state
        families, per_step = _calls_per_step(
            lambda: metrics_view.scrape_steps(state, state.recorder, 0, app.address)  # type: ignore[arg-type]
        )
        # Many steps, none of them walks the topics: the loop serves requests between them.
        assert len(per_step) > TOPICS // 256, len(per_step)
        assert max(per_step) < STEP_CALLS, sorted(per_step)[-5:]
        # In steps or through the registry, the same series and values; the topics are capped.
        assert _samples(families) == _samples(collected)
        topics = {
            sample.labels["topic"]
            for family in families
            for sample in family.samples
            if sample.name == "rocketmq_producer_offset"
        }
        assert "__other__" in topics and len(topics) == CAP + 1
    finally:
        await app.shutdown()


async def test_metrics_scrape_costs_what_it_exports_not_a_pass_over_every_topic(tmp_path: Path) -> None:
    # Every scrape walked every topic a few times (offsets, counters, the choice of the topics
    # that keep their label): at 50,000 topics most of a second of the event loop's time.
    # Now only the first scrape and the queues that moved since the last one are walked.
    app = await _broker(tmp_path)
    try:
        state = app.state

        def scrape_calls() -> int:
            _, per_step = _calls_per_step(
                lambda: metrics_view.scrape_steps(state, state.recorder, 0, app.address)  # type: ignore[arg-type]
            )
            return sum(per_step)

        scrape_calls()
        at_first = scrape_calls()
        await send_to_topics(app.address, 2 * TOPICS, "MoreTopics")
        moved = scrape_calls()  # 2,000 new queues: walked once
        at_three_times = scrape_calls()
        assert at_three_times < at_first * 1.2 + 500, (at_first, at_three_times)
        assert moved > at_three_times + 2 * TOPICS, (moved, at_three_times)
        for _ in range(3):  # busier topics than the others, to be kept by count, not by name
            await send_to_topics(app.address, 5, "Busy")
        scrape_calls()
        # The same series and values as a fold of every topic, chosen in one pass over them all.
        recorder = state.recorder
        assert recorder is not None
        view = build_view(state, 0, app.address)
        topics = most_active_topics(view, CAP)
        assert topics is not None and {f"Busy{index}" for index in range(5)} <= topics
        snapshot = recorder.snapshot_from(
            recorder.capture(now_ms()), lambda topic: topic if topic in topics else OTHER
        )
        snapshot, view = cap_labels(snapshot, view, CAP, CAP, topics)
        full_pass = list(broker_families(snapshot, view, request_code_names()))
        incremental = run_steps(metrics_view.scrape_steps(state, recorder, 0, app.address))
        assert _samples(incremental) == _samples(full_pass)

        # A scrape cut short (a timeout) after it took the moved queues: the next one reads
        # every queue again rather than miss those moves.
        await send_to_topics(app.address, 5, "Busy")
        cut_short = metrics_view.scrape_steps(state, recorder, 0, app.address)
        sent: object = None
        for _ in range(2):  # the storage figures, then the moved queues: taken, never applied
            request = cut_short.send(sent)
            assert request is not None
            sent = request.call()
        assert sent, "the moves were taken"
        cut_short.close()
        after = run_steps(metrics_view.scrape_steps(state, recorder, 0, app.address))
        offsets = {
            sample.labels["topic"]: sample.value
            for family in after
            for sample in family.samples
            if sample.name == "rocketmq_producer_offset"
        }
        assert all(offsets[f"Busy{index}"] == 4 for index in range(5)), offsets
    finally:
        await app.shutdown()
