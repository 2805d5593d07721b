"""Message search, detail, trace, test sends and dead-letter resends for the dashboard.

Search (rocketmq-dashboard's three tabs): by topic and time range (per queue, the offsets at
the range's ends by SEARCH_OFFSET_BY_TIMESTAMP, then :data:`PAGE_MAX` messages
between them through a pull consumer's ``pull_range``, a page at a time), by topic and key (QUERY_MESSAGE), by
id (an offsetMsgId is read from its broker with VIEW_MESSAGE_BY_ID; a client msgId is a
QUERY_MESSAGE on its UNIQ_KEY). An empty result always comes with why: no such topic, no
message at all, nothing in the range (with the range the topic does hold), or no key match.

Detail: properties, a body preview, for each group with offsets on the topic whether it has
consumed the message, and the trace records found in the trace topic under the msgId
(``AdminClient.query_trace``; or why there are none: tracing is a client switch and the trace
topic may not exist).

A dead-lettered message is resent by producing a copy to its original topic (the
``RETRY_TOPIC`` property the broker stamped on it), with its keys and tags.
"""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass, field

from orbitmq.client import Message, Producer, PullConsumer
from orbitmq.client.admin import AdminClient
from orbitmq.dashboard.data import CONCURRENCY, bounded
from orbitmq.errors import OrbitError, TopicNotExistError
from orbitmq.model.message import MessageExt, MessageQueue
from orbitmq.protocol.trace_data import TraceRecord

__all__ = ["MessageDetail", "MessageSearch", "SearchResult"]

PAGE_MAX = 64
"""Messages one page of a time-range search shows."""
BODY_PREVIEW_BYTES = 4096
TRACE_TOPIC_DEFAULT = "RMQ_SYS_TRACE_TOPIC"
_OFFSET_MSG_ID = re.compile(r"^[0-9A-Fa-f]{32}$")


def format_ms(timestamp_ms: int) -> str:
    if timestamp_ms <= 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{timestamp_ms % 1000:03d} UTC"


@dataclass(slots=True)
class SearchResult:
    messages: list[MessageExt] = field(default_factory=list)
    explanation: str = ""
    truncated: bool = False
    page: int = 1
    pages: int = 1
    total: int | None = None
    """Messages in the whole time range (a time search only)."""


def _page_spans(
    spans: list[tuple[MessageQueue, int, int]], skip: int, count: int
) -> list[tuple[MessageQueue, int, int]]:
    """Positions ``[skip, skip + count)`` of the spans numbered newest offset first, span by span."""
    wanted = []
    for mq, start, end in spans:
        size = end - start
        if skip >= size:
            skip -= size
            continue
        stop = end - skip
        first = max(start, stop - count)
        wanted.append((mq, first, stop))
        count -= stop - first
        skip = 0
        if count <= 0:
            break
    return wanted


@dataclass(slots=True)
class Delivery:
    group: str
    state: str
    online_members: int


@dataclass(slots=True)
class TraceRow:
    """One trace record and the client that wrote it (the trace message's born host)."""

    record: TraceRecord
    client_host: str


@dataclass(slots=True)
class MessageDetail:
    message: MessageExt
    body_text: str
    body_is_text: bool
    deliveries: list[Delivery]
    trace: list[TraceRow]
    trace_note: str


