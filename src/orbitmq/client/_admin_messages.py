"""Admin lookups of stored messages: by id, by key, by queue offset, and their traces.

==========================  ======================================================================
operation                   requests
==========================  ======================================================================
view_message                VIEW_MESSAGE_BY_ID (33) to the broker an offsetMsgId names
query_messages              QUERY_MESSAGE (12) to each master hosting the topic
query_message_by_id         an offsetMsgId: VIEW_MESSAGE_BY_ID; otherwise the id is a UNIQ_KEY
                            (what producers return): QUERY_MESSAGE with ``_UNIQUE_KEY_QUERY`` on
                            the given topic, or on every user topic when none is given
message_at, messages_from   PULL_MESSAGE from a queue offset (no offset committed)
query_trace                 QUERY_MESSAGE on the trace topic by msgId, records decoded
                            (``mqadmin queryMsgTraceById``)
==========================  ======================================================================
"""

from __future__ import annotations

import time

from orbitmq.client._admin_core import AdminCore, gather_by, invoke, route_master_addrs
from orbitmq.client._record_decode import decode_records
from orbitmq.errors import RemoteProtocolError, TopicNotExistError, error_for_code
from orbitmq.model.message import MessageExt, MessageQueue
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.headers import (
    PullMessageRequestHeader,
    QueryMessageRequestHeader,
    ViewMessageRequestHeader,
)
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.protocol.trace_data import TraceRecord, decode_trace_records

__all__ = [
    "message_at",
    "messages_from",
    "query_message_by_id",
    "query_messages",
    "query_trace",
    "view_message",
]

QUERY_MAX_NUM = 64
_PULL_FLAG_SUBSCRIPTION = 0x4
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"


async def view_message(admin: AdminCore, offset_msg_id: str) -> MessageExt | None:
    """The message an offsetMsgId names, or None when the id is not one or has no message.

    Only brokers the name server knows are asked (an id that merely decodes as one, such as a
    UNIQ_KEY, would otherwise point anywhere).
    """
    try:
        decoded = decode_offset_msg_id(offset_msg_id)
    except RemoteProtocolError:
        return None
    addr = f"{decoded.host}:{decoded.port}"
    info = await admin.cluster_info()
    known = {
        broker_addr for data in info.broker_addr_table.values() for broker_addr in data.broker_addrs.values()
    }
    if addr not in known:
        return None
    ext = ViewMessageRequestHeader(decoded.commit_log_offset).to_ext()
    response = await invoke(admin, addr, RequestCode.VIEW_MESSAGE_BY_ID, ext)
    if response.code != ResponseCode.SUCCESS or not response.body:
        return None
    try:
        messages = decode_records(response.body)
    except RemoteProtocolError:
        return None
    if not messages or messages[0].offset_msg_id != offset_msg_id.upper():
        return None
    return messages[0]


async def query_messages(
    admin: AdminCore,
    topic: str,
    key: str,
    *,
    max_num: int = QUERY_MAX_NUM,
    begin_ms: int = 0,
    end_ms: int | None = None,
    unique_key: bool = False,
) -> list[MessageExt]:
    """Messages of ``topic`` indexed under ``key`` (a KEYS token, or with ``unique_key`` a
    UNIQ_KEY) stored in ``[begin_ms, end_ms]``, from every broker of the topic, newest first.

    Raises:
        TopicNotExistError: the name server does not know ``topic``.
    """
    header = QueryMessageRequestHeader(
        topic,
        key,
        max_num,
        begin_ms,
        end_ms if end_ms is not None else int(time.time() * 1000) + 60_000,
        unique_key_query=True if unique_key else None,
    )
    ext = header.to_ext()

    async def one(addr: str) -> list[MessageExt]:
        response = await invoke(admin, addr, RequestCode.QUERY_MESSAGE, ext)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return []
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, f"query {topic}#{key} on broker {addr}: {response.remark}")
        return decode_records(response.body)

    found = await gather_by((await route_master_addrs(admin, topic)).values(), one)
    messages = [message for items in found.values() for message in items]
    return sorted(messages, key=lambda message: message.store_timestamp, reverse=True)


