"""POP_MESSAGE (200050), ACK_MESSAGE (200051) and CHANGE_MESSAGE_INVISIBLETIME (200053).

RocketMQ 5's consumption without rebalancing, on the remoting port, served by the broker's
POP engine (``broker.pop``); the gRPC proxy consumes through these same three requests. The
formats are in ``protocol.pop``.

| refusal | code |
| --- | --- |
| a slave broker (POP state changes are the master's to journal) | SLAVE_NOT_AVAILABLE |
| broker or topic not readable | NO_PERMISSION |
| unknown topic | TOPIC_NOT_EXIST |
| unknown group with autoCreateSubscriptionGroup off, or consumption disabled | SUBSCRIPTION_GROUP_NOT_EXIST / NO_PERMISSION |
| queue id outside the topic, more than 32 messages, negative times | INVALID_PARAMETER |
| a SQL92 subscription while ``enablePropertyFilter`` is off (as on the pull path) | SYSTEM_ERROR |
| an unknown expression type, or an expression that does not compile (position named) | SUBSCRIPTION_PARSE_FAILED |
| malformed receipt handle (``extraInfo``) | MESSAGE_ILLEGAL |
| receipt handle expired, or of a delivery already finished or replaced | NO_MESSAGE |

A pop that finds nothing answers POLLING_TIMEOUT, after waiting its poll time if it asked to
wait, as RocketMQ does.

A message popped from the group's pop retry topic (a revived one, ``broker.pop.revive``) is
answered as RocketMQ's broker answers it (``popResponseReturnActualRetryTopic`` off): its record
names the topic the pop asked for, keeps its queue id and offset in the retry topic, and carries
its ``POP_CK`` (retry flag "1"); its offsets info entries have retry flag "1". An ack or change
of it names the retry topic, or the topic with that handle (``protocol.pop.real_topic``).
"""

from __future__ import annotations

import logging

from orbitmq.broker.config import BrokerRole
from orbitmq.broker.handlers import BrokerState
from orbitmq.broker.pop import (
    FilterExpressionError,
    HandleStatus,
    PopJournalError,
    PopRequest,
    PopService,
    PopStatus,
    build_filter,
)
from orbitmq.broker.pop.results import PoppedMessage, PopResult
from orbitmq.broker.validation import RETRY_GROUP_TOPIC_PREFIX, Rejection, check_group_name
from orbitmq.errors import LocalProtocolError, RemoteProtocolError
from orbitmq.model.message import MessageConst
from orbitmq.model.route import PERM_READ
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_codec import decode_stored_message, encode_stored_message
from orbitmq.protocol.pop import (
    RETRY_FLAG_NORMAL,
    RETRY_FLAG_V1,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    encode_offset_info,
    real_topic,
)
from orbitmq.transport.server import RequestContext

logger = logging.getLogger(__name__)

POP_BATCH_MAX = 32
"""Messages one pop may ask for (RocketMQ's limit)."""
POLL_TIME_MAX_MS = 60_000
"""Longest a pop waits for messages; longer poll times are cut to it."""


