"""ProcessQueue: the committed offset never passes an unfinished message."""

from __future__ import annotations

from orbitmq.client._process_queue import ProcessQueue
from orbitmq.model.message import MessageExt


def msgs(*offsets: int) -> list[MessageExt]:
    return [MessageExt(topic="T", body=b"x" * 10, queue_offset=o) for o in offsets]


def test_consume_process_queue_commit_offset_is_lowest_unfinished() -> None:
    pq = ProcessQueue()
    batch = msgs(5, 6, 7, 8)
    pq.put_messages(batch, 9)
    assert pq.msg_count == 4 and pq.msg_size_bytes == 40
    assert pq.remove_messages([batch[1], batch[3]]) == 5
    assert pq.remove_messages([batch[0]]) == 7
    assert pq.remove_messages([batch[2]]) == 9
    assert pq.msg_count == 0 and pq.msg_size_bytes == 0


def test_consume_process_queue_ignores_duplicates_and_filtered_gaps() -> None:
    pq = ProcessQueue()
    pq.put_messages(msgs(0, 1), 2)
    pq.put_messages(msgs(1), 2)
    assert pq.msg_count == 2
    pq.put_messages([], 10)  # offsets 2..9 were filtered out by tag
    pq.remove_messages(msgs(0, 1))
    assert pq.commit_offset() == 10


def test_consume_process_queue_empty_before_any_message() -> None:
    assert ProcessQueue().commit_offset() == -1
    pq = ProcessQueue()
    pq.reset_to(42)
    assert pq.commit_offset() == 42
    pq.reset_to(0)
    assert pq.commit_offset() == 0


def test_consume_process_queue_orderly_window_rollback_and_commit() -> None:
    pq = ProcessQueue()
    pq.put_messages(msgs(3, 4, 5), 6)
    taken = pq.take_messages(2)
    assert [m.queue_offset for m in taken] == [3, 4]
    assert pq.commit_offset() == 3
    pq.make_available(taken)
    again = pq.take_messages(10)
    assert [m.queue_offset for m in again] == [3, 4, 5]
    assert pq.commit() == 6
    assert pq.msg_count == 0 and pq.msg_size_bytes == 0
