"""FlushFuture: the flush group's future, waited on by many threads at once."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeoutError

import pytest

from orbitmq.store.commit_log import FlushFuture


def test_flush_future_wakes_every_waiting_thread_with_the_result() -> None:
    future = FlushFuture()
    results: list[bool] = []
    lock = threading.Lock()

    def wait() -> None:
        value = future.result(timeout=10)
        with lock:
            results.append(value)

    threads = [threading.Thread(target=wait) for _ in range(64)]
    for thread in threads:
        thread.start()
    time.sleep(0.05)
    assert not results
    future.set_result(True)
    for thread in threads:
        thread.join(timeout=10)
    assert results == [True] * 64


def test_flush_future_result_after_resolution_returns_at_once() -> None:
    future = FlushFuture()
    future.set_result(False)
    assert future.result(timeout=0) is False


def test_flush_future_result_times_out_while_unresolved() -> None:
    future = FlushFuture()
    started = time.monotonic()
    with pytest.raises(FutureTimeoutError):
        future.result(timeout=0.05)
    assert time.monotonic() - started >= 0.05
    future.set_result(True)
    assert future.result() is True


def test_flush_future_exception_reaches_waiters() -> None:
    future = FlushFuture()
    caught: list[BaseException] = []

    def wait() -> None:
        try:
            future.result(timeout=10)
        except OSError as exc:
            caught.append(exc)

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.02)
    future.set_exception(OSError("disk gone"))
    thread.join(timeout=10)
    assert [str(exc) for exc in caught] == ["disk gone"]


async def test_flush_future_works_with_asyncio_and_callbacks() -> None:
    future = FlushFuture()
    called: list[bool] = []
    future.add_done_callback(lambda done: called.append(done.result()))
    loop = asyncio.get_running_loop()
    loop.call_later(0.01, future.set_result, True)
    assert await asyncio.wrap_future(future) is True
    assert called == [True]
