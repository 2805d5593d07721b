"""Shared fixtures for store tests: tiny geometry, stores that always close, and a consistency check.

Every store opened through ``open_store`` is closed at teardown and its directory is then
checked with the offline verifier (bbolt runs its Check after each test), unless the test
opted out because it leaves damage on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from orbitmq.store._fs import failpoints
from orbitmq.store.config import StoreConfig
from orbitmq.store.message_store import MessageStore
from orbitmq.store.verify import verify_store

SEGMENT_BYTES = 64 * 1024
QUEUE_ENTRIES = 100

OpenStore = Callable[..., MessageStore]


def tiny_config(root: Path, **overrides: Any) -> StoreConfig:
    """A StoreConfig with tiny files, so tests roll segments and queue files quickly."""
    values: dict[str, Any] = {
        "store_path_root_dir": root,
        "commit_log_segment_bytes": SEGMENT_BYTES,
        "consume_queue_entries_per_file": QUEUE_ENTRIES,
        "max_hash_slot_num": 64,
        "max_index_num": 256,
        "flush_interval_commit_log_ms": 20,
        "flush_interval_consume_queue_ms": 50,
    }
    values.update(overrides)
    return StoreConfig(**values)


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def open_store(store_root: Path) -> Iterator[OpenStore]:
    """``open_store(root=None, verify=True, **config_overrides)`` opens a store closed at teardown."""
    opened: list[tuple[MessageStore, bool]] = []

    def factory(root: Path | None = None, verify: bool = True, **overrides: Any) -> MessageStore:
        store = MessageStore(tiny_config(root or store_root, **overrides))
        store.open()
        opened.append((store, verify))
        return store

    yield factory
    failpoints.disarm()
    for store, _ in opened:
        store.close()
    for store, verify in opened:
        if verify:
            report = verify_store(
                store.store_path,
                commit_log_segment_bytes=store.config.commit_log_segment_bytes,
                consume_queue_entries_per_file=store.config.consume_queue_entries_per_file,
                index_hash_slot_num=store.config.max_hash_slot_num,
                index_num=store.config.max_index_num,
            )
            assert report.ok, report.render()


@pytest.fixture
def make_config(store_root: Path) -> Callable[..., StoreConfig]:
    """``make_config(root=None, **overrides)``: a tiny StoreConfig without opening a store."""

    def factory(root: Path | None = None, **overrides: Any) -> StoreConfig:
        return tiny_config(root or store_root, **overrides)

    return factory
