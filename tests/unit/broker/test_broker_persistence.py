"""The broker's tables on disk: written off the event loop, by one topic writer at a time.

Method: an in-process BrokerApp; the Python calls made on the event loop's thread while it
persists are counted (the encoding must run on a thread), and a burst of topic changes must
leave one background writer, whose last write holds every topic.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from orbitmq.broker.app import CONSUMER_OFFSETS_FILE, TOPICS_FILE
from orbitmq.broker.topics import TopicConfigTable
from tests.support.calls import python_calls_while
from tests.unit.broker._apps import start_broker_app


async def test_broker_persists_its_tables_off_the_event_loop_with_one_topic_writer(tmp_path: Path) -> None:
    app = await start_broker_app(tmp_path)
    try:
        state = app.state
        # Every flush interval the offsets, groups and topics were encoded on the event loop:
        # with tens of thousands of entries each round held every other request.
        for index in range(200):
            state.topics.create_from_template(f"T{index}", "TBW102", 4)
            state.offsets.commit("G", f"T{index}", 0, index)
        _, encodes = await python_calls_while(app._persist_tables(force=True), "encode")
        assert encodes == 0
        config_dir = tmp_path / "store" / "config"
        assert b'"T199@G"' in (config_dir / CONSUMER_OFFSETS_FILE).read_bytes()
        assert "T199" in TopicConfigTable.decode((config_dir / TOPICS_FILE).read_bytes())
        # Each auto-created topic queued a task of its own to rewrite topics.json: 50,000
        # topics were 50,000 tasks, each encoding the whole table in turn.
        for index in range(300):
            state.topics.create_from_template(f"Burst{index}", "TBW102", 4)
            state.on_topics_changed()
        assert len(app._background_writes) <= 1
        while app._background_writes:
            await asyncio.gather(*app._background_writes)
        written = TopicConfigTable.decode((config_dir / TOPICS_FILE).read_bytes())
        assert all(f"Burst{index}" in written for index in range(300))
        assert not state.topics.dirty
    finally:
        await app.shutdown()
