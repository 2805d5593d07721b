"""Calling a push consumer's listener the right way for its kind, with the consume hooks.

Listeners may be ``async def`` functions (awaited on the event loop) or plain callables (run
in a thread pool of ``consume_thread_max`` threads). Either returns a :class:`ConsumeResult`;
an exception counts as RECONSUME_LATER, and so does any other answer (logged).

A plain listener with no hook may also be called on a run of batches per hop to a pool
thread (:meth:`ListenerRunner.run_in_thread` runs the caller's function there, which calls
:attr:`ListenerRunner.plain_listener` once per batch): one hand-over between the event loop
and a thread for many calls instead of one per call, taking new batches for at most about
:data:`THREAD_RUN_MAX_S`, so that a slow listener's batches spread over every pool thread as
before.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import Generic, Protocol, TypeVar

from orbitmq.model.message import MessageExt, MessageQueue

__all__ = [
    "RETURN_EXCEPTION",
    "RETURN_FAILED",
    "RETURN_NULL",
    "RETURN_SUCCESS",
    "THREAD_RUN_MAX_S",
    "ConsumeHook",
    "ConsumeResult",
    "ListenerRunner",
    "MessageListener",
]

logger = logging.getLogger(__name__)

THREAD_RUN_MAX_S = 0.01
"""Seconds a pool thread keeps taking new batches after its first, in one hop from the event
loop (for the caller's function to heed)."""


class ConsumeResult(Enum):
    """What a listener answers for a batch."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


MessageListener = Callable[[list[MessageExt]], "ConsumeResult | Awaitable[ConsumeResult]"]

# How a listener call ended, as RocketMQ's ConsumeReturnType ordinals (trace records carry it).
RETURN_SUCCESS = 0
RETURN_EXCEPTION = 2
RETURN_NULL = 3
RETURN_FAILED = 4


T = TypeVar("T")
R = TypeVar("R")


class ConsumeHook(Protocol):
    """Told about every listener call (message trace)."""

    def consume_started(self, messages: list[MessageExt], mq: MessageQueue) -> object:
        """Before the call; the returned token comes back to :meth:`consume_finished`."""
        ...

    def consume_finished(
        self,
        token: object,
        messages: list[MessageExt],
        mq: MessageQueue,
        result: ConsumeResult,
        return_type: int,
        elapsed_ms: float,
    ) -> None: ...


class ListenerRunner(Generic[T]):
    """Calls the listener the right way for its kind and maps exceptions to RECONSUME_LATER."""

    def __init__(self, listener: MessageListener, thread_max: int, hooks: Sequence[ConsumeHook] = ()) -> None:
        self._hooks = tuple(hooks)
        self._listener = listener
        is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            type(listener).__call__
        )
        self._executor = None if is_async else ThreadPoolExecutor(thread_max, "orbitmq-consume")

    @property
    def batches_in_threads(self) -> bool:
        """A plain listener and no hook: :meth:`run_in_thread` may be used."""
        return self._executor is not None and not self._hooks

    @property
    def awaitable_listener(self) -> Callable[[list[MessageExt]], Awaitable[object]] | None:
        """An ``async def`` listener when there is no hook: the caller may await it itself (one
        coroutine less per call), mapping its answer with :meth:`outcome` and an exception with
        :meth:`raised`; else None."""
        if self._executor is not None or self._hooks:
            return None
        return self._listener  # type: ignore[return-value]

    @staticmethod
    def outcome(result: object, mq: MessageQueue) -> ConsumeResult:
        """What a listener's answer counts as."""
        return _outcome(result, mq)[0]

    @staticmethod
    def raised(messages: list[MessageExt], mq: MessageQueue) -> ConsumeResult:
        """The listener raised (call from an ``except`` block): logged, RECONSUME_LATER."""
        return _raised(messages, mq)[0]

    async def run(self, messages: list[MessageExt], mq: MessageQueue) -> ConsumeResult:
        if not self._hooks:
            return (await self._call(messages, mq))[0]
        tokens = [self._started(hook, messages, mq) for hook in self._hooks]
        started = time.perf_counter()
        result, return_type = await self._call(messages, mq)
        elapsed_ms = (time.perf_counter() - started) * 1000
        for hook, token in zip(self._hooks, tokens, strict=True):
            try:
                hook.consume_finished(token, messages, mq, result, return_type, elapsed_ms)
            except Exception:
                logger.exception("consume hook %s failed", type(hook).__name__)
        return result

    @staticmethod
    def _started(hook: ConsumeHook, messages: list[MessageExt], mq: MessageQueue) -> object:
        try:
            return hook.consume_started(messages, mq)
        except Exception:
            logger.exception("consume hook %s failed", type(hook).__name__)
            return None

    async def _call(self, messages: list[MessageExt], mq: MessageQueue) -> tuple[ConsumeResult, int]:
        try:
            if self._executor is None:
                result = await self._listener(messages)  # type: ignore[misc]
            else:
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(self._executor, self._listener, messages)
        except asyncio.CancelledError:
            raise
        except Exception:
            return _raised(messages, mq)
        return _outcome(result, mq)

    @property
    def plain_listener(self) -> Callable[[list[MessageExt]], object]:
        """The listener itself, for :meth:`run_in_thread`'s function to call (a plain listener
        without hooks: see :attr:`batches_in_threads`)."""
        return self._listener

    async def run_in_thread(self, work: Callable[[], R]) -> R:
        """``work()`` in a pool thread (it calls :attr:`plain_listener` on batches itself).

        Raises:
            AssertionError: not a plain listener without hooks (see :attr:`batches_in_threads`).
        """
        if self._executor is None or self._hooks:
            raise AssertionError("run_in_thread needs a plain listener and no hooks")
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    async def run_directly(self, messages: list[MessageExt], mq: MessageQueue) -> tuple[ConsumeResult, int]:
        """One listener call for CONSUME_MESSAGE_DIRECTLY: no hooks, no send-back."""
        return await self._call(messages, mq)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


def _raised(messages: list[MessageExt], mq: MessageQueue) -> tuple[ConsumeResult, int]:
    """The listener raised (called from an ``except`` block): logged; the batch is reconsumed."""
    logger.exception("listener failed on %d messages of %s; they will be reconsumed", len(messages), mq)
    return ConsumeResult.RECONSUME_LATER, RETURN_EXCEPTION


def _outcome(result: object, mq: MessageQueue) -> tuple[ConsumeResult, int]:
    """What a listener's answer counts as, and its ConsumeReturnType."""
    if result is ConsumeResult.CONSUME_SUCCESS:
        return ConsumeResult.CONSUME_SUCCESS, RETURN_SUCCESS
    if isinstance(result, ConsumeResult):
        return result, RETURN_FAILED
    logger.warning("listener returned %r for %s; treating it as RECONSUME_LATER", result, mq)
    return ConsumeResult.RECONSUME_LATER, RETURN_NULL if result is None else RETURN_FAILED
