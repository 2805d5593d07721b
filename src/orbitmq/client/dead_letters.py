"""A consumer group's dead letters: browse, export and resend (rocketmq-dashboard's DLQ page).

A message a group failed to consume more than its retry limit is moved to ``%DLQ%<group>``,
a topic the broker creates write-only (perm 2, as RocketMQ 4.x does), so pulls and every tool
built on them see nothing there. These reads go around the read permission as RocketMQ's
admin tools do, asking the brokers directly:

==========================  ======================================================================
operation                   requests
==========================  ======================================================================
queues                      the route (every queue data, readable or not)
a page, every message       per queue GET_MIN/MAX_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP for the
                            time range, QUERY_CONSUME_QUEUE (321) for the entries of the wanted
                            offsets, then VIEW_MESSAGE_BY_ID for each entry's commit-log offset
one message                 QUERY_MESSAGE on the DLQ topic by its msgId (or VIEW_MESSAGE_BY_ID for
                            an offsetMsgId)
resend                      a copy (body, tags, keys, user properties) sent to its original topic
                            (the ``RETRY_TOPIC`` property the broker stamped on it); or, as
                            rocketmq-dashboard does, CONSUME_MESSAGE_DIRECTLY to one online
                            consumer of the group
==========================  ======================================================================

Paging: the messages of the range, newest queue offset first queue by queue (brokers and
queues in name order), are numbered once; page ``n`` is one slice of that numbering, so pages
neither overlap nor skip while no new dead letter arrives. A page is shown newest first.
"""

from __future__ import annotations

import asyncio
import csv
import io
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import orjson

from orbitmq.client._record_decode import decode_records
from orbitmq.errors import ClientError, RemoteProtocolError, error_for_code
from orbitmq.model.message import Message, MessageConst, MessageExt, MessageQueue
from orbitmq.protocol.admin_bodies import decode_query_consume_queue
from orbitmq.protocol.admin_headers import QueryConsumeQueueRequestHeader
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import ViewMessageRequestHeader

if TYPE_CHECKING:
    from orbitmq.client.admin import AdminClient
    from orbitmq.client.producer import Producer
    from orbitmq.protocol.client_bodies import ConsumeMessageDirectlyResult

__all__ = [
    "DLQ_PREFIX",
    "DeadLetterPage",
    "DeadLetters",
    "dlq_topic",
    "export_csv",
    "export_json",
    "message_row",
]

