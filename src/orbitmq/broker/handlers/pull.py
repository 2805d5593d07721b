"""PULL_MESSAGE (11): read a batch of stored records from one queue, parking when there is none.

Order of checks (remoting-protocol §2.5): broker readable, subscription group known (created
when ``autoCreateSubscriptionGroup``), topic known and readable, queue id in range, then the
subscription: from the request when sysFlag has the SUBSCRIPTION bit, else the one the group's
last heartbeat registered (SUBSCRIPTION_NOT_EXIST when none, SUBSCRIPTION_NOT_LATEST when the
registered version is older than the request's).

Filters (``orbitmq.filter``): a TAG subscription is decided on the consume-queue tags hash; a
SQL92 subscription (only with ``enablePropertyFilter=true``, else SYSTEM_ERROR as in RocketMQ)
on each stored record's properties. Expressions are compiled once per subscription (cached by
text); one that does not compile answers SUBSCRIPTION_PARSE_FAILED with its position.

The read's status maps to a response code in ``status_map``. PULL_NOT_FOUND with the SUSPEND bit
parks the pull in ``long_polling`` for ``suspendTimeoutMillis`` (``shortPollingTimeMills`` when
long polling is off) and re-reads once when woken or expired (no task waits: the wake calls back,
and the answer is a ``LaterAnswer``); the re-read never parks again, so
an expired poll answers PULL_NOT_FOUND. The hold is capped at ``longPollingSuspendMaxMillis``
(25 s, below the clients' 30 s request timeout), and one connection may have at most
``maxParkedPullsPerConnection`` pulls parked: one more answers SYSTEM_BUSY at once (clients back
off and pull again). When sysFlag bit 0 is set the consumer's ``commitOffset`` is stored before
reading. A pull reads at most ``PULL_MSG_NUMS_MAX`` messages whatever its ``maxMsgNums``. The
response body is the stored records, concatenated, exactly as the commit log holds them.

Cost. Real clients at their defaults pull 32 messages a request, so what the broker does per
pull bounds their rate. The common pull (found messages, no filter) never waits: the server
answers it in the loop turn that read it, without a task (a ``ReadyAnswer``), its header is checked once per request shape
(``_header``), the store checks its entries as columns and slices the records from the mapped
segment (``store/read_path.py``), and the answer's header is written from a template
(``pull_answer.py``). ``tests/unit/broker/test_pull_path.py`` counts that work.

Reads from slaves (ha-replication §4.1). ``suggestWhichBrokerId`` tells the client where to
pull next: 0 unless ``slaveReadEnable``; with it, the group's ``whichBrokerWhenConsumeSlowly``
when the batch was read more than ``accessMessageInMemoryMaxRatio`` percent of the host's
memory behind the log's end (unlikely to be in the page cache), else the group's
``brokerId``. Master and slave answer alike, except that a slave never moves a consumer's
offset (a lagging slave would move it back: an offset it cannot serve is PULL_RETRY_IMMEDIATELY
at the same offset) and ignores the piggy-backed commit offset (the master's copy wins).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable
from functools import cache
from typing import Any, TypeGuard

from orbitmq.broker.clients import GroupSubscription
from orbitmq.broker.config import BrokerRole
from orbitmq.broker.handlers import BrokerState
from orbitmq.broker.handlers.pull_answer import found_answer
from orbitmq.broker.status_map import is_long_poll_candidate, pull_response_code
from orbitmq.broker.validation import check_group_name
from orbitmq.errors import FilterExpressionError
from orbitmq.filter import EXPRESSION_TYPE_TAG, MessageFilter, compiled_filter
from orbitmq.model.route import PERM_READ, TopicConfig
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import PullMessageRequestHeader
from orbitmq.store.message_store import GetResult
from orbitmq.transport.server import LaterAnswer, ReadyAnswer, RequestContext

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4

PULL_MSG_NUMS_MAX = 32 * 1024
"""Most messages one pull reads (the 256 KiB transfer cap usually stops it first)."""
_GATED_RECHECK_MS = 20
"""How often a pull stopped at the confirm offset (controller mode) looks again."""

MAX_TRANSFER_BYTES = 256 * 1024
HEADER_SHAPES_MAX = 4096
"""Pull headers remembered by the texts of their fields other than the offsets (``_header``)."""
_HEADER_ATTRS = tuple(spec.attr for spec in PullMessageRequestHeader.field_specs())
_QUEUE_OFFSET_AT = _HEADER_ATTRS.index("queue_offset")
_COMMIT_OFFSET_AT = _HEADER_ATTRS.index("commit_offset")
_SHAPE_FIELDS = tuple(
    spec.wire_name
    for spec in PullMessageRequestHeader.field_specs()
    if spec.attr not in ("queue_offset", "commit_offset")
)
_PLAIN_DECIMAL_DIGITS_MAX = 18
"""Longest run of digits that is a long whatever the digits (10^18 - 1 < 2^63)."""


def _is_plain_decimal(text: str | None) -> TypeGuard[str]:
    """Digits only, as a long: what ``from_ext`` reads as ``int(text)`` with no other check."""
    return (
        text is not None and 0 < len(text) <= _PLAIN_DECIMAL_DIGITS_MAX and text.isascii() and text.isdigit()
    )


class PullHandlers:
    """PULL_MESSAGE."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state
        # connection id -> pulls of that connection parked now
        self._parked: dict[int, int] = {}
        # texts of a pull's fields other than its offsets -> the header they made (``_header``)
        self._headers: dict[tuple[str | None, ...], tuple[Any, ...]] = {}

    def pull_message(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> Awaitable[RemotingCommand | None]:
        """PULL_MESSAGE and LITE_PULL_MESSAGE: a :class:`ReadyAnswer` unless the pull parks.

        Everything up to the first read runs in the call, so a pull that finds messages (or is
        refused, or may not park) is answered in the loop turn that read it, without a task;
        a pull that parks returns the coroutine that waits (:meth:`_parked_pull`).
        """
        header = self._header(request.ext_fields)
        rejection = self._check(request, header)
        if rejection is not None:
            return ReadyAnswer(rejection)
        message_filter = self._message_filter(request, header)
        if isinstance(message_filter, RemotingCommand):
            return ReadyAnswer(message_filter)
        is_slave = self._state.config.broker_role is BrokerRole.SLAVE
        if header.sys_flag & FLAG_COMMIT_OFFSET and header.commit_offset >= 0 and not is_slave:
            self._state.offsets.commit_unless_reset(
                header.consumer_group, header.topic, header.queue_id, header.commit_offset
            )
        moved = self._offset_reset(request, header)
        if moved is not None:
            return ReadyAnswer(moved)
        response, _ = self._read(request, header, message_filter)
        if header.sys_flag & FLAG_SUSPEND and is_long_poll_candidate(ResponseCode(response.code)):
            config = self._state.config
            parked = self._parked.get(ctx.connection.id, 0)
            if parked >= config.parked_pulls_per_connection_max:
                return ReadyAnswer(
                    request.response(
                        ResponseCode.SYSTEM_BUSY,
                        f"{parked} pulls of this connection are parked already "
                        f"(maxParkedPullsPerConnection={config.parked_pulls_per_connection_max})",
                        response.ext_fields,
                    )
                )
            return self._parked_pull(ctx, request, header, message_filter)
        return ReadyAnswer(self._counted(header, response))

    def _parked_pull(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        message_filter: MessageFilter,
    ) -> LaterAnswer:
        """A pull that found nothing to read, parked in ``long_polling`` until woken or expired.

        No task waits: the wake calls the :class:`_ParkedPull` on the loop, which reads and
        answers at once (a pull woken by a send is answered in the turn that read the send).
        """
        config = self._state.config
        hold_ms = (
            header.suspend_timeout_millis if config.long_polling_enable else config.short_polling_time_ms
        )
        hold_ms = min(max(hold_ms, 0), config.long_polling_suspend_max_ms)
        self._parked[ctx.connection.id] = self._parked.get(ctx.connection.id, 0) + 1
        parked = _ParkedPull(self, ctx.connection.id, request, header, message_filter, hold_ms)
        self._state.long_polling.park(header.topic, header.queue_id, header.queue_offset, hold_ms, parked)
        return parked.answer

    def _unparked(self, connection_id: int) -> None:
        remaining = self._parked[connection_id] - 1
        if remaining:
            self._parked[connection_id] = remaining
        else:
            del self._parked[connection_id]

    def _counted(self, header: PullMessageRequestHeader, response: RemotingCommand) -> RemotingCommand:
        """``response``, a pull that got nothing counted as such in the group's stats."""
        if response.code != ResponseCode.SUCCESS:
            self._state.stats.on_get(header.consumer_group, header.topic, 0, 0)
        return response

    def _header(self, ext: dict[str, str]) -> PullMessageRequestHeader:
        """``PullMessageRequestHeader.from_ext(ext)``, checked once per request shape.

        A consumer's pulls of one queue differ only in their offsets: the other fields' texts
        key a table of headers already checked, and a pull whose offsets are plain decimals
        takes the known header with its own offsets. Anything else (a new shape, a sign, a
        space, an absent offset) goes through ``from_ext``, with its checks and refusals.
        """
        key = tuple(map(ext.get, _SHAPE_FIELDS))
        known = self._headers.get(key)
        if known is not None:
            queue_offset = ext.get("queueOffset")
            commit_offset = ext.get("commitOffset")
            if _is_plain_decimal(queue_offset) and _is_plain_decimal(commit_offset):
                values = list(known)
                values[_QUEUE_OFFSET_AT] = int(queue_offset)
                values[_COMMIT_OFFSET_AT] = int(commit_offset)
                return PullMessageRequestHeader(*values)
        header = PullMessageRequestHeader.from_ext(ext)
        if len(self._headers) >= HEADER_SHAPES_MAX:
            self._headers.clear()
        self._headers[key] = tuple(getattr(header, name) for name in _HEADER_ATTRS)
        return header

    def _offset_reset(
        self, request: RemotingCommand, header: PullMessageRequestHeader
    ) -> RemotingCommand | None:
        """PULL_OFFSET_MOVED to a pending admin reset of this queue (taken once), else None.

        A pull already at the reset offset (the consumer applied RESET_CONSUMER_CLIENT_OFFSET)
        just takes the reset and reads.
        """
        offsets = self._state.offsets
        reset = offsets.take_reset(header.consumer_group, header.topic, header.queue_id)
        if reset is None or reset == header.queue_offset:
            return None
        store = self._state.store
        ext = {
            "nextBeginOffset": str(reset),
            "minOffset": str(store.get_min_queue_offset(header.topic, header.queue_id)),
            "maxOffset": str(store.get_max_queue_offset(header.topic, header.queue_id)),
            "suggestWhichBrokerId": "0",
        }
        return request.response(
            ResponseCode.PULL_OFFSET_MOVED, f"OFFSET_RESET: the group's offset was reset to {reset}", ext
        )

    def _check(self, request: RemotingCommand, header: PullMessageRequestHeader) -> RemotingCommand | None:
        state = self._state
        if not state.config.broker_permission & PERM_READ:
            return request.response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{state.config.broker_name}] pulling message is forbidden",
            )
        illegal_group = check_group_name(header.consumer_group)
        if illegal_group is not None:
            return illegal_group.response(request)
        group = state.groups.find_or_create(
            header.consumer_group, state.config.auto_create_subscription_group
        )
        if group is None:
            return request.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist",
            )
        if not group.consume_enable:
            return request.response(
                ResponseCode.NO_PERMISSION,
                f"subscription group [{header.consumer_group}] no permission to consume",
            )
        topic_config = state.topics.get(header.topic)
        if topic_config is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!"
            )
        if not topic_config.perm & PERM_READ:
            return request.response(
                ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden"
            )
        return self._check_queue(request, header, topic_config)

    @staticmethod
    def _check_queue(
        request: RemotingCommand, header: PullMessageRequestHeader, topic_config: TopicConfig
    ) -> RemotingCommand | None:
        if 0 <= header.queue_id < topic_config.read_queue_nums:
            return None
        return request.response(
            ResponseCode.SYSTEM_ERROR,
            f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
            f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}] consumer:[{header.consumer_group}]",
        )

    def _message_filter(
        self, request: RemotingCommand, header: PullMessageRequestHeader
    ) -> MessageFilter | RemotingCommand:
        """The filter to apply, or the error response when there is no usable subscription."""
        if header.sys_flag & FLAG_SUBSCRIPTION:
            expression_type = header.expression_type or EXPRESSION_TYPE_TAG
            refused = self._check_expression_type(request, expression_type)
            if refused is not None:
                return refused
            try:
                return compiled_filter(expression_type, header.subscription)
            except FilterExpressionError as exc:
                return request.response(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                    f"parse the consumer's subscription [{header.subscription}] of group "
                    f"[{header.consumer_group}] failed: {exc}",
                )
        consumer_group = self._state.consumers.get(header.consumer_group)
        if consumer_group is None:
            return request.response(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's group info [{header.consumer_group}] not exist",
            )
        registered: GroupSubscription | None = consumer_group.subscriptions.get(header.topic)
        if registered is None:
            return request.response(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription of topic [{header.topic}] not exist",
            )
        if registered.sub_version < header.sub_version:
            return request.response(
                ResponseCode.SUBSCRIPTION_NOT_LATEST,
                f"the consumer's subscription of topic [{header.topic}] is not latest",
            )
        refused = self._check_expression_type(request, registered.expression_type)
        if refused is not None:
            return refused
        if registered.message_filter is None:
            return request.response(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"parse the consumer's subscription [{registered.expression}] of group "
                f"[{header.consumer_group}] failed: {registered.parse_error}",
            )
        return registered.message_filter

    def _check_expression_type(
        self, request: RemotingCommand, expression_type: str
    ) -> RemotingCommand | None:
        if expression_type.upper() == EXPRESSION_TYPE_TAG or self._state.config.enable_property_filter:
            return None
        return request.response(
            ResponseCode.SYSTEM_ERROR,
            f"The broker does not support consumer to filter message by {expression_type} "
            "(enablePropertyFilter=false)",
        )

    def _read(
        self, request: RemotingCommand, header: PullMessageRequestHeader, message_filter: MessageFilter
    ) -> tuple[RemotingCommand, bool]:
        """The answer, and whether the read stopped at the confirm offset with nothing to give."""
        # A property filter (SQL92) decides on properties alone: its tags-code check passes all.
        by_properties = message_filter.needs_properties
        result = self._state.store.get_messages(
            header.topic,
            header.queue_id,
            header.queue_offset,
            min(max(header.max_msg_nums, 1), PULL_MSG_NUMS_MAX),
            MAX_TRANSFER_BYTES,
            None if message_filter.matches_all or by_properties else message_filter.matches_tags_code,
            message_filter.stored_record_filter() if by_properties else None,
            whole_runs=True,
        )

        code = pull_response_code(result.status, header.queue_offset)
        suggested = self._suggest(header.consumer_group, result)
        next_begin_offset = result.next_begin_offset
        if code is ResponseCode.PULL_OFFSET_MOVED and self._state.config.broker_role is BrokerRole.SLAVE:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
            next_begin_offset = header.queue_offset
            group = self._state.groups.get(header.consumer_group)
            suggested = group.broker_id if group is not None else 0
        topic_config = self._state.topics.get(header.topic)
        # RocketMQ 5.x answers topicSysFlag and groupSysFlag too.
        topic_sys_flag = topic_config.topic_sys_flag if topic_config is not None else 0
        if code is ResponseCode.SUCCESS:
            body = result.body()
            self._state.stats.on_get(header.consumer_group, header.topic, result.message_count, len(body))
            answer = found_answer(
                request,
                next_begin_offset,
                result.min_offset,
                result.max_offset,
                suggested,
                topic_sys_flag,
                body,
            )
            return answer, result.gated
        ext = {
            "nextBeginOffset": str(next_begin_offset),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
            "suggestWhichBrokerId": str(suggested),
            "topicSysFlag": str(topic_sys_flag),
            "groupSysFlag": "0",
        }
        return request.response(code, result.status.name, ext), result.gated

    def _suggest(self, consumer_group: str, result: GetResult) -> int:
        """suggestWhichBrokerId for this read (see the module docstring)."""
        config = self._state.config
        if not config.slave_read_enable:
            return 0
        group = self._state.groups.get(consumer_group)
        if group is None:
            return 0
        if result.commit_log_offsets:
            behind_bytes = self._state.store.max_commit_log_offset - result.commit_log_offsets[-1]
            if behind_bytes > memory_bytes() * config.access_message_in_memory_max_ratio_percent // 100:
                return group.which_broker_when_consume_slowly
        return group.broker_id


