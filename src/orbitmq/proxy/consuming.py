"""ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue, auto-renew.

Receive pops from every queue of the broker the request's queue names (queue -1, as the Java
proxy does), so a consumer never long-polls an empty queue while another has messages. Its
bounds are the Java proxy's: the poll time is clamped to [min, max] and to the call's
remaining deadline (ILLEGAL_POLLING_TIME when less than the minimum is left); a receive without
auto-renew asks for an invisible time in [minInvisibleTimeMillsForRecv, maxInvisibleTimeMills]
(ILLEGAL_INVISIBLE_TIME otherwise); an auto-renewed one gets ``defaultInvisibleTimeMills``. The
stream is: one status frame, the messages, one delivery-timestamp frame (P12).

The receipt handle is the message's ``POP_CK`` (``protocol.pop.ExtraInfo``) plus its
commit-log offset: the ``POP_CK`` the broker set on a message it popped from the group's pop
retry topic (a revived message, retry flag "1"), else one built from the pop answer, as the
Java proxy does. Acks, changes and dead-letter forwards go to the broker the handle names with
the topic the client received from and that handle; the broker finds the retry topic from the
handle's retry flag (``protocol.pop.real_topic``). The Java proxy names the retry topic itself;
OrbitMQ's does not, so that a broker with ACL checks the consumer's own topic and group, not
a retry topic no account is granted. Auto-renewed handles are keyed by the topic their message
was popped from. A broker's NO_MESSAGE (expired, or already finished) becomes
INVALID_RECEIPT_HANDLE. A change answers with the
handle whatever happens (P10): the new one, or the old one with the error.

Auto-renew (``broker.pop.renew``): every auto-renewed delivery is renewed before its deadline
while its client lives; when the client is gone its deliveries are made visible at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any

from orbitmq.broker.pop.renew import HandleKey
from orbitmq.errors import NoRouteError, RemoteProtocolError, RemotingError
from orbitmq.model.message import MessageConst, MessageExt
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import ConsumerSendMsgBackRequestHeader
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.protocol.pop import (
    INIT_MODE_MAX,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    decode_offset_info,
    popped_topic,
    real_topic,
)
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy.codes import from_remoting, status
from orbitmq.proxy.convert import resource_name, stored_to_grpc
from orbitmq.proxy.core import CallMeta, ProxyCore
from orbitmq.proxy.validation import check_group, check_topic, parse_receipt_handle

__all__ = ["ConsumerActivity"]

logger = logging.getLogger(__name__)

POP_BATCH_MAX = 32
_DEADLINE_MARGIN_MS = 200
"""Time a receive keeps in hand to send its answer before the client's deadline."""
_ILLEGAL_POLLING_TIME_SINCE = (5, 0, 3)


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split("."):
        digits = "".join(char for char in part if char.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


class ConsumerActivity:
    """The consumer RPCs of one proxy, and its auto-renew driver."""

    def __init__(self, core: ProxyCore) -> None:
        self._core = core
        self._background: set[asyncio.Future[Any]] = set()

    # -- receive ------------------------------------------------------------------------------

    async def receive_message(
        self, meta: CallMeta, request: spb.ReceiveMessageRequest, remaining_s: float | None
    ) -> AsyncIterator[spb.ReceiveMessageResponse]:
        core = self._core
        config = core.config
        topic = resource_name(request.message_queue.topic)
        group = resource_name(request.group)
        invalid = check_group(request.group) or check_topic(request.message_queue.topic)
        if invalid is not None:
            yield spb.ReceiveMessageResponse(status=status(invalid.code, invalid.message))
            return
        remaining_ms = int(remaining_s * 1000) if remaining_s is not None else config.max_long_polling_ms * 2
        if request.HasField("long_polling_timeout"):
            poll_ms = request.long_polling_timeout.ToMilliseconds()
        else:
            poll_ms = remaining_ms - config.broker_request_timeout_ms
        poll_ms = min(max(poll_ms, config.min_long_polling_ms), config.max_long_polling_ms)
        remaining_ms -= _DEADLINE_MARGIN_MS
        if poll_ms > remaining_ms:
            if remaining_ms < config.min_long_polling_ms:
                code = pb.ILLEGAL_POLLING_TIME
                if _version_tuple(meta.version) < _ILLEGAL_POLLING_TIME_SINCE:
                    code = pb.BAD_REQUEST
                yield spb.ReceiveMessageResponse(
                    status=status(code, "the deadline left is not enough for polling")
                )
                return
            poll_ms = remaining_ms
        if request.auto_renew:
            invisible_ms = config.default_invisible_time_ms
        else:
            invisible_ms = request.invisible_duration.ToMilliseconds()
            if not config.min_invisible_time_ms_for_recv <= invisible_ms <= config.max_invisible_time_ms:
                yield spb.ReceiveMessageResponse(
                    status=status(
                        pb.ILLEGAL_INVISIBLE_TIME,
                        f"invisible time {invisible_ms} ms is outside [{config.min_invisible_time_ms_for_recv}, "
                        f"{config.max_invisible_time_ms}]",
                    )
                )
                return
        async for frame in self._pop(meta, request, group, topic, poll_ms, invisible_ms):
            yield frame

    async def _pop(
        self,
        meta: CallMeta,
        request: spb.ReceiveMessageRequest,
        group: str,
        topic: str,
        poll_ms: int,
        invisible_ms: int,
    ) -> AsyncIterator[spb.ReceiveMessageResponse]:
        core = self._core
        broker_name = request.message_queue.broker.name or await core.gateway.any_broker(topic)
        if not broker_name:
            yield spb.ReceiveMessageResponse(
                status=status(pb.TOPIC_NOT_FOUND, f"topic {topic} has no readable queue")
            )
            return
        policy = await core.gateway.group_policy(group, broker_name)
        expression = request.filter_expression
        header = PopMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=min(max(request.batch_size, 1), POP_BATCH_MAX),
            invisible_time=invisible_ms,
            poll_time=poll_ms,
            born_time=core.clock_ms(),
            init_mode=INIT_MODE_MAX,
            exp_type="SQL92" if expression.type == pb.SQL else "TAG",
            exp=expression.expression or "*",
            order=policy.fifo,
            attempt_id=request.attempt_id if request.HasField("attempt_id") else None,
        )
        command = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext())
        pop = asyncio.ensure_future(
            core.gateway.invoke(broker_name, command, poll_ms + core.config.broker_request_timeout_ms)
        )
        try:
            response = await asyncio.shield(pop)
        except asyncio.CancelledError:
            # The client left while the broker was still polling: whatever that pop hands out
            # later must not wait out its invisible time for a receiver that is gone.
            pop.add_done_callback(lambda done: self._release_orphaned_pop(done, group, topic, broker_name))
            raise
        except (NoRouteError, RemotingError) as exc:
            yield spb.ReceiveMessageResponse(status=status(pb.PROXY_TIMEOUT, str(exc)))
            return
        if response.code != ResponseCode.SUCCESS:
            code = from_remoting(response.code)
            yield spb.ReceiveMessageResponse(status=status(code, response.remark or "no new message"))
            return
        try:
            frames = self._messages(meta, request, group, topic, broker_name, response)
        except RemoteProtocolError as exc:
            yield spb.ReceiveMessageResponse(
                status=status(pb.INTERNAL_SERVER_ERROR, f"broker answered badly: {exc}")
            )
            return
        if core.sessions.get(meta.client_id) is None:
            # The client terminated while its receive was polling: hand the messages back.
            self._release_messages(group, topic, frames)
            yield spb.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "the client has terminated"))
            return
        try:
            yield spb.ReceiveMessageResponse(status=status(pb.OK))
            for message in frames:
                yield spb.ReceiveMessageResponse(message=message)
            done = spb.ReceiveMessageResponse()
            done.delivery_timestamp.FromMilliseconds(core.clock_ms())
            yield done
        except (asyncio.CancelledError, GeneratorExit):
            self._release_messages(group, topic, frames)
            raise

    def _messages(
        self,
        meta: CallMeta,
        request: spb.ReceiveMessageRequest,
        group: str,
        topic: str,
        broker_name: str,
        response: RemotingCommand,
    ) -> list[pb.Message]:
        core = self._core
        header = PopMessageResponseHeader.from_ext(response.ext_fields)
        now_ms = core.clock_ms()
        messages: list[pb.Message] = []
        stored_messages = decode_stored_messages(response.body, decompress=True)
        for stored, handle in zip(
            stored_messages, _handles(header, stored_messages, broker_name), strict=True
        ):
            stored.properties.pop(MessageConst.POP_CK, None)
            receipt_handle = handle.encode()
            if request.auto_renew:
                core.renewals.add(
                    meta.client_id, _renew_key(group, topic, handle), receipt_handle,
                    header.pop_time + header.invisible_time, now_ms,
                )  # fmt: skip
            messages.append(stored_to_grpc(stored, receipt_handle))
        return messages

    def _release_orphaned_pop(
        self, pop: asyncio.Future[RemotingCommand], group: str, topic: str, broker_name: str
    ) -> None:
        if pop.cancelled() or pop.exception() is not None:
            return
        response = pop.result()
        if response.code != ResponseCode.SUCCESS:
            return
        try:
            header = PopMessageResponseHeader.from_ext(response.ext_fields)
            handles = _handles(header, decode_stored_messages(response.body, decode_body=False), broker_name)
        except RemoteProtocolError:
            return
        self._spawn_release(group, topic, handles)

    def _release_messages(self, group: str, topic: str, messages: list[pb.Message]) -> None:
        handles = []
        for message in messages:
            try:
                handles.append(ExtraInfo.decode(message.system_properties.receipt_handle))
            except RemoteProtocolError:
                continue
        self._spawn_release(group, topic, handles)

    def _spawn_release(self, group: str, topic: str, handles: list[ExtraInfo]) -> None:
        if not handles:
            return
        logger.info("releasing %d messages of %s popped for a receiver that left", len(handles), topic)
        for handle in handles:
            key = _renew_key(group, topic, handle)
            for owner in self._core.renewals.owners_of(key):
                self._core.renewals.remove(owner, key)
        task = asyncio.ensure_future(
            asyncio.gather(
                *(self.change(group, topic, handle, 0) for handle in handles), return_exceptions=True
            )
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- ack, change, dead letter --------------------------------------------------------------

    async def ack_message(self, meta: CallMeta, request: spb.AckMessageRequest) -> spb.AckMessageResponse:
        group = resource_name(request.group)
        topic = resource_name(request.topic)
        invalid = check_group(request.group) or check_topic(request.topic)
        if invalid is not None:
            return spb.AckMessageResponse(status=status(invalid.code, invalid.message))
        entries = []
        outcomes = await asyncio.gather(
            *(self._ack_one(meta, group, topic, entry.receipt_handle) for entry in request.entries)
        )
        for entry, (code, remark) in zip(request.entries, outcomes, strict=True):
            entries.append(
                spb.AckMessageResultEntry(
                    message_id=entry.message_id,
                    receipt_handle=entry.receipt_handle,
                    status=status(code, remark),
                )
            )
        codes = {entry.status.code for entry in entries}
        if not entries:
            top = status(pb.BAD_REQUEST, "no entry to acknowledge")
        elif len(codes) == 1:
            top = entries[0].status
        else:
            top = status(pb.MULTIPLE_RESULTS, "the entries had different outcomes")
        return spb.AckMessageResponse(status=top, entries=entries)

    async def _ack_one(
        self, meta: CallMeta, group: str, topic: str, receipt_handle: str
    ) -> tuple[pb.Code, str]:
        try:
            handle = parse_receipt_handle(receipt_handle)
        except RemoteProtocolError as exc:
            return pb.INVALID_RECEIPT_HANDLE, str(exc)
        if not await self._core.gateway.knows_broker(handle.broker_name, topic):
            return pb.INVALID_RECEIPT_HANDLE, _unknown_broker(handle)
        self._core.renewals.remove(meta.client_id, _renew_key(group, topic, handle))
        header = AckMessageRequestHeader(group, topic, handle.queue_id, receipt_handle, handle.queue_offset)
        try:
            response = await self._core.gateway.invoke(
                handle.broker_name, RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext())
            )
        except (NoRouteError, RemotingError) as exc:
            return pb.PROXY_TIMEOUT, str(exc)
        if response.code == ResponseCode.SUCCESS:
            return pb.OK, "OK"
        return from_remoting(response.code), response.remark or "ack failed"

    async def change_invisible_duration(
        self, meta: CallMeta, request: spb.ChangeInvisibleDurationRequest
    ) -> spb.ChangeInvisibleDurationResponse:
        group = resource_name(request.group)
        topic = resource_name(request.topic)
        old = request.receipt_handle
        invalid = check_group(request.group) or check_topic(request.topic)
        if invalid is not None:
            return spb.ChangeInvisibleDurationResponse(
                status=status(invalid.code, invalid.message), receipt_handle=old
            )
        invisible_ms = request.invisible_duration.ToMilliseconds()
        if not 0 <= invisible_ms <= self._core.config.max_invisible_time_ms:
            return spb.ChangeInvisibleDurationResponse(
                status=status(pb.ILLEGAL_INVISIBLE_TIME, f"invisible time {invisible_ms} ms is out of range"),
                receipt_handle=old,
            )
        try:
            handle = parse_receipt_handle(old)
        except RemoteProtocolError as exc:
            return spb.ChangeInvisibleDurationResponse(
                status=status(pb.INVALID_RECEIPT_HANDLE, str(exc)), receipt_handle=old
            )
        if not await self._core.gateway.knows_broker(handle.broker_name, topic):
            return spb.ChangeInvisibleDurationResponse(
                status=status(pb.INVALID_RECEIPT_HANDLE, _unknown_broker(handle)), receipt_handle=old
            )
        self._core.renewals.remove(meta.client_id, _renew_key(group, topic, handle))
        code, remark, renewed = await self.change(group, topic, handle, invisible_ms)
        return spb.ChangeInvisibleDurationResponse(status=status(code, remark), receipt_handle=renewed or old)

    async def change(
        self, group: str, topic: str, handle: ExtraInfo, invisible_ms: int
    ) -> tuple[pb.Code, str, str | None]:
        """CHANGE_MESSAGE_INVISIBLETIME for one handle: the code, a remark and the new handle."""
        header = ChangeInvisibleTimeRequestHeader(
            group, popped_topic(topic, group), handle.queue_id, handle.encode(), handle.queue_offset,
            invisible_ms,
        )  # fmt: skip
        try:
            response = await self._core.gateway.invoke(
                handle.broker_name,
                RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext()),
            )
        except (NoRouteError, RemotingError) as exc:
            return pb.PROXY_TIMEOUT, str(exc), None
        if response.code != ResponseCode.SUCCESS:
            return from_remoting(response.code), response.remark or "change failed", None
        answer = ChangeInvisibleTimeResponseHeader.from_ext(response.ext_fields)
        renewed = ExtraInfo(
            handle.ck_queue_offset, answer.pop_time, answer.invisible_time, answer.revive_qid, handle.retry,
            handle.broker_name, handle.queue_id, handle.queue_offset, handle.commit_log_offset,
        )  # fmt: skip
        return pb.OK, "OK", renewed.encode()

    async def forward_to_dead_letter_queue(
        self, meta: CallMeta, request: spb.ForwardMessageToDeadLetterQueueRequest
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        group = resource_name(request.group)
        topic = resource_name(request.topic)
        invalid = check_group(request.group) or check_topic(request.topic)
        if invalid is not None:
            return spb.ForwardMessageToDeadLetterQueueResponse(status=status(invalid.code, invalid.message))
        try:
            handle = parse_receipt_handle(request.receipt_handle)
        except RemoteProtocolError as exc:
            return spb.ForwardMessageToDeadLetterQueueResponse(
                status=status(pb.INVALID_RECEIPT_HANDLE, str(exc))
            )
        if handle.commit_log_offset is None:
            return spb.ForwardMessageToDeadLetterQueueResponse(
                status=status(pb.INVALID_RECEIPT_HANDLE, "receipt handle has no commit-log offset")
            )
        if not await self._core.gateway.knows_broker(handle.broker_name, topic):
            return spb.ForwardMessageToDeadLetterQueueResponse(
                status=status(pb.INVALID_RECEIPT_HANDLE, _unknown_broker(handle))
            )
        back = ConsumerSendMsgBackRequestHeader(
            commit_log_offset=handle.commit_log_offset,
            group=group,
            delay_level=-1,
            origin_msg_id=request.message_id,
            origin_topic=topic,
            max_reconsume_times=max(request.max_delivery_attempts - 1, 0),
        )
        try:
            response = await self._core.gateway.invoke(
                handle.broker_name, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, back.to_ext())
            )
        except (NoRouteError, RemotingError) as exc:
            return spb.ForwardMessageToDeadLetterQueueResponse(status=status(pb.PROXY_TIMEOUT, str(exc)))
        if response.code != ResponseCode.SUCCESS:
            return spb.ForwardMessageToDeadLetterQueueResponse(
                status=status(from_remoting(response.code), response.remark or "forward to DLQ failed")
            )
        # Stored in the DLQ: now finish the delivery. A handle that expired meanwhile only means
        # the message may be delivered once more (at least once); the forward itself succeeded.
        code, remark = await self._ack_one(meta, group, topic, request.receipt_handle)
        if code not in (pb.OK, pb.INVALID_RECEIPT_HANDLE):
            logger.info("acking %s after its move to the DLQ failed: %s", request.message_id, remark)
        return spb.ForwardMessageToDeadLetterQueueResponse(status=status(pb.OK))

    # -- auto-renew ---------------------------------------------------------------------------

    async def renew_due(self) -> None:
        """Renew every auto-renewed delivery close to its deadline (one round)."""
        core = self._core
        now_ms = core.clock_ms()
        for owner in core.renewals.owners():
            if core.sessions.get(owner) is None:
                await self.release(owner)  # its client is gone: stop renewing, hand them back
        for owner, key, entry, step_ms in core.renewals.due(now_ms):
            broker_name, group, topic, _, _ = key
            try:
                handle = ExtraInfo.decode(entry.receipt_handle)
            except RemoteProtocolError:
                core.renewals.failed(owner, key, entry, gone=True)
                continue
            code, remark, _ = await self.change(group, topic, handle, step_ms)
            if code == pb.OK:
                core.renewals.renewed(entry, core.clock_ms() + step_ms)
            else:
                logger.info(
                    "renewing %s/%d offset %d for %s failed: %s", topic, key[3], key[4], owner, remark
                )
                core.renewals.failed(owner, key, entry, gone=code == pb.INVALID_RECEIPT_HANDLE)

    async def release(self, client_id: str) -> None:
        """The client went away: make its auto-renewed deliveries visible again now."""
        released = self._core.renewals.release(client_id)
        if released:
            logger.info("client %s gone: releasing %d deliveries", client_id, len(released))
        changes = []
        for (_, group, topic, _, _), entry in released:
            try:
                handle = ExtraInfo.decode(entry.receipt_handle)
            except RemoteProtocolError:
                continue
            changes.append(self.change(group, topic, handle, 0))
        for outcome in await asyncio.gather(*changes, return_exceptions=True):
            if isinstance(outcome, BaseException) or outcome[0] != pb.OK:
                logger.info("releasing a delivery of client %s failed: %s", client_id, outcome)


