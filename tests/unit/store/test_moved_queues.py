"""The queues whose max offset moved since the last look: what a /metrics scrape reads instead
of every queue.

Method: a store with tiny files (conftest); puts to a few queues, then the moves are taken.
"""

from __future__ import annotations

from collections.abc import Callable

from orbitmq.store.message_store import MessageStore, PutMessageRequest, PutStatus

OpenStore = Callable[..., MessageStore]


def _put(store: MessageStore, topic: str, queue_id: int = 0, count: int = 1) -> None:
    for _ in range(count):
        result = store.put_message(PutMessageRequest(topic=topic, queue_id=queue_id, body=b"m"))
        assert result.status is PutStatus.PUT_OK, result.remark


def test_message_store_moved_queues_name_each_queue_that_moved_once_with_its_max_offset(
    open_store: OpenStore,
) -> None:
    store = open_store()
    _put(store, "Before")
    assert store.take_moved_queues() is None  # the first look reads every queue
    assert store.take_moved_queues() == {}
    _put(store, "A", 0, 3)
    _put(store, "A", 1)
    store.put_messages([PutMessageRequest(topic="B", queue_id=2, body=b"m")] * 4)
    assert store.take_moved_queues() == {("A", 0): 3, ("A", 1): 1, ("B", 2): 4}
    assert store.take_moved_queues() == {}
    _put(store, "A", 0)
    assert store.take_moved_queues() == {("A", 0): 4}


def test_message_store_moved_queues_ask_for_every_queue_after_a_change_of_shape(
    open_store: OpenStore,
) -> None:
    store = open_store()
    _put(store, "A", 0, 2)
    assert store.take_moved_queues() is None
    store.delete_topic("A")  # its queues stay, empty at their old end: counts a reader kept are stale
    assert store.take_moved_queues() is None
    _put(store, "B")
    assert store.take_moved_queues() == {("B", 0): 1}
    store.truncate_to(0)
    assert store.take_moved_queues() is None