async def query_message_by_id(admin: AdminCore, msg_id: str, topic: str | None = None) -> list[MessageExt]:
    """The message(s) with this id: an offsetMsgId first, else a UNIQ_KEY (see the module table)."""
    viewed = await view_message(admin, msg_id)
    if viewed is not None:
        return [viewed]
    topics = [topic] if topic else await _user_topics(admin)
    found: list[MessageExt] = []
    for name in topics:
        try:
            found += await query_messages(admin, name, msg_id, unique_key=True)
        except TopicNotExistError:
            if topic:
                raise
    return [message for message in found if message.msg_id == msg_id]


async def _user_topics(admin: AdminCore) -> list[str]:
    user_topics = getattr(admin, "user_topics", None)
    if user_topics is None:
        return []
    names: list[str] = await user_topics()
    return names


async def message_at(admin: AdminCore, mq: MessageQueue, queue_offset: int) -> MessageExt | None:
    """The message at ``queue_offset`` of ``mq`` (None when there is none there)."""
    addrs = await route_master_addrs(admin, mq.topic)
    addr = addrs.get(mq.broker_name)
    if addr is None:
        raise TopicNotExistError(
            ResponseCode.TOPIC_NOT_EXIST, f"broker {mq.broker_name} does not host {mq.topic}"
        )
    header = PullMessageRequestHeader(
        consumer_group=TOOLS_CONSUMER_GROUP,
        topic=mq.topic,
        queue_id=mq.queue_id,
        queue_offset=queue_offset,
        max_msg_nums=1,
        sys_flag=_PULL_FLAG_SUBSCRIPTION,
        subscription="*",
        expression_type="TAG",
    )
    response = await invoke(admin, addr, RequestCode.PULL_MESSAGE, header.to_ext())
    if response.code != ResponseCode.SUCCESS or not response.body:
        return None
    messages = decode_records(response.body)
    return messages[0] if messages and messages[0].queue_offset == queue_offset else None


async def messages_from(
    admin: AdminCore, mq: MessageQueue, queue_offset: int, max_count: int, end_offset: int | None = None
) -> list[MessageExt]:
    """Up to ``max_count`` messages of ``mq`` from ``queue_offset`` (before ``end_offset``)."""
    addr = (await route_master_addrs(admin, mq.topic)).get(mq.broker_name)
    if addr is None:
        raise TopicNotExistError(
            ResponseCode.TOPIC_NOT_EXIST, f"broker {mq.broker_name} does not host {mq.topic}"
        )
    found: list[MessageExt] = []
    while len(found) < max_count and (end_offset is None or queue_offset < end_offset):
        header = PullMessageRequestHeader(
            consumer_group=TOOLS_CONSUMER_GROUP,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=queue_offset,
            max_msg_nums=min(max_count - len(found), 32),
            sys_flag=_PULL_FLAG_SUBSCRIPTION,
            subscription="*",
            expression_type="TAG",
        )
        response = await invoke(admin, addr, RequestCode.PULL_MESSAGE, header.to_ext())
        next_offset = int(response.ext_fields.get("nextBeginOffset", queue_offset))
        if response.code == ResponseCode.SUCCESS:
            found += [
                m for m in decode_records(response.body) if end_offset is None or m.queue_offset < end_offset
            ]
        elif response.code != ResponseCode.PULL_RETRY_IMMEDIATELY:
            break
        if next_offset <= queue_offset:
            break
        queue_offset = next_offset
    return found[:max_count]


async def query_trace(
    admin: AdminCore, msg_id: str, trace_topic: str
) -> list[tuple[TraceRecord, MessageExt]]:
    """The trace records of ``msg_id`` in ``trace_topic``, each with the trace message it came in.

    The trace message's born host is the ClientHost ``mqadmin queryMsgTraceById`` prints.
    """
    messages = await query_messages(admin, trace_topic, msg_id)
    records: list[tuple[TraceRecord, MessageExt]] = []
    for message in messages:
        for record in decode_trace_records(message.body.decode("utf-8", "replace")):
            if record.msg_id == msg_id:
                records.append((record, message))
    return sorted(records, key=lambda item: item[0].timestamp)
