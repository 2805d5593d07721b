"""What a push consumer's consume services are given: their settings and where offsets go."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

from orbitmq.client._process_queue import ProcessQueue
from orbitmq.model.message import MessageQueue

__all__ = ["ConsumeSettings", "OffsetSink"]


@dataclass(frozen=True, slots=True)
class ConsumeSettings:
    group: str
    clustering: bool
    thread_max: int
    batch_max_size: int
    max_reconsume_times: int
    suspend_current_queue_time_ms: int


class OffsetSink(Protocol):
    """Where finished messages move the committed offset to."""

    def on_consumed(self, mq: MessageQueue, pq: ProcessQueue, commit_offset: int) -> None: ...

    def queue_lockable(self, mq: MessageQueue, pq: ProcessQueue) -> Awaitable[bool]: ...
