"""Admin requests the broker answers by asking its clients, and the live offset reset.

* GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309): the admin names a group
  and a client id; the broker finds that client's connection and calls it with the same request
  (for 309 with the message, read from the store by its offsetMsgId, as the body), and answers
  with the client's response. A client that is not connected answers SYSTEM_ERROR ``The
  Consumer <group> <client> not online``; one that does not answer in time, SYSTEM_ERROR naming
  the timeout.
* INVOKE_BROKER_TO_RESET_OFFSET (222), RocketMQ 5's server-side way (operations-features §5):
  the topic must exist (TOPIC_NOT_EXIST); a group the broker has never seen (no config, no
  committed offset, no online member) is reset too, as RocketMQ's broker does: the offsets set
  are where it starts when it comes. (``orbitmq admin consumer reset-offset`` refuses a group
  nobody knows itself, before asking the brokers.) Each queue's new offset is the first message stored at or after ``timestamp`` (-1: the queue's max offset,
  i.e. skip what accumulated), or the exact ``offset`` of one ``queueId``. Without ``isForce``
  an offset only moves back. The offsets are committed and held as pending resets
  (``broker.offsets``): the group's next pull of each queue answers PULL_OFFSET_MOVED with the
  new offset, whatever the client, and commits of the old position are ignored meanwhile, so an
  offline group starts from the new offset and an online one moves without a restart. Parked
  pulls of those queues are woken so the move is prompt. Then, as RocketMQ 4 did, every online
  consumer of the group also gets RESET_CONSUMER_CLIENT_OFFSET (220, oneway) with the offsets in
  the body form its language reads: the array form for the C++ client, Java's map form for the
  others. The answer is the new offsets (ResetOffsetBody).
"""

from __future__ import annotations

import logging

from orbitmq.broker.clients import ClientChannel
from orbitmq.broker.handlers import BrokerState
from orbitmq.errors import OrbitError, RemoteProtocolError
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.admin_bodies import encode_mq_offsets, encode_reset_offset_body
from orbitmq.protocol.admin_headers import ConsumeMessageDirectlyRequestHeader
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import GetConsumerRunningInfoRequestHeader, ResetOffsetRequestHeader
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.transport.server import RequestContext, ServerConnection

__all__ = ["ClientRelayHandlers"]

logger = logging.getLogger(__name__)

CALL_CLIENT_TIMEOUT_MS = 5_000
RESET_CLIENT_MIN_VERSION = 28
"""RocketMQ's V3_0_7_SNAPSHOT: older clients do not understand RESET_CONSUMER_CLIENT_OFFSET."""


class ClientRelayHandlers:
    """Requests relayed to a client of a group, and the server-side offset reset."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    def _channel(self, group: str, client_id: str) -> ClientChannel[ServerConnection] | None:
        for entry in self._state.consumers.channels(group):
            if entry.client_id == client_id and not entry.channel.closed:
                return entry
        return None

    async def _call_client(
        self, request: RemotingCommand, group: str, client_id: str, body: bytes | None = None
    ) -> RemotingCommand:
        entry = self._channel(group, client_id)
        if entry is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        relayed = RemotingCommand.request(
            request.code, dict(request.ext_fields), request.body if body is None else body
        )
        try:
            answer = await entry.channel.send_request(relayed, CALL_CLIENT_TIMEOUT_MS)
        except OrbitError as exc:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> failed: {exc}"
            )
        return request.response(answer.code, answer.remark, dict(answer.ext_fields), answer.body)

    async def get_consumer_running_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
        return await self._call_client(request, header.consumer_group, header.client_id)

    async def consume_message_directly(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = ConsumeMessageDirectlyRequestHeader.from_ext(request.ext_fields)
        try:
            commit_log_offset = decode_offset_msg_id(header.msg_id).commit_log_offset
        except RemoteProtocolError as exc:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"msgId {header.msg_id} is not an offsetMsgId: {exc}"
            )
        record = self._state.store.read_message(commit_log_offset)
        if record is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"no message with msgId {header.msg_id} on this broker"
            )
        request.ext_fields["brokerName"] = self._state.config.broker_name
        return await self._call_client(request, header.consumer_group, header.client_id, bytes(record))

    # -- live offset reset ------------------------------------------------------------------------

    async def invoke_broker_to_reset_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = ResetOffsetRequestHeader.from_ext(request.ext_fields)
        state = self._state
        topic_config = state.topics.get(header.topic)
        if topic_config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] does not exist")
        if header.queue_id is not None and header.queue_id >= 0:
            if header.queue_id >= topic_config.read_queue_nums:
                return request.response(
                    ResponseCode.SYSTEM_ERROR,
                    f"queueId[{header.queue_id}] is illegal, topic[{header.topic}] has "
                    f"{topic_config.read_queue_nums} queues",
                )
            queue_ids = [header.queue_id]
        else:
            queue_ids = list(range(topic_config.read_queue_nums))
        targets: dict[int, int] = {}
        for queue_id in queue_ids:
            target = self._target_offset(header, queue_id)
            if isinstance(target, str):
                return request.response(ResponseCode.SYSTEM_ERROR, target)
            targets[queue_id] = target
        broker_name = state.config.broker_name
        offsets: dict[MessageQueue, int] = {}
        for queue_id, target in targets.items():
            if state.config.use_server_side_reset_offset:
                state.offsets.assign_reset(header.group, header.topic, queue_id, target)
            else:
                state.offsets.commit(header.group, header.topic, queue_id, target)
            # A pull parked at the old position answers now, so its consumer moves at once.
            state.long_polling.wake_queue(header.topic, queue_id)
            offsets[MessageQueue(header.topic, broker_name, queue_id)] = target
        logger.info("group %s reset on %s to %s", header.group, header.topic, sorted(targets.items()))
        self._notify_consumers(header, offsets)
        return request.response(ResponseCode.SUCCESS, None, {}, encode_mq_offsets(offsets))

    def _target_offset(self, header: ResetOffsetRequestHeader, queue_id: int) -> int | str:
        """The queue's new offset, or the remark refusing it."""
        store = self._state.store
        min_offset = store.get_min_queue_offset(header.topic, queue_id)
        max_offset = store.get_max_queue_offset(header.topic, queue_id)
        if (
            header.queue_id is not None
            and header.queue_id >= 0
            and header.offset is not None
            and header.offset >= 0
        ):
            if not min_offset <= header.offset <= max_offset:
                return f"Target offset {header.offset} not in consume queue range [{min_offset}-{max_offset}]"
            return header.offset
        if header.timestamp < 0:
            target = max_offset
        else:
            target = store.get_queue_offset_by_time(header.topic, queue_id, header.timestamp)
        target = max(target, 0)
        current = self._state.offsets.query(header.group, header.topic, queue_id)
        if current is not None and not header.is_force and target >= current:
            return current
        return target

    def _notify_consumers(self, header: ResetOffsetRequestHeader, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (oneway) to every online member, in its language's form."""
        ext = ResetOffsetRequestHeader(header.topic, header.group, header.timestamp, False).to_ext()
        for entry in self._state.consumers.channels(header.group):
            if entry.channel.closed or entry.version < RESET_CLIENT_MIN_VERSION:
                continue
            body = encode_reset_offset_body(offsets, array_form=entry.language.upper() == "CPP")
            try:
                entry.channel.send_oneway(
                    RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, body)
                )
            except OrbitError as exc:
                logger.info(
                    "cannot tell %s of group %s about the reset: %s", entry.client_id, header.group, exc
                )