DLQ_PREFIX = "%DLQ%"
PAGE_SIZE_DEFAULT = 64
QUERY_CONSUME_QUEUE_COUNT_MAX = 1000
"""Entries one QUERY_CONSUME_QUEUE answers at most (the broker cuts ``count`` there)."""
PAGE_SIZE_MAX = 1024
CONCURRENCY = 32
"""VIEW_MESSAGE_BY_ID requests in flight at most."""
_SYSTEM_PROPERTIES = frozenset(
    (
        MessageConst.RETRY_TOPIC,
        MessageConst.ORIGIN_MESSAGE_ID,
        "UNIQ_KEY",
        "KEYS",
        "TAGS",
        "WAIT",
        "REAL_TOPIC",
        "REAL_QID",
        "DELAY",
        "MAX_OFFSET",
        "MIN_OFFSET",
        "CONSUME_START_TIME",
        "RECONSUME_TIME",
        "MAX_RECONSUME_TIMES",
        "TRAN_MSG",
        "PGROUP",
        "CLUSTER",
    )
)


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``."""
    return group if group.startswith(DLQ_PREFIX) else DLQ_PREFIX + group


@dataclass(slots=True)
class DeadLetterPage:
    group: str
    topic: str
    messages: list[MessageExt] = field(default_factory=list)
    total: int = 0
    """Dead letters in the time range (every page)."""
    page: int = 1
    pages: int = 1
    page_size: int = PAGE_SIZE_DEFAULT
    explanation: str = ""
    """Why the page is empty (no DLQ topic, nothing dead-lettered, nothing in the range)."""


@dataclass(frozen=True, slots=True)
class _Span:
    """Queue offsets ``[start, end)`` of one queue, on the broker at ``addr``."""

    mq: MessageQueue
    addr: str
    start: int
    end: int


class DeadLetters:
    """Dead-letter reads and resends over an :class:`AdminClient` (see the module docstring)."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin

    async def queues(self, group: str) -> dict[MessageQueue, str]:
        """Every queue of the group's DLQ topic -> its master's address, whatever the permission.

        Raises:
            TopicNotExistError: the group has no DLQ topic (nothing was dead-lettered).
        """
        topic = dlq_topic(group)
        route = await self.admin.topic_route(topic)
        masters = {
            data.broker_name: data.broker_addrs[0] for data in route.broker_datas if 0 in data.broker_addrs
        }
        return {
            MessageQueue(topic, data.broker_name, queue_id): masters[data.broker_name]
            for data in sorted(route.queue_datas, key=lambda data: data.broker_name)
            if data.broker_name in masters
            for queue_id in range(max(data.read_queue_nums, data.write_queue_nums))
        }

    async def _spans(self, group: str, begin_ms: int, end_ms: int | None) -> list[_Span]:
        queues = await self.queues(group)

        async def span(mq: MessageQueue, addr: str) -> _Span:
            start = await self.admin.min_offset(mq)
            end = await self.admin.max_offset(mq)
            if begin_ms > 0:
                start = max(start, await self.admin.search_offset(mq, begin_ms))
            if end_ms is not None:
                end = min(end, await self.admin.search_offset(mq, end_ms))
            return _Span(mq, addr, start, max(start, end))

        return list(await asyncio.gather(*(span(mq, addr) for mq, addr in queues.items())))

    async def page(
        self,
        group: str,
        *,
        begin_ms: int = 0,
        end_ms: int | None = None,
        page: int = 1,
        page_size: int = PAGE_SIZE_DEFAULT,
    ) -> DeadLetterPage:
        """One page of the group's dead letters stored in ``[begin_ms, end_ms)``, newest first.

        ``page`` past the last gives the last page.
        """
        from orbitmq.errors import TopicNotExistError

        topic = dlq_topic(group)
        page_size = min(max(page_size, 1), PAGE_SIZE_MAX)
        result = DeadLetterPage(group.removeprefix(DLQ_PREFIX), topic, page_size=page_size)
        try:
            spans = await self._spans(group, begin_ms, end_ms)
        except TopicNotExistError:
            result.explanation = f"Group {result.group} has no dead-letter topic {topic}: none of its messages was dead-lettered."
            return result
        result.total = sum(span.end - span.start for span in spans)
        result.pages = max(1, math.ceil(result.total / page_size))
        result.page = min(max(page, 1), result.pages)
        if result.total == 0:
            result.explanation = f"No dead letter of group {result.group} was stored in that time range."
            return result
        wanted = _slice(spans, (result.page - 1) * page_size, page_size)
        found = await asyncio.gather(*(self._read(span) for span in wanted))
        messages = [message for batch in found for message in batch]
        in_range = [
            m
            for m in messages
            if m.store_timestamp >= begin_ms and (end_ms is None or m.store_timestamp < end_ms)
        ]
        result.messages = sorted(in_range, key=lambda m: (m.store_timestamp, m.queue_offset), reverse=True)
        return result

    async def every(
        self, group: str, *, begin_ms: int = 0, end_ms: int | None = None, limit: int | None = None
    ) -> AsyncIterator[list[MessageExt]]:
        """Every dead letter of the range, oldest first queue by queue, in batches."""
        spans = await self._spans(group, begin_ms, end_ms)
        left = limit
        for span in spans:
            start = span.start
            while start < span.end and (left is None or left > 0):
                count = min(span.end - start, PAGE_SIZE_MAX, left if left is not None else PAGE_SIZE_MAX)
                batch = await self._read(_Span(span.mq, span.addr, start, start + count))
                start += count
                batch = [
                    m
                    for m in batch
                    if m.store_timestamp >= begin_ms and (end_ms is None or m.store_timestamp < end_ms)
                ]
                if left is not None:
                    batch = batch[:left]
                    left -= len(batch)
                if batch:
                    yield batch

    async def _read(self, span: _Span) -> list[MessageExt]:
        commit_log_offsets: list[int] = []
        start = span.start
        while start < span.end:
            count = min(span.end - start, QUERY_CONSUME_QUEUE_COUNT_MAX)
            header = QueryConsumeQueueRequestHeader(span.mq.topic, span.mq.queue_id, start, count)
            response = await self._invoke(span.addr, RequestCode.QUERY_CONSUME_QUEUE, header.to_ext())
            if response.code != ResponseCode.SUCCESS:
                raise error_for_code(
                    response.code, f"queue entries of {span.mq} on broker {span.addr}: {response.remark}"
                )
            body = decode_query_consume_queue(response.body)
            if not body.queue_data:
                break
            # The broker answers from the queue's min offset when asked below it.
            first = max(start, body.min_queue_index)
            taken = body.queue_data[: max(span.end - first, 0)]
            commit_log_offsets += [entry.physic_offset for entry in taken]
            start = first + len(body.queue_data)
        gate = asyncio.Semaphore(CONCURRENCY)

        async def view(commit_log_offset: int) -> MessageExt | None:
            async with gate:
                ext = ViewMessageRequestHeader(commit_log_offset).to_ext()
                response = await self._invoke(span.addr, RequestCode.VIEW_MESSAGE_BY_ID, ext)
            if response.code != ResponseCode.SUCCESS or not response.body:
                return None  # removed from the commit log since
            try:
                messages = decode_records(response.body)
            except RemoteProtocolError:
                return None
            return messages[0] if messages else None

        viewed = await asyncio.gather(*(view(offset) for offset in commit_log_offsets))
        return [message for message in viewed if message is not None]

    async def _invoke(self, addr: str, code: int, ext: dict[str, str]) -> RemotingCommand:
        request = RemotingCommand.request(code, ext)
        client = self.admin._client
        return await client.remoting.invoke(addr, request, self.admin.client_config.request_timeout_ms)

    async def find(self, group: str, msg_id: str) -> MessageExt | None:
        """The dead letter with this msgId (or offsetMsgId), or None."""
        found = await self.admin.query_message_by_id(msg_id.strip(), dlq_topic(group))
        return found[0] if found else None

    async def resend(self, producer: Producer, message: MessageExt) -> str:
        """Send a copy of ``message`` to its original topic; returns the new msgId.

        Raises:
            ClientError: the message does not name its original topic.
        """
        target = message.properties.get(MessageConst.RETRY_TOPIC) or ""
        if not target or target.startswith(("%RETRY%", DLQ_PREFIX)):
            raise ClientError(
                f"message {message.msg_id} does not name its original topic (no RETRY_TOPIC property)"
            )
        copy = Message(target, bytes(message.body))
        for name, value in message.properties.items():
            if name not in _SYSTEM_PROPERTIES:
                copy.properties[name] = value
        if message.tags:
            copy.tags = message.tags
        if message.keys:
            copy.keys = list(message.keys)
        copy.properties[MessageConst.ORIGIN_MESSAGE_ID] = message.msg_id
        result = await producer.send(copy)
        return str(result.msg_id)

    async def consume_directly(
        self, group: str, message: MessageExt, client_id: str | None = None
    ) -> tuple[str, ConsumeMessageDirectlyResult]:
        """Have one online consumer of ``group`` consume ``message`` now (rocketmq-dashboard's
        resend); returns the client id asked and its answer.

        Raises:
            ConsumerNotOnlineError / ClientError: no consumer of the group is online.
        """
        group = group.removeprefix(DLQ_PREFIX)
        if client_id is None:
            masters = await self.admin.master_addresses()
            members = [m for addr in masters.values() for m in await self.admin.group_members(addr, group)]
            if not members:
                raise ClientError(f"no consumer of group {group} is online to consume the message")
            client_id = sorted(members)[0]
        answer = await self.admin.consume_message_directly(
            group, client_id, message.offset_msg_id, message.topic
        )
        return client_id, answer


