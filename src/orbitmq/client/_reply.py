"""Request-reply on the client side (operations-features §6), sans-IO helpers.

A requester (``Producer.request``) stamps ``CORRELATION_ID`` (a random UUID),
``REPLY_TO_CLIENT`` (its client id) and ``TTL`` (the timeout, ms) and waits on a future keyed
by the correlation id. The responder builds the reply with :func:`create_reply_message` (topic
``<cluster of the request>_REPLY_TOPIC``, ``MSG_TYPE=reply`` and the three properties copied)
and sends it with any producer; the broker pushes it to the requester as
PUSH_REPLY_MESSAGE_TO_CLIENT, which :func:`reply_from_push` turns back into a message
(inflated, with ``ARRIVE_TIME``) for the client instance to complete the future with.
"""

from __future__ import annotations

import time
import zlib

from orbitmq.errors import ClientError, RemoteProtocolError
from orbitmq.model.message import Message, MessageConst, MessageExt, SysFlag
from orbitmq.protocol.admin_headers import ReplyMessageRequestHeader
from orbitmq.protocol.properties import decode_properties

__all__ = ["create_reply_message", "reply_from_push"]


def create_reply_message(request: Message, body: bytes) -> Message:
    """The reply to ``request`` carrying ``body`` (RocketMQ's ``MessageUtil.createReplyMessage``).

    Raises:
        ClientError: ``request`` did not come from a broker (it has no CLUSTER) or is not a
            request (it has no CORRELATION_ID / REPLY_TO_CLIENT).
    """
    properties = request.properties
    cluster = properties.get(MessageConst.CLUSTER)
    if not cluster:
        raise ClientError(f"message {request.uniq_key} has no CLUSTER property: it is not a received request")
    missing = [
        name
        for name in (MessageConst.CORRELATION_ID, MessageConst.MESSAGE_REPLY_TO_CLIENT)
        if not properties.get(name)
    ]
    if missing:
        raise ClientError(f"message {request.uniq_key} is not a request: no {', '.join(missing)}")
    reply = Message(f"{cluster}_REPLY_TOPIC", body)
    reply.properties[MessageConst.MESSAGE_TYPE] = MessageConst.REPLY_MESSAGE_FLAG
    for name in (MessageConst.CORRELATION_ID, MessageConst.MESSAGE_REPLY_TO_CLIENT, MessageConst.MESSAGE_TTL):
        if name in properties:
            reply.properties[name] = properties[name]
    return reply


def _host(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        return host, int(port)
    except ValueError:
        return text, 0


def reply_from_push(header: ReplyMessageRequestHeader, body: bytes) -> MessageExt:
    """The reply a PUSH_REPLY_MESSAGE_TO_CLIENT carries.

    Raises:
        RemoteProtocolError: a compressed body that does not inflate.
    """
    if header.sys_flag & SysFlag.COMPRESSED:
        try:
            body = zlib.decompress(body)
        except zlib.error as exc:
            raise RemoteProtocolError(f"reply body does not inflate: {exc}") from exc
    properties = decode_properties(header.properties or "")
    properties[MessageConst.REPLY_MESSAGE_ARRIVE_TIME] = str(time.time_ns() // 1_000_000)
    return MessageExt(
        topic=header.topic,
        body=body,
        flag=header.flag,
        properties=properties,
        queue_id=header.queue_id,
        sys_flag=header.sys_flag,
        born_timestamp=header.born_timestamp,
        born_host=_host(header.born_host),
        store_timestamp=header.store_timestamp,
        store_host=_host(header.store_host),
        reconsume_times=header.reconsume_times,
    )
