"""What a /metrics scrape reads from a broker with many queues, and how it takes the store's lock.

Method: an in-process BrokerApp gets one message on each of 600 new topics (created by the
sends); the scrape's view of it is built on this thread while the calls into the store are
counted.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType

from orbitmq.bench._metrics_scale import send_to_topics
from orbitmq.broker import metrics_view
from orbitmq.broker.metrics_view import build_view
from tests.support.calls import python_calls
from tests.unit.broker._apps import start_broker_app

TOPICS = 600


async def test_metrics_view_reads_max_offsets_a_chunk_of_queues_per_hold_of_the_store_lock(
    tmp_path: Path,
) -> None:
    # One hold of the store's lock per queue: the scrape thread, holding the GIL, took the lock
    # back at once after each release, and an event-loop request that needed the store waited
    # up to a second behind the pass over 50,000 queues.
    app = await start_broker_app(tmp_path)
    try:
        await send_to_topics(app.address, TOPICS, "ViewTopic")
        state = app.state
        per_queue = python_calls(lambda: build_view(state, 0, app.address), "get_max_queue_offset")
        chunks = python_calls(lambda: build_view(state, 0, app.address), "get_max_queue_offsets")
        assert per_queue == 0 and 1 <= chunks <= 3
        view = build_view(state, 0, app.address)
        assert all(view.topic_max_offsets[f"ViewTopic{index}"] == 1 for index in range(TOPICS))
    finally:
        await app.shutdown()


async def test_metrics_view_reads_every_queue_without_sorting_their_names(tmp_path: Path) -> None:
    # The full read sorted every queue's name first: one C call that holds the GIL, so at 50,000
    # queues every other thread, the event loop too, waited for the whole sort.
    app = await start_broker_app(tmp_path)
    try:
        await send_to_topics(app.address, TOPICS, "ViewTopic")
        state = app.state
        sorts = 0

        def count(frame: FrameType, event: str, arg: object) -> None:
            nonlocal sorts
            if event == "c_call" and getattr(arg, "__name__", "") == "sorted":
                sorts += 1

        sys.setprofile(count)
        try:
            max_offsets = metrics_view._max_queue_offsets(state.store)
        finally:
            sys.setprofile(None)
        assert sorts == 0
        assert all(max_offsets[(f"ViewTopic{index}", 0)] == 1 for index in range(TOPICS))
    finally:
        await app.shutdown()
