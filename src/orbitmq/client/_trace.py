"""Message trace on the client side: records of sends, consumption and transaction ends, sent
asynchronously and in batches to the trace topic (operations-features §1.3, §1.4).

Theory of operation (RocketMQ's AsyncTraceDispatcher). A producer or push consumer made with
``enable_msg_trace=True`` owns a :class:`TraceDispatcher`. Its hooks build
:class:`~orbitmq.protocol.trace_data.TraceRecord` values and :meth:`TraceDispatcher.append`
puts them in a bounded queue (1024 batches; when full, records are dropped and counted, so
tracing never slows the traced client). A worker takes what is queued every 100 ms, encodes the
records, and sends them as one message to the trace topic (``RMQ_SYS_TRACE_TOPIC``, or the
client's ``trace_topic``) through an internal producer of group
``_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>``, cutting a message when its text reaches
118,000 characters. The message's KEYS are every record's msgId and business keys, so a key
query on the trace topic by msgId finds it (``mqadmin queryMsgTraceById``, ``orbitmq admin
queryMsgTraceById``). Shutdown flushes what is queued. Sends to the trace topic are never
traced, and neither is a message whose broker said ``TRACE_ON=false``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from orbitmq.client._consume_service import ConsumeResult
from orbitmq.errors import OrbitError
from orbitmq.model.message import Message, MessageConst, MessageExt, MessageQueue
from orbitmq.protocol.message_id import UniqKeyGenerator
from orbitmq.protocol.trace_data import (
    MSG_TYPE_DELAY,
    MSG_TYPE_NORMAL,
    MSG_TYPE_TRANS_HALF,
    TRACE_TYPE_PUB,
    TRACE_TYPE_SUB_AFTER,
    TRACE_TYPE_SUB_BEFORE,
    TraceRecord,
    encode_trace_record,
    trace_keys,
)

if TYPE_CHECKING:
    from orbitmq.client.producer import Producer

__all__ = ["DEFAULT_TRACE_TOPIC", "TraceConsumeHook", "TraceDispatcher"]

logger = logging.getLogger(__name__)

DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
DEFAULT_REGION = "DefaultRegion"
QUEUE_MAX = 1024
FLUSH_INTERVAL_S = 0.1
MESSAGE_TEXT_MAX = 128_000 - 10_000
FLUSH_TIMEOUT_S = 5.0


class TraceDispatcher:
    """The trace pipeline of one traced client (see the module docstring).

    Args:
        namesrv_addr: name servers of the traced client (the trace producer uses them too).
        group: the traced client's group.
        role: ``PRODUCE`` or ``CONSUME``.
        trace_topic: where records go (None: ``RMQ_SYS_TRACE_TOPIC``).
        options: client settings shared with the traced client (``request_timeout_ms``...).
    """

    def __init__(
        self,
        namesrv_addr: str,
        group: str,
        role: str,
        trace_topic: str | None = None,
        **options: Any,
    ) -> None:
        self.trace_topic = trace_topic or DEFAULT_TRACE_TOPIC
        self._namesrv_addr = namesrv_addr
        self._group = group
        self._role = role
        self._options = options
        self._queue: asyncio.Queue[list[TraceRecord]] = asyncio.Queue(QUEUE_MAX)
        self._producer: Producer | None = None
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        self.sent_messages = 0

    async def start(self) -> None:
        from orbitmq.client.producer import Producer  # the producer module imports this one

        options = {
            key: value
            for key, value in self._options.items()
            if key in ("request_timeout_ms", "connect_timeout_ms", "client_ip")
        }
        producer = Producer(
            f"_INNER_TRACE_PRODUCER-{self._group}-{self._role}",
            self._namesrv_addr,
            instance_name=f"PID_CLIENT_INNER_TRACE_PRODUCER_{os.getpid()}",
            send_msg_timeout_ms=5_000,
            **options,
        )
        await producer.start()
        self._producer = producer
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"orbitmq trace {self._group}")

    def append(self, records: Sequence[TraceRecord]) -> None:
        """Queue records for sending; never blocks (a full queue drops them, counted)."""
        if not records:
            return
        try:
            self._queue.put_nowait(list(records))
        except asyncio.QueueFull:
            self.dropped += len(records)

    async def shutdown(self) -> None:
        """Send what is queued (up to 5 s), then stop the worker and the trace producer."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await asyncio.wait_for(self._flush(wait=True), FLUSH_TIMEOUT_S)
        except (TimeoutError, OrbitError) as exc:
            logger.warning("trace records of %s lost at shutdown: %s", self._group, exc)
        if self._producer is not None:
            await self._producer.shutdown()
            self._producer = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_S)
            try:
                await self._flush(wait=False)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("sending trace records of %s failed", self._group)

    async def _flush(self, *, wait: bool) -> None:
        records: list[TraceRecord] = []
        while not self._queue.empty():
            records.extend(self._queue.get_nowait())
        sends = []
        for chunk in _chunks(records):
            message = Message(self.trace_topic, "".join(text for _, text in chunk).encode("utf-8"))
            message.keys = trace_keys([record for record, _ in chunk])
            sends.append(self._send(message, wait=wait))
        await asyncio.gather(*sends)

    async def _send(self, message: Message, *, wait: bool) -> None:
        producer = self._producer
        if producer is None:
            return
        if wait:
            await producer.send(message)
        else:
            producer.send_async(message, self._log_failure)
        self.sent_messages += 1

    def _log_failure(self, result: object, error: BaseException | None) -> None:
        if error is not None:
            logger.info("a trace message of %s was not stored: %s", self._group, error)