def _unknown_broker(handle: ExtraInfo) -> str:
    return f"receipt handle names broker {handle.broker_name!r}, which no route of this cluster has"


def _handles(header: PopMessageResponseHeader, stored: list[MessageExt], broker_name: str) -> list[ExtraInfo]:
    """Each popped message's handle: the ``POP_CK`` the broker set (a message popped from the
    retry topic), else built from the answer's offsets; with the message's commit-log offset.

    Raises:
        RemoteProtocolError: the answer's offsets info or a ``POP_CK`` does not parse.
    """
    start_offsets = decode_offset_info(header.start_offset_info)
    handles = []
    for message in stored:
        pop_ck = message.properties.get(MessageConst.POP_CK)
        if pop_ck:
            given = ExtraInfo.decode(pop_ck)
            handles.append(dataclasses.replace(given, commit_log_offset=message.commit_log_offset))
            continue
        start = start_offsets.get(message.queue_id, [message.queue_offset])[0]
        handles.append(
            ExtraInfo(
                start,
                header.pop_time,
                header.invisible_time,
                header.revive_qid,
                "0",
                broker_name,
                message.queue_id,
                message.queue_offset,
                message.commit_log_offset,
            )  # fmt: skip
        )
    return handles


def _renew_key(group: str, topic: str, handle: ExtraInfo) -> HandleKey:
    """The auto-renew key of a handle: its message names the topic it was popped from."""
    return (
        handle.broker_name,
        group,
        real_topic(topic, group, handle.retry),
        handle.queue_id,
        handle.queue_offset,
    )