class _ParkedPull:
    """One parked pull: called on the loop when it is woken (or expires), it reads once and
    gives its :class:`LaterAnswer`; never raises (``LongPollingService.park``)."""

    __slots__ = (
        "_handlers",
        "_connection_id",
        "_request",
        "_header",
        "_filter",
        "_hold_ms",
        "_started",
        "answer",
    )

    def __init__(
        self,
        handlers: PullHandlers,
        connection_id: int,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        message_filter: MessageFilter,
        hold_ms: int,
    ) -> None:
        self._handlers = handlers
        self._connection_id = connection_id
        self._request = request
        self._header = header
        self._filter = message_filter
        self._hold_ms = hold_ms
        self._started = time.monotonic()
        self.answer = LaterAnswer()

    def __call__(self, arrived: bool = False) -> None:
        handlers = self._handlers
        try:
            response = handlers._offset_reset(self._request, self._header)
            if response is None:
                response, gated = handlers._read(self._request, self._header, self._filter)
                # Messages past the confirm offset (controller mode) are stored but not readable
                # yet: look again shortly instead of sending the consumer straight back.
                waited_ms = (time.monotonic() - self._started) * 1000
                if gated and waited_ms + _GATED_RECHECK_MS < self._hold_ms:
                    asyncio.get_running_loop().call_later(_GATED_RECHECK_MS / 1000, self)
                    return
                response = handlers._counted(self._header, response)
        except Exception as exc:
            handlers._unparked(self._connection_id)
            self.answer.fail(exc)
            return
        handlers._unparked(self._connection_id)
        self.answer.give(response)


@cache
def memory_bytes() -> int:
    """The host's physical memory (RocketMQ's TOTAL_PHYSICAL_MEMORY_SIZE)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30