def _chunks(records: list[TraceRecord]) -> list[list[tuple[TraceRecord, str]]]:
    """Records (with their text) grouped into message bodies of at most MESSAGE_TEXT_MAX chars."""
    chunks: list[list[tuple[TraceRecord, str]]] = []
    current: list[tuple[TraceRecord, str]] = []
    size = 0
    for record in records:
        text = encode_trace_record(record)
        if current and size + len(text) > MESSAGE_TEXT_MAX:
            chunks.append(current)
            current, size = [], 0
        current.append((record, text))
        size += len(text)
    if current:
        chunks.append(current)
    return chunks


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def pub_record(
    group: str,
    message: Message,
    *,
    started_ms: int,
    cost_ms: int,
    msg_id: str,
    offset_msg_id: str,
    store_host: str,
    region_id: str | None,
    success: bool,
) -> TraceRecord:
    """The Pub record of one sent message."""
    return TraceRecord(
        TRACE_TYPE_PUB,
        timestamp=started_ms,
        region_id=region_id or DEFAULT_REGION,
        group=group,
        topic=message.topic,
        msg_id=msg_id,
        tags=message.tags,
        keys=message.properties.get(MessageConst.KEYS),
        store_host=store_host,
        body_length=len(message.body),
        cost_ms=cost_ms,
        msg_type=(
            MSG_TYPE_TRANS_HALF
            if message.properties.get(MessageConst.TRANSACTION_PREPARED) == "true"
            else MSG_TYPE_DELAY
            if message.delay_level > 0
            else MSG_TYPE_NORMAL
        ),
        offset_msg_id=offset_msg_id,
        success=success,
    )


class TraceConsumeHook:
    """A consume hook (``_consume_service.ConsumeHook``) writing SubBefore/SubAfter records."""

    def __init__(self, dispatcher: TraceDispatcher, group: str, client_ip: str) -> None:
        self._dispatcher = dispatcher
        self._group = group
        self._request_ids = UniqKeyGenerator(client_ip)

    def _traced(self, messages: list[MessageExt]) -> list[MessageExt]:
        trace_topic = self._dispatcher.trace_topic
        return [
            message
            for message in messages
            if message.properties.get(MessageConst.TRACE_SWITCH, "true") != "false"
            and not message.topic.startswith(trace_topic)
        ]

    def consume_started(self, messages: list[MessageExt], mq: MessageQueue) -> object:
        traced = self._traced(messages)
        if not traced:
            return None
        request_id = self._request_ids.next_key()
        started_ms = now_ms()
        self._dispatcher.append(
            [
                TraceRecord(
                    TRACE_TYPE_SUB_BEFORE,
                    timestamp=started_ms,
                    region_id=message.properties.get(MessageConst.MSG_REGION, DEFAULT_REGION),
                    group=self._group,
                    msg_id=message.msg_id,
                    keys=message.properties.get(MessageConst.KEYS),
                    request_id=request_id,
                    retry_times=message.reconsume_times,
                )
                for message in traced
            ]
        )
        return request_id, traced

    def consume_finished(
        self,
        token: object,
        messages: list[MessageExt],
        mq: MessageQueue,
        result: ConsumeResult,
        return_type: int,
        elapsed_ms: float,
    ) -> None:
        if not isinstance(token, tuple):
            return
        request_id, traced = token
        finished_ms = now_ms()
        cost_ms = int(elapsed_ms / max(len(traced), 1))
        self._dispatcher.append(
            [
                TraceRecord(
                    TRACE_TYPE_SUB_AFTER,
                    timestamp=finished_ms,
                    group=self._group,
                    msg_id=message.msg_id,
                    keys=message.properties.get(MessageConst.KEYS),
                    cost_ms=cost_ms,
                    success=result is ConsumeResult.CONSUME_SUCCESS,
                    request_id=request_id,
                    context_code=return_type,
                )
                for message in traced
            ]
        )
