"""Request-reply (operations-features §6): SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325).

A responder sends the reply like any message (the V1 or V2 send header) to
``<cluster>_REPLY_TOPIC``, with the request's ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and
``TTL`` copied. The broker finds the requester's connection (a producer that heartbeated with
that client id), adds ``PUSH_REPLY_TIME`` and calls it with PUSH_REPLY_MESSAGE_TO_CLIENT (326):
the reply's header fields (ReplyMessageRequestHeader) and its body. With
``storeReplyMessageEnable`` (the default) the reply is also stored in the reply topic, through
the ordinary send path. The answer is SUCCESS when the push succeeded (``msgId`` ``0`` when the
reply was not stored), else SYSTEM_ERROR naming why the requester could not be reached.
"""

from __future__ import annotations

import logging

from orbitmq.broker.handlers import BrokerState, now_ms
from orbitmq.broker.handlers.send import SendHandlers, _read_send_header
from orbitmq.errors import OrbitError
from orbitmq.model.message import MessageConst
from orbitmq.protocol.admin_headers import ReplyMessageRequestHeader
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import SendMessageRequestHeader
from orbitmq.protocol.properties import decode_properties, encode_properties
from orbitmq.transport.server import RequestContext

__all__ = ["ReplyHandlers"]

logger = logging.getLogger(__name__)

REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
PUSH_TIMEOUT_MS = 3_000


class ReplyHandlers:
    """Replies of request-reply: pushed to the requester, and stored."""

    def __init__(self, state: BrokerState, send: SendHandlers) -> None:
        self._state = state
        self._send = send

    async def send_reply_message(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = _read_send_header(request)
        properties = decode_properties(header.properties or "")
        properties[PUSH_REPLY_TIME] = str(now_ms())
        pushed, remark = await self._push(ctx, header, properties, request.body)
        state = self._state
        if state.config.store_reply_message_enable:
            stored = RemotingCommand.request(
                RequestCode.SEND_MESSAGE,
                {**header.to_ext(), "properties": encode_properties(properties)},
                request.body,
            )
            stored.opaque = request.opaque
            response = await self._send.send_message(ctx, stored)
            response.opaque = request.opaque
            # A send answers the message's UNIQ_KEY as transactionId; RocketMQ's reply answer does not.
            response.ext_fields.pop("transactionId", None)
            if response.code != ResponseCode.SUCCESS or pushed:
                return response
            return request.response(ResponseCode.SYSTEM_ERROR, remark, dict(response.ext_fields))
        if not pushed:
            return request.response(ResponseCode.SYSTEM_ERROR, remark, {})
        ext = {
            "msgId": "0",
            "queueId": "0",
            "queueOffset": "0",
            MessageConst.MSG_REGION: state.config.region_id,
            MessageConst.TRACE_SWITCH: "true" if state.config.trace_on else "false",
        }
        return request.response(ResponseCode.SUCCESS, None, ext)

    async def _push(
        self, ctx: RequestContext, header: SendMessageRequestHeader, properties: dict[str, str], body: bytes
    ) -> tuple[bool, str]:
        client_id = properties.get(REPLY_TO_CLIENT, "")
        entry = self._state.producers.find_by_client_id(client_id) if client_id else None
        if entry is None or entry.channel.closed:
            return (
                False,
                f"push reply message to {client_id or '(no REPLY_TO_CLIENT)'} failed: the requester is not connected",
            )
        store_host, store_port = self._state.store_host
        push_header = ReplyMessageRequestHeader(
            producer_group=header.producer_group,
            topic=header.topic,
            default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums,
            queue_id=max(header.queue_id, 0),
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            flag=header.flag,
            born_host=f"{ctx.peer_host}:{ctx.peer_port}",
            store_host=f"{store_host}:{store_port}",
            store_timestamp=now_ms(),
            properties=encode_properties(properties),
            reconsume_times=header.reconsume_times,
            unit_mode=header.unit_mode,
        )
        request = RemotingCommand.request(
            RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, push_header.to_ext(), body
        )
        try:
            answer = await entry.channel.send_request(request, PUSH_TIMEOUT_MS)
        except OrbitError as exc:
            return False, f"push reply message to {client_id} failed: {exc}"
        if answer.code != ResponseCode.SUCCESS:
            return False, f"push reply message to {client_id} failed: {answer.code} {answer.remark}"
        return True, ""
