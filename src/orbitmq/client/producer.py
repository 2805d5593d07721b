"""The asyncio producer: sync-style, async, oneway, batch and ordered sends.

A :class:`Producer` shares its :class:`~orbitmq.client._instance.ClientInstance` (connections,
routes, heartbeats) with every other client of its client id. A send:

1. validates the message (topic rule, non-empty body, size) before any network work;
2. stamps ``UNIQ_KEY`` and ``WAIT=true`` and zlib-compresses a body over
   ``compress_msg_body_over_howmuch`` bytes (consumers inflate it transparently);
3. finds the topic's writable queues; for a topic the name servers do not know, it borrows
   the ``TBW102`` template's route (at most ``default_topic_queue_nums`` queues per broker)
   and the broker creates the topic on first send;
4. picks a queue (round-robin, avoiding the broker that just failed, and, with
   ``send_latency_fault_enable``, brokers isolated for slowness);
5. retries on another broker up to ``retry_times_when_send_failed`` times, only when the
   fault's class says ``retriable``, refreshing the route when it says ``refresh_route``,
   all within the one ``timeout_ms`` budget.

Ordered sends (:meth:`Producer.send_orderly`) and oneway sends are never retried, as in
RocketMQ: a retry on another queue would break the order, and oneway has no answer to judge.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from orbitmq.client._instance import ClientInstance
from orbitmq.client._queue_select import LatencyFaultTable, TopicPublishInfo, publish_info_from_route
from orbitmq.client._send import (
    PreparedBatch,
    PreparedMessage,
    SendResult,
    SendStatus,
    batch_send_results,
    build_send_request,
    parse_send_response,
    prepare_batches,
    prepare_message,
    validate_message,
)
from orbitmq.client._trace import TraceDispatcher, now_ms, pub_record
from orbitmq.client.config import ClientConfig, ProducerConfig, split_config
from orbitmq.errors import ClientStateError, NoRouteError, OrbitError, RequestTimeoutError
from orbitmq.model.message import Message, MessageConst, MessageExt, MessageQueue
from orbitmq.protocol.message_id import UniqKeyGenerator
from orbitmq.protocol.tags import java_string_hash

__all__ = ["MessageQueueSelector", "Producer", "SendCallback", "select_queue_by_hash"]

logger = logging.getLogger(__name__)

SendCallback = Callable[[SendResult | None, BaseException | None], None]
"""``callback(result, error)``: exactly one of the two is not ``None``."""

MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
"""``selector(queues, message, arg) -> queue`` for ordered sends."""

_Attempt = Callable[[MessageQueue, int], Awaitable[SendResult]]


def select_queue_by_hash(queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
    """RocketMQ's SelectMessageQueueByHash: Java ``hashCode`` of ``str(arg)`` modulo the count.

    Java's string hash is stable across processes, unlike Python's ``hash``, so the same key
    lands on the same queue whichever producer sends it.
    """
    return queues[abs(java_string_hash(str(arg))) % len(queues)]


class _State(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    SHUTDOWN = "shutdown"


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Producer:
    """Sends messages to the brokers of a RocketMQ (or OrbitMQ) cluster.

    Args:
        group: the producer group (named in heartbeats and stored with transactional messages).
        namesrv_addr: name servers as ``"host:port;host:port"``.
        config: producer settings; alternatively pass :class:`ProducerConfig` fields as keywords.
        **options: :class:`ProducerConfig` and :class:`ClientConfig` fields
            (``send_msg_timeout_ms``, ``retry_times_when_send_failed``, ``instance_name``, ...).

    Raises:
        ConfigError: an unknown option or an invalid value.
    """

    def __init__(
        self, group: str, namesrv_addr: str, *, config: ProducerConfig | None = None, **options: Any
    ) -> None:
        client_config, own_config = split_config(namesrv_addr, options, ProducerConfig)
        self.group = group
        self.client_config: ClientConfig = client_config
        self.config: ProducerConfig = config or own_config
        self._state = _State.CREATED
        self._instance: ClientInstance | None = None
        self._keys = UniqKeyGenerator(client_config.client_ip)
        self._publish: dict[str, TopicPublishInfo] = {}
        self._faults = LatencyFaultTable(self.config.latency_max_ms, self.config.not_available_duration_ms)
        self._pending: set[asyncio.Task[SendResult]] = set()
        self._trace: TraceDispatcher | None = None
        self._reply_topics_known: set[str] = set()

    # -- life cycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the client instance, register the group and heartbeat it to every broker.

        Like RocketMQ's producer, it learns the cluster's brokers from the auto-create template's
        route (TBW102) and heartbeats to each, so a broker can ask a just-started transaction
        producer to check a transaction another producer of its group left undecided. A name
        server that does not answer is logged, not raised: sends retry the route.

        Raises:
            ClientStateError: the producer was started before or shut down.
            ClientStateError: another producer of this client id uses the same group.
        """
        if self._state is not _State.CREATED:
            raise ClientStateError(f"producer {self.group} is {self._state.value}; it can start only once")
        instance = ClientInstance.get_or_create(self.client_config)
        try:
            instance.register_producer(self.group, self)
            await instance.start()
        except BaseException:
            await instance.close()
            raise
        self._instance = instance
        self._state = _State.RUNNING
        if self.client_config.enable_msg_trace:
            self._trace = TraceDispatcher(
                self.client_config.namesrv_addr,
                self.group,
                "PRODUCE",
                self.client_config.trace_topic,
                request_timeout_ms=self.client_config.request_timeout_ms,
                client_ip=self.client_config.client_ip,
            )
            await self._trace.start()
        try:
            # Every broker of the cluster hears of this group now, not at the first send.
            await instance.reach_all_brokers(self.config.create_topic_key)
        except OrbitError as exc:
            logger.info(
                "producer %s: cannot reach the brokers yet (%s); the first send will", self.group, exc
            )

    async def shutdown(self) -> None:
        """Wait for async sends in flight, leave the group on every broker, release the instance."""
        if self._state is not _State.RUNNING or self._instance is None:
            self._state = _State.SHUTDOWN
            return
        self._state = _State.SHUTDOWN
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=self.config.send_msg_timeout_ms / 1000)
        instance = self._instance
        if self._trace is not None:
            await self._trace.shutdown()
            self._trace = None
        instance.unregister_producer(self.group)
        await instance.unregister_client(producer_group=self.group)
        await instance.close()

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    def _running_instance(self) -> ClientInstance:
        if self._state is not _State.RUNNING or self._instance is None:
            raise ClientStateError(f"producer {self.group} is {self._state.value}, not running")
        return self._instance

    # -- sends -----------------------------------------------------------------------------------

    async def send(self, message: Message, timeout_ms: int | None = None) -> SendResult:
        """Send ``message`` and wait until the broker has stored it.

        Args:
            message: the message; its ``properties`` gain ``UNIQ_KEY`` (``SendResult.msg_id``).
            timeout_ms: budget for every attempt together (default ``send_msg_timeout_ms``).

        Returns:
            The broker's answer. A status other than ``OK`` still means "stored".

        Raises:
            MessageValidationError: the message breaks a rule (nothing was sent).
            ClientStateError: the producer is not running.
            NoRouteError: no writable queue for the topic.
            OrbitError: the last fault once the retry budget or the timeout is used up.
        """
        return await self._send(message, timeout_ms, self.config.retry_times_when_send_failed)

    def send_async(
        self, message: Message, callback: SendCallback | None = None, timeout_ms: int | None = None
    ) -> asyncio.Future[SendResult]:
        """Start sending ``message`` and return a future of its :class:`SendResult`.

        Retries use ``retry_times_when_send_async_failed``. ``callback(result, error)`` runs on
        the event loop when the send ends; with a callback, the future's fault is considered
        handled. :meth:`shutdown` waits for sends still in flight.

        Raises:
            MessageValidationError: the message breaks a rule (raised at once).
            ClientStateError: the producer is not running.
        """
        self._running_instance()
        validate_message(message, self.config.max_message_size_bytes)
        task = asyncio.get_running_loop().create_task(
            self._send(message, timeout_ms, self.config.retry_times_when_send_async_failed)
        )
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        if callback is not None:
            task.add_done_callback(lambda done: _run_callback(callback, done))
        return task

    async def request(self, message: Message, timeout_ms: int | None = None) -> MessageExt:
        """Send ``message`` as a request and wait for its reply (RocketMQ's request-reply).

        The responder, on receiving it, sends ``create_reply_message(request, body)`` with
        any producer; the broker pushes that reply to this client.

        Args:
            message: the request; it gains ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and ``TTL``.
            timeout_ms: how long to wait for the reply, sending included (default
                ``send_msg_timeout_ms``).

        Returns:
            The reply message.

        Raises:
            RequestTimeoutError: no reply within ``timeout_ms``.
            MessageValidationError, ClientStateError, NoRouteError, OrbitError: as :meth:`send`.
        """
        instance = self._running_instance()
        budget_ms = timeout_ms or self.config.send_msg_timeout_ms
        deadline = time.monotonic() + budget_ms / 1000
        correlation_id = str(uuid.uuid4())
        message.properties[MessageConst.CORRELATION_ID] = correlation_id
        message.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT] = instance.client_id
        message.properties[MessageConst.MESSAGE_TTL] = str(budget_ms)
        await self._introduce_for_replies(message.topic)
        future = instance.expect_reply(correlation_id)
        try:
            await self.send(message, budget_ms)
            remaining_s = max(deadline - time.monotonic(), 0.001)
            try:
                return await asyncio.wait_for(future, remaining_s)
            except TimeoutError:
                raise RequestTimeoutError(
                    f"no reply to request {message.uniq_key} on topic {message.topic} within {budget_ms} ms"
                ) from None
        finally:
            instance.forget_reply(correlation_id)

    async def _introduce_for_replies(self, topic: str) -> None:
        """Heartbeat every broker of the request topic's clusters (once per topic).

        A reply goes to ``<cluster>_REPLY_TOPIC`` on any broker of the cluster, which pushes
        it over the connection this client's heartbeat registered there.
        """
        if topic in self._reply_topics_known:
            return
        instance = self._running_instance()
        route = await instance.get_route(topic)
        clusters = {data.cluster for data in route.broker_datas} if route is not None else set()
        for cluster in sorted(clusters):
            await instance.get_route(f"{cluster}_REPLY_TOPIC")
        await instance.send_heartbeat_to_all_brokers()
        self._reply_topics_known.add(topic)

    async def send_oneway(self, message: Message) -> None:
        """Send ``message`` without waiting for any answer (no retry, no result).

        Raises:
            MessageValidationError, ClientStateError, NoRouteError: as :meth:`send`.
            RemotingError: the broker could not be connected.
        """
        instance = self._running_instance()
        validate_message(message, self.config.max_message_size_bytes)
        prepared = self._prepare(message)
        info = await self._publish_info(message.topic)
        queue = self._select(info, None)
        addr = self._broker_addr(instance, queue)
        request = self._request(queue, prepared, oneway=True)
        await instance.remoting.invoke_oneway(addr, request)

    async def send_orderly(
        self,
        message: Message,
        sharding_key: Any,
        selector: MessageQueueSelector = select_queue_by_hash,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send ``message`` to the queue ``selector(queues, message, sharding_key)`` picks.

        Messages with one key go to one queue, so consumers see them in send order. There is
        no retry on another queue: that would break the order (RocketMQ semantics).

        Raises:
            MessageValidationError, ClientStateError, NoRouteError: as :meth:`send`.
            OrbitError: the send failed.
        """
        self._running_instance()
        validate_message(message, self.config.max_message_size_bytes)
        prepared = self._prepare(message)
        info = await self._publish_info(message.topic)
        queue = selector(info.queues, message, sharding_key)
        started_ms = now_ms()
        result = await self._attempt_single(prepared, info)(
            queue, timeout_ms or self.config.send_msg_timeout_ms
        )
        self._trace_sent(message, result, started_ms)
        return result

    async def send_batch(
        self, messages: Sequence[Message], timeout_ms: int | None = None
    ) -> list[SendResult]:
        """Send messages of one topic as SEND_BATCH_MESSAGE requests; wait until stored.

        The messages are split into requests of at most ``max_message_size_bytes``; each
        request goes to one queue (with the same retries as :meth:`send`) and its messages
        are stored consecutively there. Requests are sent one after another, in order.

        Returns:
            One :class:`SendResult` per message, in the order given (each with its own
            ``msg_id``, ``offset_msg_id`` and ``queue_offset``).

        Raises:
            MessageValidationError: empty list, mixed topics, a delayed or empty message, or a
                message too large (nothing was sent).
            ClientStateError, NoRouteError, OrbitError: as :meth:`send`; messages of earlier
                requests may have been stored.
        """
        self._running_instance()
        batches = prepare_batches(messages, self._keys, self.config.max_message_size_bytes)
        results: list[SendResult] = []
        for batch in batches:
            result = await self._with_retries(
                batch.topic, self._attempt_batch(batch), timeout_ms, self.config.retry_times_when_send_failed
            )
            results.extend(batch_send_results(result, batch.uniq_keys))
        if self._trace is not None:
            started_ms = now_ms()
            for message, result in zip(messages, results, strict=False):
                self._trace_sent(message, result, started_ms)
        return results

    # -- internals -------------------------------------------------------------------------------

    async def _send(self, message: Message, timeout_ms: int | None, retries: int) -> SendResult:
        self._running_instance()
        validate_message(message, self.config.max_message_size_bytes)
        prepared = self._prepare(message)
        info = await self._publish_info(message.topic)
        started_ms = now_ms()
        result = await self._with_retries(
            message.topic, self._attempt_single(prepared, info), timeout_ms, retries
        )
        self._trace_sent(message, result, started_ms)
        return result

    def _trace_sent(self, message: Message, result: SendResult, started_ms: int) -> None:
        """A Pub trace record of a stored message (when tracing, and the broker wants traces)."""
        trace = self._trace
        if trace is None or not result.trace_on or message.topic.startswith(trace.trace_topic):
            return
        instance = self._instance
        store_host = (
            instance.find_broker_addr(result.message_queue.broker_name) if instance is not None else None
        )
        trace.append(
            [
                pub_record(
                    self.group,
                    message,
                    started_ms=started_ms,
                    cost_ms=now_ms() - started_ms,
                    msg_id=result.msg_id,
                    offset_msg_id=result.offset_msg_id,
                    store_host=store_host or "",
                    region_id=result.region_id,
                    success=result.status is SendStatus.OK,
                )
            ]
        )

    def _prepare(self, message: Message) -> PreparedMessage:
        return prepare_message(
            message,
            self._keys,
            compress_over_bytes=self.config.compress_msg_body_over_howmuch,
            compress_level=self.config.compress_level,
        )

    def _request(self, queue: MessageQueue, prepared: PreparedMessage, *, oneway: bool = False) -> Any:
        return build_send_request(
            self.group,
            queue,
            body=prepared.body,
            flag=prepared.flag,
            sys_flag=prepared.sys_flag,
            properties=prepared.properties,
            default_topic=self.config.create_topic_key,
            default_topic_queue_nums=self.config.default_topic_queue_nums,
            oneway=oneway,
        )

    def _attempt_single(self, prepared: PreparedMessage, info: TopicPublishInfo) -> _Attempt:
        async def attempt(queue: MessageQueue, remaining_ms: int) -> SendResult:
            instance = self._running_instance()
            addr = self._broker_addr(instance, queue)
            response = await instance.remoting.invoke(addr, self._request(queue, prepared), remaining_ms)
            return parse_send_response(response, queue, prepared.uniq_key)

        return attempt

    def _attempt_batch(self, batch: PreparedBatch) -> _Attempt:
        async def attempt(queue: MessageQueue, remaining_ms: int) -> SendResult:
            instance = self._running_instance()
            request = build_send_request(
                self.group,
                queue,
                body=batch.body,
                batch=True,
                default_topic=self.config.create_topic_key,
                default_topic_queue_nums=self.config.default_topic_queue_nums,
            )
            addr = self._broker_addr(instance, queue)
            response = await instance.remoting.invoke(addr, request, remaining_ms)
            return parse_send_response(response, queue, ",".join(batch.uniq_keys))

        return attempt

    async def _with_retries(
        self, topic: str, attempt: _Attempt, timeout_ms: int | None, retries: int
    ) -> SendResult:
        """Run ``attempt`` on chosen queues until it succeeds or the budget is spent."""
        budget_ms = timeout_ms or self.config.send_msg_timeout_ms
        deadline_ms = _monotonic_ms() + budget_ms
        info = await self._publish_info(topic)
        failed_broker: str | None = None
        last_error: OrbitError | None = None
        for attempt_number in range(1 + retries):
            remaining_ms = deadline_ms - _monotonic_ms()
            if remaining_ms <= 0:
                break
            queue = self._select(info, failed_broker)
            started_ms = _monotonic_ms()
            try:
                result = await attempt(queue, remaining_ms)
            except OrbitError as exc:
                self._report_latency(queue.broker_name, _monotonic_ms() - started_ms, failed=True)
                if not exc.retriable:
                    raise
                logger.info(
                    "send to %s of topic %s failed (attempt %d): %s",
                    queue.broker_name,
                    topic,
                    attempt_number + 1,
                    exc,
                )
                last_error, failed_broker = exc, queue.broker_name
                # A broker that stops answering may be a deposed master (paused, cut off): its
                # group may have a new master the route already names.
                if exc.refresh_route or isinstance(exc, RequestTimeoutError):
                    info = await self._publish_info(topic, refresh=True)
                continue
            self._report_latency(queue.broker_name, _monotonic_ms() - started_ms, failed=False)
            if (
                result.status is SendStatus.OK
                or not self.config.retry_another_broker_when_not_store_ok
                or attempt_number == retries
            ):
                return result
            failed_broker = queue.broker_name
        if last_error is not None:
            raise last_error
        raise RequestTimeoutError(f"sending to topic {topic} used up its {budget_ms} ms budget")

    def _select(self, info: TopicPublishInfo, failed_broker: str | None) -> MessageQueue:
        if self.config.send_latency_fault_enable:
            return self._faults.select(info, failed_broker)
        return info.select(failed_broker)

    def _report_latency(self, broker_name: str, latency_ms: int, *, failed: bool) -> None:
        if self.config.send_latency_fault_enable:
            self._faults.update(broker_name, latency_ms, failed=failed)

    def _broker_addr(self, instance: ClientInstance, queue: MessageQueue) -> str:
        addr = instance.find_broker_addr(queue.broker_name, only_this=True)
        if addr is None:
            raise NoRouteError(f"no master address for broker {queue.broker_name} of topic {queue.topic}")
        return addr

    async def _publish_info(self, topic: str, *, refresh: bool = False) -> TopicPublishInfo:
        """The writable queues of ``topic`` from the route cache, or the template route."""
        instance = self._running_instance()
        info = self._publish.get(topic)
        if info is not None and not refresh and self._still_valid(instance, info):
            return info
        route = await instance.get_route(topic, refresh=refresh)
        if route is not None:
            info = publish_info_from_route(topic, route, now_ms=_monotonic_ms())
        else:
            template = self.config.create_topic_key
            default_route = await instance.get_route(template, refresh=refresh)
            if default_route is None:
                raise NoRouteError(
                    f"no route for topic {topic} and none for the auto-create template {template}"
                )
            info = publish_info_from_route(
                topic,
                default_route,
                from_default=True,
                default_queue_nums=self.config.default_topic_queue_nums,
                now_ms=_monotonic_ms(),
            )
        if not info.queues:
            if not refresh:
                # A cached route without a master (one just failed over) is asked for again at
                # once, not kept until the next route poll.
                return await self._publish_info(topic, refresh=True)
            raise NoRouteError(f"topic {topic} has no writable queue on any broker with a master")
        self._publish[topic] = info
        return info

    def _still_valid(self, instance: ClientInstance, info: TopicPublishInfo) -> bool:
        route = instance.cached_route(info.topic)
        if route is not None:
            return not info.from_default and info.route is route
        # The template route is reused until the next route poll could know the topic.
        age_ms = _monotonic_ms() - info.built_at_ms
        return info.from_default and age_ms < self.client_config.poll_name_server_interval_ms


def _run_callback(callback: SendCallback, done: asyncio.Future[SendResult]) -> None:
    if done.cancelled():
        callback(None, asyncio.CancelledError())
        return
    error = done.exception()
    try:
        callback(None, error) if error is not None else callback(done.result(), None)
    except Exception:
        logger.exception("send callback raised")