class PopHandlers:
    """The three POP requests."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    @property
    def _pop(self) -> PopService:
        pop = self._state.pop
        if pop is None:
            raise RuntimeError("POP request before the broker started its POP service")
        return pop

    async def pop_message(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = PopMessageRequestHeader.from_ext(request.ext_fields)
        rejection = self._check_master() or self._check_consume(
            header.topic, header.consumer_group, header.queue_id
        )
        if rejection is not None:
            return rejection.response(request)
        if not 0 < header.max_msg_nums <= POP_BATCH_MAX:
            return request.response(
                ResponseCode.INVALID_PARAMETER,
                f"maxMsgNums {header.max_msg_nums} is not 1..{POP_BATCH_MAX} (group {header.consumer_group})",
            )
        if header.invisible_time < 0 or header.poll_time < 0:
            return request.response(
                ResponseCode.INVALID_PARAMETER,
                f"invisibleTime {header.invisible_time} and pollTime {header.poll_time} must not be negative",
            )
        expression_type = (header.exp_type or "TAG").strip().upper()
        if expression_type == "SQL92" and not self._state.config.enable_property_filter:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {expression_type} "
                f"(enablePropertyFilter=false; group {header.consumer_group})",
            )
        try:
            message_filter = build_filter(header.exp_type, header.exp)
        except FilterExpressionError as exc:
            return request.response(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"group {header.consumer_group}: {exc}"
            )
        poll_ms = min(header.poll_time, POLL_TIME_MAX_MS)
        pop_request = PopRequest(
            group=header.consumer_group,
            topic=header.topic,
            queue_id=header.queue_id,
            batch_max=header.max_msg_nums,
            invisible_ms=header.invisible_time,
            poll_ms=poll_ms,
            init_mode=header.init_mode,
            fifo=header.order,
            message_filter=message_filter,
            attempt_id=header.attempt_id,
        )
        try:
            result = await self._pop.pop(pop_request)
        except PopJournalError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        offsets: dict[str, dict[int, list[int]]] = {RETRY_FLAG_NORMAL: {}, RETRY_FLAG_V1: {}}
        starts: dict[str, dict[int, list[int]]] = {RETRY_FLAG_NORMAL: {}, RETRY_FLAG_V1: {}}
        for message in result.messages:
            flag = RETRY_FLAG_NORMAL if message.topic == header.topic else RETRY_FLAG_V1
            offsets[flag].setdefault(message.queue_id, []).append(message.queue_offset)
            starts[flag].setdefault(message.queue_id, [message.queue_offset])
        response_header = PopMessageResponseHeader(
            pop_time=result.pop_time_ms,
            invisible_time=result.invisible_ms,
            revive_qid=0,
            rest_num=result.rest_num,
            start_offset_info=_offset_info(starts),
            msg_offset_info=_offset_info(offsets),
        )
        if result.status is PopStatus.FOUND:
            body = b"".join(
                message.record
                if message.topic == header.topic
                else self._as_popped(
                    header.topic, result, message, starts[RETRY_FLAG_V1][message.queue_id][0]
                )
                for message in result.messages
            )
            if not result.repeated:
                self._count_gets(header.consumer_group, header.topic, result.messages)
            return request.response(ResponseCode.SUCCESS, None, response_header.to_ext(), body)
        # RocketMQ answers POLLING_TIMEOUT whether or not the pop asked to wait, with both
        # offset infos present (empty when nothing was read).
        ext = {"startOffsetInfo": "", "msgOffsetInfo": "", **response_header.to_ext()}
        return request.response(ResponseCode.POLLING_TIMEOUT, "no new message", ext)

    def _as_popped(self, topic: str, result: PopResult, message: PoppedMessage, start_offset: int) -> bytes:
        """A message popped from the retry topic as the client gets it: under ``topic``, its
        ``POP_CK`` set (RocketMQ's broker re-encodes it so)."""
        try:
            stored, _ = decode_stored_message(message.record)
            handle = ExtraInfo(
                start_offset, result.pop_time_ms, result.invisible_ms, 0, RETRY_FLAG_V1,
                self._state.config.broker_name, message.queue_id, message.queue_offset,
            )  # fmt: skip
            stored.topic = topic
            stored.properties[MessageConst.POP_CK] = handle.encode()
            return encode_stored_message(stored)
        except (RemoteProtocolError, LocalProtocolError) as exc:
            logger.error("a message of %s could not be re-encoded for its pop: %s", message.topic, exc)
            return message.record

    def _count_gets(self, group: str, topic: str, messages: list[PoppedMessage]) -> None:
        """Counted like a pull (RocketMQ's PopMessageProcessor: incGroupGetNums/Size), first
        deliveries under ``topic``; a redelivery under the group's pop retry topic
        ``%RETRY%<group>_<topic>``, where RocketMQ pops it from, so ``statsAll``'s messages out of
        ``topic`` count each message once however often it comes back."""
        first = [message for message in messages if message.attempt <= 1 and message.topic == topic]
        again = [message for message in messages if message.attempt > 1 or message.topic != topic]
        for counted_topic, batch in ((topic, first), (f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}", again)):
            if batch:
                size_bytes = sum(len(message.record) for message in batch)
                self._state.stats.on_get(group, counted_topic, len(batch), size_bytes)

    async def ack_message(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = AckMessageRequestHeader.from_ext(request.ext_fields)
        handle = self._check_master() or self._parse_handle(header.extra_info)
        if isinstance(handle, Rejection):
            return handle.response(request)
        if self._state.topics.get(header.topic) is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        key = (
            header.consumer_group,
            real_topic(header.topic, header.consumer_group, handle.retry),
            header.queue_id,
        )
        try:
            statuses = await self._pop.ack(key, [(header.offset, handle.pop_time_ms)])
        except PopJournalError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        if statuses[0] is HandleStatus.VALID:
            return request.response(ResponseCode.SUCCESS, None, {})
        return _invalid_handle(request, header.topic, header.queue_id, header.offset, statuses[0])

    async def change_invisible_time(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = ChangeInvisibleTimeRequestHeader.from_ext(request.ext_fields)
        handle = self._check_master() or self._parse_handle(header.extra_info)
        if isinstance(handle, Rejection):
            return handle.response(request)
        if header.invisible_time < 0:
            return request.response(
                ResponseCode.INVALID_PARAMETER, f"invisibleTime {header.invisible_time} is negative"
            )
        if self._state.topics.get(header.topic) is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        key = (
            header.consumer_group,
            real_topic(header.topic, header.consumer_group, handle.retry),
            header.queue_id,
        )
        try:
            status, visible_at_ms = await self._pop.change_invisible(
                key, header.offset, handle.pop_time_ms, header.invisible_time
            )
        except PopJournalError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        if status is not HandleStatus.VALID:
            return _invalid_handle(request, header.topic, header.queue_id, header.offset, status)
        response_header = ChangeInvisibleTimeResponseHeader(
            pop_time=handle.pop_time_ms,
            invisible_time=visible_at_ms - handle.pop_time_ms,
            revive_qid=0,
        )
        return request.response(ResponseCode.SUCCESS, None, response_header.to_ext())

    # -- checks -------------------------------------------------------------------------------

    def _check_master(self) -> Rejection | None:
        if self._state.config.broker_role is BrokerRole.SLAVE:
            return Rejection(
                ResponseCode.SLAVE_NOT_AVAILABLE,
                f"broker {self._state.config.broker_name} is a slave: pop from its master",
            )
        return None

    def _check_consume(self, topic: str, group: str, queue_id: int) -> Rejection | None:
        state = self._state
        if not state.config.broker_permission & PERM_READ:
            return Rejection(
                ResponseCode.NO_PERMISSION, f"the broker[{state.config.broker_name}] pop message is forbidden"
            )
        illegal_group = check_group_name(group)
        if illegal_group is not None:
            return illegal_group
        topic_config = state.topics.get(topic)
        if topic_config is None:
            return Rejection(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not topic_config.perm & PERM_READ:
            return Rejection(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= topic_config.read_queue_nums or queue_id < -1:
            return Rejection(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] readQueueNums:[{topic_config.read_queue_nums}]",
            )
        group_config = state.groups.find_or_create(group, state.config.auto_create_subscription_group)
        if group_config is None:
            return Rejection(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] not exist"
            )
        if not group_config.consume_enable:
            return Rejection(
                ResponseCode.NO_PERMISSION, f"subscription group [{group}] no permission to consume"
            )
        return None

    @staticmethod
    def _parse_handle(extra_info: str) -> ExtraInfo | Rejection:
        try:
            return ExtraInfo.decode(extra_info)
        except RemoteProtocolError as exc:
            return Rejection(ResponseCode.MESSAGE_ILLEGAL, str(exc))


def _invalid_handle(
    request: RemotingCommand, topic: str, queue_id: int, offset: int, status: HandleStatus
) -> RemotingCommand:
    reason = "is expired" if status is HandleStatus.EXPIRED else "names no delivery in flight"
    return request.response(
        ResponseCode.NO_MESSAGE, f"receipt handle of {topic}/{queue_id} offset {offset} {reason}", {}
    )


def _offset_info(entries: dict[str, dict[int, list[int]]]) -> str | None:
    """``startOffsetInfo``/``msgOffsetInfo``: the topic's entries, then the retry topic's."""
    return (
        ";".join(encode_offset_info(by_queue, flag) for flag, by_queue in entries.items() if by_queue) or None
    )
