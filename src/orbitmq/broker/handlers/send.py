"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

Send path (remoting-protocol §2.4): read the header (V1 long names, or V2 one-letter names),
check broker and topic permissions and names, find or auto-create the topic, pick the queue,
redirect exhausted retries to ``%DLQ%<group>``, store, and under SYNC_FLUSH wait for the flush
future without blocking the event loop. A batch is recognised by code 320 or by the header's
``batch`` flag being ``true``/``1`` (the C++ client sends code 10 with ``batch:"1"``).

Send-back (CONSUMER_SEND_MSG_BACK) is in :mod:`orbitmq.broker.handlers.send_back`.

Special messages are rewritten before the put (:meth:`SendHandlers._route`):

| property | stored in | delivered by |
| --- | --- | --- |
| ``TRAN_MSG=true`` | ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 | END_TRANSACTION commit (broker.transaction) |
| ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS`` / ``__STARTDELIVERTIME`` | ``rmq_sys_wheel_timer`` queue 0 | broker.timer |
| ``DELAY=L>0`` | ``SCHEDULE_TOPIC_XXXX`` queue L-1 | broker.schedule |

A transactional message may not be delayed or batched, and a timed message due further
ahead than ``timerMaxDelaySec`` is refused (MESSAGE_ILLEGAL).

Replication: a SLAVE refuses sends and send-backs with SERVICE_NOT_AVAILABLE (14), as RocketMQ
does. A SYNC_MASTER answers a stored message only once a slave acknowledged its bytes
(``broker.replication``): SLAVE_NOT_AVAILABLE (11) when no usable slave is connected,
FLUSH_SLAVE_TIMEOUT (12) after ``slaveTimeout``; the message is stored either way, so those
answers carry the usual msgId, queue id and queue offset.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable

from orbitmq.broker.config import BrokerConfig, BrokerRole
from orbitmq.broker.handlers import BrokerState, now_ms
from orbitmq.broker.handlers.send_answer import PutAnswers
from orbitmq.broker.reput import ReputTargets
from orbitmq.broker.schedule import delay_level_of, to_schedule
from orbitmq.broker.timer import TIMER_TOPIC, timer_due_ms, to_timer
from orbitmq.broker.transaction import is_transactional, to_half
from orbitmq.broker.validation import (
    RETRY_GROUP_TOPIC_PREFIX,
    Rejection,
    check_message_size,
    check_queue_id,
    check_send_topic,
    dlq_topic,
    stamps_that_fit,
)
from orbitmq.errors import BadRequestError, RemoteProtocolError
from orbitmq.metrics import message_type_of
from orbitmq.model.message import MessageConst, SysFlag
from orbitmq.model.route import PERM_READ_WRITE, PERM_WRITE, TopicConfig
from orbitmq.protocol.batch import decode_batch_columns
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import SendMessageRequestHeader
from orbitmq.protocol.message_id import UniqKeyGenerator
from orbitmq.protocol.names import group_name_problem
from orbitmq.protocol.properties import MAX_PROPERTIES_BYTES, decode_properties, encode_properties
from orbitmq.store.batch_put import BatchPut
from orbitmq.store.message_store import PutMessageRequest, PutStatus
from orbitmq.transport.log_limit import LogLimiter
from orbitmq.transport.server import ReadyAnswer, RequestContext

logger = logging.getLogger(__name__)
# Producers can send refused messages at any rate: one line per interval.
_log_limit = LogLimiter(logger)

MSG_REGION_DEFAULT = "DefaultRegion"
# The names a send header's topic goes by (V1 ``topic``, V2 ``b``; BadRequestError.field).
_TOPIC_WIRE_NAMES = frozenset(("topic", "b"))
# The properties timer_due_ms reads; a message carrying none of them is not timed.
_TIMER_KEYS = frozenset(
    (
        MessageConst.TIMER_DELIVER_MS,
        MessageConst.START_DELIVER_TIME,
        MessageConst.TIMER_DELAY_MS,
        MessageConst.TIMER_DELAY_SEC,
    )
)
# The properties a batch's per-message checks read: a message with none of them passes.
_BATCH_CHECKED_KEYS = frozenset((MessageConst.DELAY_TIME_LEVEL, MessageConst.TRANSACTION_PREPARED))
_BATCH_CHECKED_KEYS_WITH_TIMER = _BATCH_CHECKED_KEYS | _TIMER_KEYS