class MessageSearch:
    """Searches and message actions over the admin client, a pull consumer and a producer."""

    def __init__(
        self,
        admin: AdminClient,
        pull: PullConsumer,
        producer: Producer,
        trace_topic: str = TRACE_TOPIC_DEFAULT,
    ) -> None:
        self.admin = admin
        self.pull = pull
        self.producer = producer
        self.trace_topic = trace_topic

    async def by_time(self, topic: str, begin_ms: int, end_ms: int, page: int = 1) -> SearchResult:
        """Page ``page`` of the messages of ``topic`` stored in ``[begin_ms, end_ms)``, newest first.

        The range's messages are numbered newest queue offset first, queue by queue (brokers and
        queues in name order), and each page is one slice of :data:`PAGE_MAX` of that numbering,
        so pages neither overlap nor skip; a page past the last gives the last.
        """
        try:
            queues = await self.admin.fetch_queues(topic)
        except TopicNotExistError:
            return SearchResult(
                explanation=f"Topic {topic} does not exist: the name server has no route for it."
            )
        starts = await bounded(self.admin.search_offset(mq, begin_ms) for mq in queues)
        ends = await bounded(self.admin.search_offset(mq, end_ms) for mq in queues)
        spans = [(mq, start, end) for mq, start, end in zip(queues, starts, ends, strict=True) if end > start]
        total = sum(end - start for _, start, end in spans)
        pages = max(1, math.ceil(total / PAGE_MAX))
        page = min(max(page, 1), pages)
        found: list[MessageExt] = []
        for mq, start, end in _page_spans(spans, (page - 1) * PAGE_MAX, PAGE_MAX):
            async for batch in self.pull.pull_range(mq, start, end):
                found += [m for m in batch if begin_ms <= m.store_timestamp < end_ms]
        found.sort(key=lambda message: (message.store_timestamp, message.queue_offset), reverse=True)
        result = SearchResult(found, truncated=pages > 1, page=page, pages=pages, total=total)
        if not found:
            result.explanation = await self._explain_range(topic, queues, begin_ms, end_ms)
        return result

    async def _explain_range(self, topic: str, queues: list[MessageQueue], begin_ms: int, end_ms: int) -> str:
        statuses = list((await self.admin.topic_status(topic)).values())
        stored = sum(status.max_offset - status.min_offset for status in statuses)
        if stored == 0:
            return f"Topic {topic} holds no message yet ({len(queues)} queues, all empty)."
        latest_ms = max(status.last_update_timestamp_ms for status in statuses)
        return (
            f"No message of topic {topic} was stored between {format_ms(begin_ms)} and {format_ms(end_ms)}. "
            f"The topic holds {stored} messages in {len(queues)} queues; the newest was stored at "
            f"{format_ms(latest_ms)}. Widen the time range (times are store times, in UTC)."
        )

    async def by_key(self, topic: str, key: str) -> SearchResult:
        """Messages of ``topic`` whose KEYS hold ``key`` (QUERY_MESSAGE), newest first."""
        try:
            found = await self.admin.query_messages(topic, key)
        except TopicNotExistError:
            return SearchResult(
                explanation=f"Topic {topic} does not exist: the name server has no route for it."
            )
        if found:
            return SearchResult(found)
        return SearchResult(
            explanation=(
                f"No message of topic {topic} is indexed under key {key!r}. Keys are the space-separated "
                "words of a message's KEYS property (Message.keys), matched whole and case-sensitively; "
                "to find a message by its id use the id search."
            )
        )

    async def by_id(self, topic: str, msg_id: str) -> SearchResult:
        """A message by its client msgId (UNIQ_KEY) or its offsetMsgId; every user topic without ``topic``."""
        msg_id = msg_id.strip()
        if _OFFSET_MSG_ID.match(msg_id):
            try:
                message = await self.admin.view_message(msg_id)
            except OrbitError:
                message = None  # a client msgId is also 32 hex digits: try it as one
            if message is not None:
                return SearchResult([message])
        try:
            found = await self.admin.query_message_by_id(msg_id, topic or None)
        except TopicNotExistError:
            return SearchResult(
                explanation=f"Topic {topic} does not exist: the name server has no route for it."
            )
        if found:
            return SearchResult(found[:1])
        where = f"in topic {topic}" if topic else "in any topic"
        return SearchResult(explanation=f"No message with id {msg_id} {where}.")

    async def detail(self, topic: str, msg_id: str) -> MessageDetail | None:
        """Everything the message page shows; None when no such message."""
        result = await self.by_id(topic, msg_id)
        if not result.messages:
            return None
        message = result.messages[0]
        body = bytes(message.body)
        try:
            text, is_text = body[:BODY_PREVIEW_BYTES].decode("utf-8"), True
        except UnicodeDecodeError:
            text, is_text = body[:BODY_PREVIEW_BYTES].hex(" "), False
        deliveries = await self._deliveries(message)
        trace, note = await self._trace(message.msg_id)
        return MessageDetail(message, text, is_text, deliveries, trace, note)

    async def _deliveries(self, message: MessageExt) -> list[Delivery]:
        masters = await self.admin.master_addresses()
        # The broker that stored the message: its address is the record's STOREHOST.
        store_addr = "{}:{}".format(*message.store_host)
        broker_name = next((name for name, addr in masters.items() if addr == store_addr), "")
        if not broker_name:
            return []
        table = await self.admin.all_consumer_offsets(masters[broker_name])
        groups: dict[str, int] = {}
        for (topic, group), queues in table.items():
            if topic == message.topic and message.queue_id in queues:
                groups[group] = queues[message.queue_id]
        members = await bounded(
            (self.admin.group_members(masters[broker_name], group) for group in groups), CONCURRENCY
        )
        deliveries = []
        for (group, committed), online in zip(sorted(groups.items()), members, strict=False):
            state = "CONSUMED" if committed > message.queue_offset else "NOT_CONSUMED_YET"
            if state != "CONSUMED" and not online:
                state = "NOT_CONSUMED_YET (no member online)"
            deliveries.append(Delivery(group, state, len(online)))
        return deliveries

    async def _trace(self, msg_id: str) -> tuple[list[TraceRow], str]:
        try:
            found = await self.admin.query_trace(msg_id, self.trace_topic)
        except TopicNotExistError:
            return [], (
                f"No trace: the trace topic {self.trace_topic} does not exist. Traces are written by "
                "clients with message trace switched on (Java enableMsgTrace); create the topic or set "
                "traceTopicEnable=true on the broker."
            )
        if not found:
            return [], (
                f"No trace records for {msg_id} in {self.trace_topic}: the producer and consumers of this "
                "message did not have message trace switched on."
            )
        rows = [TraceRow(record, "{}:{}".format(*message.born_host)) for record, message in found]
        return rows, ""

    async def send_test(self, topic: str, body: str, tags: str, keys: str) -> str:
        """Send one message; returns its msgId."""
        message = Message(topic, body.encode())
        if tags:
            message.tags = tags
        if keys:
            message.keys = keys.split()
        result = await self.producer.send(message)
        return str(result.msg_id)

    async def resend_dead_letter(self, dlq_topic: str, msg_id: str) -> str:
        """Produce a copy of a dead-lettered message to its original topic; returns the new msgId."""
        found = await self.by_id(dlq_topic, msg_id)
        if not found.messages:
            raise LookupError(f"no message {msg_id} in {dlq_topic}")
        original = found.messages[0]
        target = original.properties.get("RETRY_TOPIC") or ""
        if not target or target.startswith("%"):
            raise LookupError(f"message {msg_id} does not name its original topic (no RETRY_TOPIC property)")
        copy = Message(target, bytes(original.body))
        if original.tags:
            copy.tags = original.tags
        if original.keys:
            copy.keys = list(original.keys)
        result = await self.producer.send(copy)
        return str(result.msg_id)