def _slice(spans: list[_Span], skip: int, count: int) -> list[_Span]:
    """Positions ``[skip, skip + count)`` of the spans numbered newest offset first, span by span."""
    wanted: list[_Span] = []
    for span in spans:
        size = span.end - span.start
        if skip >= size:
            skip -= size
            continue
        end = span.end - skip
        start = max(span.start, end - count)
        wanted.append(_Span(span.mq, span.addr, start, end))
        count -= end - start
        skip = 0
        if count <= 0:
            break
    return wanted


EXPORT_FIELDS = (
    "msgId",
    "offsetMsgId",
    "topic",
    "originalTopic",
    "originMsgId",
    "brokerName",
    "queueId",
    "queueOffset",
    "storeTimestamp",
    "bornTimestamp",
    "reconsumeTimes",
    "tags",
    "keys",
    "properties",
    "body",
    "bodyEncoding",
)


def message_row(message: MessageExt, broker_name: str = "") -> dict[str, object]:
    """One dead letter as an export row: UTF-8 bodies as text, others in base64."""
    import base64

    body = bytes(message.body)
    try:
        text, encoding = body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(body).decode(), "base64"
    return {
        "msgId": message.msg_id,
        "offsetMsgId": message.offset_msg_id,
        "topic": message.topic,
        "originalTopic": message.properties.get(MessageConst.RETRY_TOPIC, ""),
        "originMsgId": message.properties.get(MessageConst.ORIGIN_MESSAGE_ID, ""),
        "brokerName": broker_name,
        "queueId": message.queue_id,
        "queueOffset": message.queue_offset,
        "storeTimestamp": message.store_timestamp,
        "bornTimestamp": message.born_timestamp,
        "reconsumeTimes": message.reconsume_times,
        "tags": message.tags or "",
        "keys": " ".join(message.keys),
        "properties": dict(message.properties),
        "body": text,
        "bodyEncoding": encoding,
    }


def export_json(rows: list[dict[str, object]]) -> bytes:
    return orjson.dumps(rows, option=orjson.OPT_INDENT_2)


def export_csv(rows: list[dict[str, object]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {
                key: orjson.dumps(value).decode() if isinstance(value, dict) else value
                for key, value in row.items()
            }
        )
    return out.getvalue()