class SendHandlers:
    """Producer sends."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state
        self._answers = PutAnswers(state)
        self._stamps_of: tuple[BrokerConfig, dict[str, str], int] | None = None
        self._reput_targets: ReputTargets | None = None
        self._uniq_key_generator: UniqKeyGenerator | None = None

    @property
    def targets(self) -> ReputTargets:
        """The DLQ re-put checks (made on first use: the table is built before some states)."""
        if self._reput_targets is None:
            self._reput_targets = ReputTargets(self._state.topics)
        return self._reput_targets

    @property
    def _uniq_keys(self) -> UniqKeyGenerator:
        """UNIQ_KEYs for messages sent without one, as RocketMQ 5.x's broker gives each (made on
        first use, like the re-put checks: the table is built before some states)."""
        if self._uniq_key_generator is None:
            try:
                self._uniq_key_generator = UniqKeyGenerator(self._state.store_host[0])
            except ValueError:  # brokerIP1 is a host name
                self._uniq_key_generator = UniqKeyGenerator()
        return self._uniq_key_generator

    # -- send ----------------------------------------------------------------------------------

    async def send_message(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (see :meth:`send_message_now`)."""
        response = await self.send_message_now(ctx, request)
        assert response is not None
        return response

    def send_message_now(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> Awaitable[RemotingCommand | None]:
        """SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE, answered at once when they can be.

        The answer is a ``ReadyAnswer`` when nothing is waited for (see ``send_answer``), else
        the coroutine that waits for the flush or the slaves.

        Every answer to a send the header of which was read carries the broker's ``MSG_REGION``
        and ``TRACE_ON``, refusals too: RocketMQ's broker puts them on the response before its
        checks. A header it cannot read (a field missing or not a number) gets neither, as in
        RocketMQ; a topic that is there but breaks the name rule is a check, so it gets them.
        """
        try:
            outcome = self._send(ctx, request)
        except BadRequestError as exc:
            if exc.field not in _TOPIC_WIRE_NAMES or _topic_text(request) is None:
                raise
            _log_limit.warning(
                f"send-refused:{exc.field}",
                "refused send from %s: %s",
                ctx.peer_address, exc.remark,
            )  # fmt: skip
            outcome = request.response(exc.code, exc.remark)
        if isinstance(outcome, RemotingCommand):
            return ReadyAnswer(self._stamped(outcome))
        return self._stamped_later(outcome)

    async def _stamped_later(self, outcome: Awaitable[RemotingCommand]) -> RemotingCommand:
        return self._stamped(await outcome)

    def _stamped(self, response: RemotingCommand) -> RemotingCommand:
        ext = response.ext_fields
        config = self._state.config
        ext.setdefault(MessageConst.MSG_REGION, config.region_id)
        ext.setdefault(MessageConst.TRACE_SWITCH, "true" if config.trace_on else "false")
        return response

    def _send(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        header = _read_send_header(request)
        rejection = self.check_broker_writable() or check_send_topic(header.topic)
        if rejection is not None:
            return rejection.response(request)
        properties = decode_properties(header.properties or "")
        topic_config = self._find_or_create_topic(header)
        if topic_config is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!"
            )
        if not topic_config.perm & PERM_WRITE:
            return request.response(
                ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] sending message is forbidden"
            )
        queue_count = max(topic_config.read_queue_nums, topic_config.write_queue_nums)
        rejection = check_queue_id(header.topic, header.queue_id, queue_count, header.producer_group)
        if rejection is not None:
            return rejection.response(request)
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(max(topic_config.write_queue_nums, 1))
        if request.code == RequestCode.SEND_BATCH_MESSAGE or header.batch:
            return self._send_batch(ctx, request, header, queue_id)
        return self._send_single(ctx, request, header, topic_config, queue_id, properties)

    def _stamps(self, config: BrokerConfig) -> tuple[dict[str, str], int]:
        """The broker's trace stamps and the most bytes they add to a property string (per config)."""
        cached = self._stamps_of
        if cached is None or cached[0] is not config:
            stamps = {
                MessageConst.CLUSTER: config.broker_cluster_name,
                MessageConst.MSG_REGION: config.region_id,
                MessageConst.TRACE_SWITCH: "true" if config.trace_on else "false",
            }
            # What they add at most, as stamps_that_fit counts it (key, value, two separators).
            added = sum(len(key.encode()) + len(value.encode()) + 2 for key, value in stamps.items())
            cached = self._stamps_of = (config, stamps, added)
        return cached[1], cached[2]

    def check_broker_writable(self) -> Rejection | None:
        config = self._state.config
        replicas = self._state.replicas
        if replicas is not None:
            refusal = replicas.write_refusal()
            if refusal is not None:
                return Rejection(ResponseCode(refusal[0]), refusal[1])
        if config.broker_role is BrokerRole.SLAVE:
            return Rejection(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                f"service not available now: the broker[{config.broker_name}] is a slave "
                f"(brokerId {config.broker_id}); messages are put to its master",
            )
        if self._state.config.broker_permission & PERM_WRITE:
            return None
        return Rejection(
            ResponseCode.NO_PERMISSION,
            f"the broker[{self._state.config.broker_name}] sending message is forbidden",
        )

    def _find_or_create_topic(self, header: SendMessageRequestHeader) -> TopicConfig | None:
        topics = self._state.topics
        existing = topics.get(header.topic)
        if existing is not None:
            return existing
        if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            created: TopicConfig | None = topics.find_or_create(header.topic, 1, PERM_READ_WRITE)
        elif self._state.config.auto_create_topic_enable:
            created = topics.create_from_template(
                header.topic, header.default_topic or "TBW102", header.default_topic_queue_nums
            )
        else:
            created = None
        if created is not None:
            self._state.on_topics_changed()
        return created

    def _send_single(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        topic_config: TopicConfig,
        queue_id: int,
        properties: dict[str, str],
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        topic = header.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            redirected = self._dlq_if_exhausted(topic, header.reconsume_times, header.max_reconsume_times)
            if redirected is not None:
                topic, queue_id = redirected, 0
                # The DLQ topic gets the checks the retry topic got (it may be read-only).
                rejection = self.targets.check("retry-dlq", properties.get("UNIQ_KEY", ""), topic, 0)
                if rejection is not None:
                    return rejection.response(request)
        properties_bytes = len((header.properties or "").encode())
        rejection = check_message_size(
            topic, len(request.body), properties_bytes, self._state.store_config.max_message_size_bytes
        )
        if rejection is not None:
            return rejection.response(request)
        config = self._state.config
        uniq_key = properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if not uniq_key:
            uniq_key = self._uniq_keys.next_key()
            properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq_key
            properties_bytes += len(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) + len(uniq_key) + 2
        # Trace stamps (operations-features §1.2): consumers' trace hooks read them; a string
        # at the client's limit leaves no room for them (stamps_that_fit).
        stamps, stamps_bytes = self._stamps(config)
        if properties_bytes + stamps_bytes <= MAX_PROPERTIES_BYTES:
            properties.update(stamps)
        else:
            properties.update(stamps_that_fit(stamps, properties_bytes))
        sys_flag = header.sys_flag
        if topic_config.topic_filter_type == "MULTI_TAG":
            sys_flag |= SysFlag.MULTI_TAGS
        put = PutMessageRequest(
            topic=topic,
            queue_id=queue_id,
            body=request.body,
            flag=header.flag,
            properties=properties,
            sys_flag=sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=(ctx.peer_host, ctx.peer_port),
            store_host=self._state.store_host,
            reconsume_times=header.reconsume_times,
        )
        recorder = self._state.recorder
        message_type = message_type_of(properties) if recorder is not None else ""
        rejection = self._route(put)
        if rejection is not None:
            return rejection.response(request)
        # The answer flushes or wakes the flush thread for it (send_answer.py).
        result = self._state.store.put_message(put, wake_flusher=False)
        if recorder is not None and result.status is PutStatus.PUT_OK:
            recorder.count_in(header.topic, message_type, len(request.body))
            if topic != header.topic:
                recorder.count_dlq(header.topic[len(RETRY_GROUP_TOPIC_PREFIX) :], header.topic)
        return self._answers.answer(
            request, result, queue_id, _wait_store_ok(properties), topic, transaction_id=uniq_key
        )

    def _route(self, put: PutMessageRequest) -> Rejection | None:
        """Rewrite a transactional, timed or delayed message for its holding topic (see module doc)."""
        properties = put.properties
        topic = put.topic
        level = delay_level_of(properties)
        state = self._state
        try:
            due_ms = timer_due_ms(properties, now_ms()) if state.config.timer_wheel_enable else None
        except ValueError as exc:
            return Rejection(ResponseCode.MESSAGE_ILLEGAL, f"message to topic[{topic}]: {exc}")
        if is_transactional(properties):
            if level > 0 or due_ms is not None:
                return Rejection(
                    ResponseCode.MESSAGE_ILLEGAL,
                    f"transactional message to topic[{topic}] cannot be delayed or timed",
                )
            to_half(put)
            return None
        if due_ms is not None:
            return self._route_timer(put, due_ms)
        if level > 0 and state.schedule is not None:
            to_schedule(put, level, state.schedule.level_count)
        return None

    def _route_timer(self, put: PutMessageRequest, due_ms: int) -> Rejection | None:
        limit_ms = self._state.config.timer_max_delay_sec * 1000
        ahead_ms = due_ms - now_ms()
        if ahead_ms > limit_ms:
            return Rejection(
                ResponseCode.MESSAGE_ILLEGAL,
                f"timed message to topic[{put.topic}] is due in {ahead_ms} ms, beyond "
                f"timerMaxDelaySec={self._state.config.timer_max_delay_sec}",
            )
        if ahead_ms > 0:
            to_timer(put, due_ms)
        return None

    def _dlq_if_exhausted(
        self, retry_topic_name: str, reconsume_times: int, max_times: int | None
    ) -> str | None:
        """``%DLQ%<group>`` when a re-sent retry message has used up its reconsume attempts."""
        group = retry_topic_name[len(RETRY_GROUP_TOPIC_PREFIX) :]
        problem = group_name_problem(group)
        if problem is not None:
            raise BadRequestError(f"retry topic {retry_topic_name}: {problem}", field="topic")
        group_config = self._state.groups.find_or_create(
            group, self._state.config.auto_create_subscription_group
        )
        limit = (
            max_times
            if max_times is not None
            else (group_config.retry_max_times if group_config else self._state.config.max_reconsume_times)
        )
        if reconsume_times < limit:
            return None
        dead_letter_topic = dlq_topic(group)
        self.ensure_topic(dead_letter_topic, 1, PERM_WRITE)
        return dead_letter_topic

    def ensure_topic(self, topic: str, queue_nums: int, perm: int) -> TopicConfig:
        existing = self._state.topics.get(topic)
        if existing is not None:
            return existing
        created = self._state.topics.find_or_create(topic, queue_nums, perm)
        self._state.on_topics_changed()
        return created

    def _send_batch(
        self, ctx: RequestContext, request: RemotingCommand, header: SendMessageRequestHeader, queue_id: int
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        topic = header.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return request.response(
                ResponseCode.MESSAGE_ILLEGAL, f"batch request does not support retry group {topic}"
            )
        try:
            columns = decode_batch_columns(request.body)
        except RemoteProtocolError as exc:
            return request.response(
                ResponseCode.MESSAGE_ILLEGAL, f"malformed batch body for topic[{topic}]: {exc}"
            )
        flags, bodies, properties_column, encoded_column = columns[:4]
        if not bodies:
            return request.response(ResponseCode.MESSAGE_ILLEGAL, f"empty batch for topic[{topic}]")
        # Only the body can break a limit here: a property string re-encoded from the wire is
        # never longer than the wire's, whose length field cannot exceed the maximum. The store
        # measures the final string (with CLUSTER).
        max_bytes = self._state.store_config.max_message_size_bytes
        if max(map(len, bodies)) > max_bytes:
            index, body = next((i, body) for i, body in enumerate(bodies) if len(body) > max_bytes)
            rejection = check_message_size(topic, len(body), 0, max_bytes)
            if rejection is not None:
                return request.response(rejection.code, f"batch message {index}: {rejection.remark}")
        config = self._state.config
        timer_on = config.timer_wheel_enable
        watched = _BATCH_CHECKED_KEYS_WITH_TIMER if timer_on else _BATCH_CHECKED_KEYS
        timed = False
        # Checks per message only for messages carrying a key they read (most carry none; a
        # plain batch, properties_column None, carries UNIQ_KEY, TAGS and KEYS only).
        if properties_column is not None and not all(map(watched.isdisjoint, properties_column)):
            for index, properties in enumerate(properties_column):
                if properties.get(MessageConst.DELAY_TIME_LEVEL, "0") not in ("", "0"):
                    return request.response(
                        ResponseCode.MESSAGE_ILLEGAL,
                        f"batch message {index} to topic[{topic}] has a delay level",
                    )
                if MessageConst.TRANSACTION_PREPARED in properties and is_transactional(properties):
                    return request.response(
                        ResponseCode.MESSAGE_ILLEGAL,
                        f"batch message {index} to topic[{topic}] is transactional; send it alone",
                    )
                if timer_on and not timed:
                    # A message without any timer property is never timed.
                    timed = not _TIMER_KEYS.isdisjoint(properties)
        wait_store_ok = properties_column is None or any(map(_wait_store_ok, properties_column))
        # The broker's stamps go on in the store (BatchPut.stamps), after each message's own.
        longest = _longest_properties_bytes(properties_column, encoded_column)
        stamps = stamps_that_fit(self._stamps(config)[0], longest)
        batch = BatchPut(
            topic, queue_id, flags, bodies, properties_column, encoded_column, header.sys_flag,
            header.born_timestamp, (ctx.peer_host, ctx.peer_port), self._state.store_host, stamps,
            (columns.unique_keys, columns.tags, columns.keys),
        )  # fmt: skip
        if timed:
            requests = batch.requests()
            rejection = self._route_timed_batch(requests)
            if rejection is not None:
                return rejection.response(request)
            result = self._state.store.put_messages(requests, wake_flusher=False)
        else:
            result = self._state.store.put_batch(batch, wake_flusher=False)
        recorder = self._state.recorder
        if recorder is not None and result.status is PutStatus.PUT_OK:
            # One update per batch; the message type is the first message's (a batch is uniform).
            first = properties_column[0] if properties_column is not None else {}
            recorder.count_in(topic, message_type_of(first), sum(map(len, bodies)), len(bodies))
        return self._answers.answer(request, result, queue_id, wait_store_ok, topic)

    def _route_timed_batch(self, requests: list[PutMessageRequest]) -> Rejection | None:
        """A batch with any timed message goes whole to the timer topic (the store puts one queue).

        Called when the timer wheel is on and a message carries a timer property.

        Untimed or past-due members then fall due at once and are delivered without waiting.
        """
        current_ms = now_ms()
        try:
            due_times = [timer_due_ms(put.properties, current_ms) for put in requests]
        except ValueError as exc:
            return Rejection(ResponseCode.MESSAGE_ILLEGAL, f"batch to topic[{requests[0].topic}]: {exc}")
        if all(due_ms is None for due_ms in due_times):
            return None
        for put, due_ms in zip(requests, due_times, strict=True):
            rejection = self._route_timer(put, due_ms if due_ms is not None else current_ms)
            if rejection is not None:
                return rejection
            if put.topic != TIMER_TOPIC:
                to_timer(put, current_ms)
        return None


def _read_send_header(request: RemotingCommand) -> SendMessageRequestHeader:
    """V2 headers use one-letter names; RocketMQ picks the layout by code, we by the names present."""
    ext = request.ext_fields
    if request.code == RequestCode.SEND_MESSAGE_V2 or ("b" in ext and "topic" not in ext):
        return SendMessageRequestHeader.from_v2_ext(ext)
    return SendMessageRequestHeader.from_ext(ext)


def _topic_text(request: RemotingCommand) -> str | None:
    """The topic a send names, under its V1 or V2 name (None when it names none)."""
    ext = request.ext_fields
    return ext.get("topic", ext.get("b"))


def _longest_properties_bytes(
    properties_column: list[dict[str, str]] | None, encoded_column: list[bytes | None]
) -> int:
    """The longest property string of a batch (a string not kept as bytes is encoded)."""
    longest = max(map(len, filter(None, encoded_column)), default=0)
    if properties_column is not None and None in encoded_column:
        for properties, encoded in zip(properties_column, encoded_column, strict=True):
            if encoded is None:
                longest = max(longest, len(encode_properties(properties).encode()))
    return longest


def _wait_store_ok(properties: dict[str, str]) -> bool:
    """The producer waits for the store unless it set WAIT=false."""
    return properties.get(MessageConst.WAIT_STORE_MSG_OK, "true").lower() != "false"
