"""The read task's read-ahead: order kept, errors raised after the items before them, and a
task that stops early stops the thread and closes the pull."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from orbitmq.errors import RequestTimeoutError
from orbitmq.spark._partition import read_ahead


def test_read_ahead_yields_every_item_in_order_then_the_error() -> None:
    def pulls() -> Iterator[int]:
        yield from range(50)
        raise RequestTimeoutError("the broker did not answer")

    got: list[int] = []
    with pytest.raises(RequestTimeoutError, match="did not answer"):
        for item in read_ahead(pulls(), 2):
            got.append(item)
    assert got == list(range(50))


def test_read_ahead_fetches_while_the_caller_works() -> None:
    fetched: list[int] = []

    def pulls() -> Iterator[int]:
        for item in range(3):
            fetched.append(item)
            yield item

    ahead = read_ahead(pulls(), 2)
    assert next(ahead) == 0
    deadline = time.monotonic() + 5
    while len(fetched) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fetched == [0, 1, 2]  # the next two were pulled before the caller asked
    assert list(ahead) == [1, 2]


def test_read_ahead_closed_early_stops_the_thread_and_closes_the_pull() -> None:
    closed = threading.Event()

    def pulls() -> Iterator[int]:
        try:
            yield from range(10**9)
        finally:
            closed.set()

    before = set(threading.enumerate())
    ahead = read_ahead(pulls(), 2)
    assert [next(ahead) for _ in range(5)] == [0, 1, 2, 3, 4]
    (fetcher,) = set(threading.enumerate()) - before
    ahead.close()
    assert closed.wait(5)
    fetcher.join(5)
    assert not fetcher.is_alive()
