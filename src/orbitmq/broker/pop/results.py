"""What a pop asks and what it answers, whichever protocol asked (the POP engine's vocabulary)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from orbitmq.broker.pop.filter import MessageFilter
from orbitmq.errors import StoreError


class PopJournalError(StoreError):
    """The journal message could not be stored: the request changed nothing."""


class PopStatus(Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"  # nothing to deliver (after the poll time, if any)


@dataclass(frozen=True, slots=True)
class PopRequest:
    """One pop, whichever protocol asked."""

    group: str
    topic: str
    queue_id: int
    batch_max: int
    invisible_ms: int
    poll_ms: int
    init_mode: int
    fifo: bool
    message_filter: MessageFilter
    attempt_id: str | None = None


@dataclass(slots=True)
class PoppedMessage:
    """One delivered message: its stored record, RECONSUMETIMES raised by ``attempt - 1``.

    ``topic`` is where it was popped from: the pop's topic or the group's pop retry topic.
    """

    topic: str
    queue_id: int
    queue_offset: int
    attempt: int
    record: bytes


@dataclass(slots=True)
class PopResult:
    status: PopStatus
    pop_time_ms: int
    invisible_ms: int
    messages: list[PoppedMessage] = field(default_factory=list)
    rest_num: int = 0
    # The earlier answer to a repeated attempt id: nothing new was handed out.
    repeated: bool = False
