"""PULL_MESSAGE and the queue offset lookups, shared by the push and pull consumers.

A pull's answer maps to a :class:`PullStatus` (expected outcomes are values):

==========================  =================  =============================================
response code               status             what the consumer does
==========================  =================  =============================================
SUCCESS                     FOUND              decode the records, continue at next offset
PULL_NOT_FOUND              NO_NEW_MSG         pull again from the same offset (long poll)
PULL_RETRY_IMMEDIATELY      NO_MATCHED_MSG     everything was filtered: continue at next
PULL_OFFSET_MOVED           OFFSET_ILLEGAL     the offset is outside the queue: jump
==========================  =================  =============================================

Anything else raises the error class of its code. A TAG filter is decided by the broker on
the tag hash code only, so :func:`decode_pull_body` re-checks the tag itself (a hash collision
passes the broker); a SQL92 filter is decided by the broker alone.

Which broker of a group serves a queue's next pull (ha-replication §4.2): the one the last
answer suggested (``suggestWhichBrokerId``, kept per queue in a :class:`PullNodeTable`), else
the master; when the route has no broker of that id (a master that went away) the lowest id
it has. A piggy-backed offset commit goes only to a master: a slave would ignore it.

After a failover the route is stale until the next poll (30 s): a pull that cannot reach its
broker, fails with a fault whose class says ``refresh_route`` (as the producer's retry loop
reads it), or finds no master in the route asks for the topic's route at once
(``refresh_route_soon``, rate-limited per topic), so the next pull goes to the new master.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from orbitmq.client._record_decode import decode_records
from orbitmq.client.selector import MessageSelector
from orbitmq.errors import ClientError, OrbitError, RemoteProtocolError, error_for_code
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import MessageConst, MessageExt, MessageQueue
from orbitmq.model.route import MASTER_BROKER_ID
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
)

PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4

BROKER_SUSPEND_MAX_MS = 15_000
"""How long the broker may park a pull that finds nothing (RocketMQ's default)."""
LONG_POLL_TIMEOUT_MS = 30_000
"""Client-side timeout of a long-polling pull: must exceed the broker's suspend time."""
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
PULL_DELAY_ON_ERROR_S = 1.0
"""How long a consumer waits before pulling again after a failed pull."""


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


class PullStatus(Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS_BY_CODE: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class PullResult:
    """One pull's outcome; ``body`` holds the raw stored records when FOUND."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes = b""
    messages: list[MessageExt] = field(default_factory=list)


class BrokerInvoker(Protocol):
    async def invoke_broker(
        self, broker_name: str, request: RemotingCommand, timeout_ms: int | None = None, broker_id: int = 0
    ) -> RemotingCommand: ...

    def find_broker_addr(
        self, broker_name: str, broker_id: int = 0, *, only_this: bool = False
    ) -> str | None: ...

    def refresh_route_soon(self, topic: str) -> None: ...


class PullNodeTable:
    """Per queue, the broker id the last pull answer suggested (pure state; 0, the master, by default)."""

    __slots__ = ("_broker_ids",)

    def __init__(self) -> None:
        self._broker_ids: dict[MessageQueue, int] = {}

    def broker_id(self, mq: MessageQueue) -> int:
        return self._broker_ids.get(mq, 0)

    def suggest(self, mq: MessageQueue, broker_id: int) -> None:
        if broker_id:
            self._broker_ids[mq] = broker_id
        else:
            self._broker_ids.pop(mq, None)


ADAPTIVE_PULL_MSG_NUMS_MAX = 1024
"""Most messages an adaptive pull asks for (the Java client's upper bound of pullBatchSize)."""


class PullSizer:
    """How many messages a queue's next pull asks for (maxMsgNums; pure state).

    ``pull_batch_size`` while the queue is caught up. While the last answer showed a backlog
    behind what it returned (its ``maxOffset`` beyond its ``nextBeginOffset``), the next pull
    asks for that backlog, up to :data:`ADAPTIVE_PULL_MSG_NUMS_MAX` and to the ``room`` the
    consumer's flow control leaves, but never for fewer than ``pull_batch_size``: a consumer
    catching up takes big bites (fewer requests, each spread over more messages, on both
    sides), a consumer at the head of its queue pulls exactly as configured. A consumer with
    a backlog and less than half of its threshold free may wait a little for more room
    (:meth:`worth_waiting`) rather than pull a sliver. The broker bounds every answer anyway
    (OrbitMQ's at 256 KiB, Apache RocketMQ's at ``maxTransferCountOnMessageInMemory``, 32 by
    default, where asking for more changes nothing).
    """

    __slots__ = ("_base", "_backlog")

    def __init__(self, pull_batch_size: int) -> None:
        self._base = pull_batch_size
        self._backlog = 0

    def worth_waiting(self, room: int, threshold: int) -> bool:
        """Whether the next pull had better wait for consumption to free half of ``threshold``:
        the backlog is bigger than the ``room`` left, and that room is under half."""
        return self._backlog > room and room < threshold // 2

    def next_size(self, room: int) -> int:
        """maxMsgNums of the next pull, with ``room`` messages left below the flow-control threshold."""
        return max(self._base, min(self._backlog, room, ADAPTIVE_PULL_MSG_NUMS_MAX))

    def on_result(self, result: PullResult) -> None:
        """Learn the backlog from a pull's answer (one that found messages, or filtered them all)."""
        if result.status is PullStatus.FOUND or result.status is PullStatus.NO_MATCHED_MSG:
            self._backlog = result.max_offset - result.next_begin_offset
        else:
            self._backlog = 0


@dataclass(frozen=True, slots=True)
class PullRequestSpec:
    """The fixed part of a queue's pulls: group, filter and how long to wait."""

    group: str
    selector: MessageSelector
    max_msg_nums: int = 32
    suspend_ms: int = BROKER_SUSPEND_MAX_MS
    timeout_ms: int = LONG_POLL_TIMEOUT_MS
    sub_version: int = 0


async def pull_queue(
    invoker: BrokerInvoker,
    mq: MessageQueue,
    queue_offset: int,
    spec: PullRequestSpec,
    *,
    commit_offset: int = -1,
    suspend: bool = True,
    nodes: PullNodeTable | None = None,
) -> PullResult:
    """One PULL_MESSAGE for ``mq`` from ``queue_offset`` (raw body; see :func:`decode_pull_body`).

    The subscription travels in every request (SUBSCRIPTION flag), so the broker need not
    have seen a heartbeat; ``commit_offset`` >= 0 piggybacks an offset commit (COMMIT flag)
    when the pull goes to a master. With ``nodes`` the pull goes where the last answer for
    ``mq`` suggested, and this answer's suggestion is recorded there.

    Raises:
        BrokerResponseError: an unexpected answer; the message names the queue and offset.
        RemotingError: the broker cannot be reached or did not answer in time.
    """
    broker_id = nodes.broker_id(mq) if nodes is not None else 0
    sys_flag = PULL_FLAG_SUBSCRIPTION
    if suspend:
        sys_flag |= PULL_FLAG_SUSPEND
    if commit_offset >= 0 and invoker.find_broker_addr(mq.broker_name, broker_id) == invoker.find_broker_addr(
        mq.broker_name, only_this=True
    ):
        sys_flag |= PULL_FLAG_COMMIT_OFFSET
    header = PullMessageRequestHeader(
        consumer_group=spec.group,
        topic=mq.topic,
        queue_id=mq.queue_id,
        queue_offset=queue_offset,
        max_msg_nums=spec.max_msg_nums,
        sys_flag=sys_flag,
        commit_offset=max(commit_offset, 0),
        suspend_timeout_millis=spec.suspend_ms if suspend else 0,
        sub_version=spec.sub_version,
        subscription=spec.selector.expression,
        expression_type=spec.selector.expression_type,
    )
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
    timeout_ms = spec.timeout_ms if suspend else min(spec.timeout_ms, 10_000)
    if broker_id == MASTER_BROKER_ID and invoker.find_broker_addr(mq.broker_name, only_this=True) is None:
        # The route has no master (a failover under way): this pull goes to a slave meanwhile.
        invoker.refresh_route_soon(mq.topic)
    try:
        response = await invoker.invoke_broker(mq.broker_name, request, timeout_ms, broker_id)
    except OrbitError as exc:
        if exc.refresh_route:
            invoker.refresh_route_soon(mq.topic)
        raise
    status = _STATUS_BY_CODE.get(response.code)
    if status is None:
        error = error_for_code(
            response.code, f"pull {mq} at queue offset {queue_offset}: {response.remark or ''}"
        )
        if error.refresh_route:
            invoker.refresh_route_soon(mq.topic)
        raise error
    try:
        answer = PullMessageResponseHeader.from_ext(response.ext_fields)
    except RemoteProtocolError as exc:
        raise ClientError(f"bad pull answer for {mq} at queue offset {queue_offset}: {exc}") from exc
    if nodes is not None:
        nodes.suggest(mq, answer.suggest_which_broker_id)
    return PullResult(
        status,
        answer.next_begin_offset,
        answer.min_offset,
        answer.max_offset,
        response.body if status is PullStatus.FOUND else b"",
    )


def decode_pull_body(body: bytes, selector: MessageSelector, mq: MessageQueue) -> list[MessageExt]:
    """Decode (and inflate) a FOUND body and drop messages whose tag does not match a TAG selector.

    Raises:
        RemoteProtocolError: the body is malformed; the message names the queue.
    """
    try:
        messages = decode_records(body)
    except RemoteProtocolError as exc:
        raise RemoteProtocolError(f"malformed pull body from {mq}: {exc}") from exc
    message_filter = selector.message_filter
    if message_filter.matches_all or message_filter.needs_properties:
        return messages
    return [m for m in messages if message_filter.matches_properties(m.properties)]


def restore_retry_topic(messages: list[MessageExt], group: str) -> None:
    """A retried message arrives from %RETRY%<group>: give it back its original topic."""
    retry_name = RETRY_GROUP_TOPIC_PREFIX + group
    for message in messages:
        if message.topic == retry_name:
            original = message.properties.get(MessageConst.RETRY_TOPIC)
            if original:
                message.topic = original


async def wait_event(event: asyncio.Event, timeout_s: float) -> None:
    """Wait until ``event`` is set, raising TimeoutError after ``timeout_s``.

    Not ``asyncio.wait_for(event.wait(), ...)``: under Python 3.11 with uvloop, cancelling a
    task parked in that wait_for was seen to hang its canceller (consumer shutdown).
    """
    async with asyncio.timeout(timeout_s):
        await event.wait()


async def _offset_request(
    invoker: BrokerInvoker, mq: MessageQueue, request: RemotingCommand, what: str
) -> dict[str, str]:
    response = await invoker.invoke_broker(mq.broker_name, request)
    if response.code != ResponseCode.SUCCESS:
        raise error_for_code(response.code, f"{what} of {mq}: {response.remark or ''}")
    return response.ext_fields


async def query_max_offset(invoker: BrokerInvoker, mq: MessageQueue) -> int:
    """GET_MAX_OFFSET: the next queue offset to be written."""
    request = RemotingCommand.request(
        RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(mq.topic, mq.queue_id).to_ext()
    )
    ext = await _offset_request(invoker, mq, request, "max offset")
    return GetMaxOffsetResponseHeader.from_ext(ext).queue_offset


async def query_min_offset(invoker: BrokerInvoker, mq: MessageQueue) -> int:
    """GET_MIN_OFFSET: the oldest queue offset still stored."""
    request = RemotingCommand.request(
        RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(mq.topic, mq.queue_id).to_ext()
    )
    ext = await _offset_request(invoker, mq, request, "min offset")
    return GetMinOffsetResponseHeader.from_ext(ext).queue_offset


async def search_offset(invoker: BrokerInvoker, mq: MessageQueue, timestamp_ms: int) -> int:
    """SEARCH_OFFSET_BY_TIMESTAMP: the first queue offset stored at or after ``timestamp_ms``."""
    header = SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp_ms)
    request = RemotingCommand.request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext())
    ext = await _offset_request(invoker, mq, request, f"offset at {timestamp_ms} ms")
    return SearchOffsetResponseHeader.from_ext(ext).queue_offset


class OffsetLoader(Protocol):
    async def load(self, mq: MessageQueue, *, zero_if_not_found: bool = True) -> int | None: ...


DEFAULT_CONSUME_TIMESTAMP_AGO_MS = 30 * 60 * 1000
"""CONSUME_FROM_TIMESTAMP without a time starts this long ago (RocketMQ's default: half an hour)."""


async def resolve_start_offset(
    store: OffsetLoader,
    invoker: BrokerInvoker,
    mq: MessageQueue,
    where: ConsumeFromWhere,
    timestamp_ms: int | None,
    *,
    retry_topics_from_zero: bool,
) -> int:
    """Where a consumer starts on ``mq``: its committed offset, else the group's start policy.

    A group starting from a timestamp asks the broker not to hand it offset 0
    (setZeroIfNotFound=false), so the policy really applies on an untruncated queue.
    """
    zero_if_not_found = where is not ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    stored = await store.load(mq, zero_if_not_found=zero_if_not_found)
    if stored is not None:
        return stored
    if retry_topics_from_zero and mq.topic.startswith("%RETRY%"):
        return 0
    if where in (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET):
        return await query_min_offset(invoker, mq)
    if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000) - DEFAULT_CONSUME_TIMESTAMP_AGO_MS
        return await search_offset(invoker, mq, timestamp_ms)
    return await query_max_offset(invoker, mq)
