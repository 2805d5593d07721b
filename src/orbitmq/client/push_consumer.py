"""PushConsumer: subscribe to topics and have a listener called with the messages (asyncio).

Theory of operation (RocketMQ DefaultMQPushConsumer). A rebalance, run at start, every
``rebalance_interval_ms`` and when the broker says the group's members changed (as it does to
the others when this member stops and unregisters), works out this client's queues: all of them when broadcasting, else this member's share by
the allocate strategy over the group's members (GET_CONSUMER_LIST_BY_GROUP). Each queue owned
gets a :class:`ProcessQueue` and a pull task that long-polls the broker and hands messages to
the consume service, with flow control (``orbitmq.client._push_pull``). A queue given away is
dropped: its pull stops, results of its in-flight messages are ignored, its offset is
committed. Consumed offsets (the lowest unfinished offset of each queue) are committed every
5 s by the ClientInstance, piggybacked on pulls, and at shutdown.

A clustering group also subscribes to %RETRY%<group>, where the broker stores messages sent
back for redelivery; they are delivered with their original topic.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass
from typing import Any

from orbitmq.client._consume_service import (
    ConcurrentConsumeService,
    ConsumeHook,
    ConsumeResult,
    ConsumeService,
    ConsumeSettings,
    MessageListener,
    OrderlyConsumeService,
)
from orbitmq.client._consume_stats import ConsumeStatsRecorder
from orbitmq.client._consumer_config import PushConsumerConfig, queues_of_route
from orbitmq.client._group_api import check_client_config, consumer_ids
from orbitmq.client._instance import ClientInstance
from orbitmq.client._process_queue import ProcessQueue
from orbitmq.client._pull_api import resolve_start_offset, restore_retry_topic, retry_topic, wait_event
from orbitmq.client._push_locks import lock_new_queues, renew_locks, unlock_queues_of
from orbitmq.client._push_pull import PullLoops
from orbitmq.client._route_retry import RouteRetry
from orbitmq.client._trace import TraceConsumeHook, TraceDispatcher
from orbitmq.client.config import split_config
from orbitmq.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteOffsetStore
from orbitmq.client.rebalance import AllocateStrategy, strategy_by_name
from orbitmq.client.selector import MessageSelector, selector_of
from orbitmq.errors import ClientStateError, OrbitError
from orbitmq.model.heartbeat import (
    ConsumerData,
    ConsumeType,
    MessageModel,
)
from orbitmq.model.message import MessageExt, MessageQueue
from orbitmq.protocol.client_bodies import (
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ProcessQueueInfo,
)

__all__ = ["ConsumeResult", "MessageListener", "PushConsumer", "PushConsumerConfig", "queues_of_route"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Owned:
    pq: ProcessQueue
    task: asyncio.Task[None] | None = None


class PushConsumer:
    """A push consumer.

    Args:
        group: the consumer group.
        namesrv_addr: ``host:port;host:port`` of the name servers.
        listener: ``listener(messages) -> ConsumeResult`` (plain or ``async def``); may also be
            set later with :meth:`register_message_listener`.
        **config: :class:`PushConsumerConfig` and :class:`~orbitmq.client.config.ClientConfig`
            fields (e.g. ``instance_name``, ``orderly``, ``consume_from_where``).

    Raises:
        ConfigError: an unknown or invalid option.
    """

    def __init__(
        self, group: str, namesrv_addr: str, listener: MessageListener | None = None, **config: Any
    ) -> None:
        self.group = group
        self.client_config, self.config = split_config(namesrv_addr, config, PushConsumerConfig)
        self._listener = listener
        self._subscriptions: dict[str, MessageSelector] = {}
        self._owned: dict[MessageQueue, _Owned] = {}
        self._instance: ClientInstance | None = None
        self._store: OffsetStore | None = None
        self._service: ConsumeService | None = None
        self._strategy: AllocateStrategy = (
            strategy_by_name(self.config.allocate_strategy)
            if isinstance(self.config.allocate_strategy, str)
            else self.config.allocate_strategy
        )
        self._wake = asyncio.Event()
        self._route_retry = RouteRetry(self.rebalance_soon, self.config.rebalance_interval_ms / 1000)
        self._tasks: list[asyncio.Task[None]] = []
        self._rebalance_lock = asyncio.Lock()
        self._running = False
        self._stats = ConsumeStatsRecorder()
        self._pulls = PullLoops(group, self.config, self._subscriptions, self._stats, self.on_consumed)
        self._started_ms = 0
        self._trace: TraceDispatcher | None = None

    @property
    def clustering(self) -> bool:
        return self.config.message_model is MessageModel.CLUSTERING

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Consume ``topic`` messages that ``expression`` selects.

        Args:
            topic: the topic.
            expression: a tag expression (``"*"`` or ``"a || b"``), or a
                :class:`~orbitmq.client.MessageSelector` (``MessageSelector.by_sql(...)``).

        Raises:
            FilterExpressionError: a SQL92 expression that does not compile.
        """
        self._subscriptions[topic] = selector_of(expression)
        if self._running:
            self.rebalance_soon()

    def unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)
        if self._running:
            self.rebalance_soon()

    def register_message_listener(self, listener: MessageListener) -> None:
        """Set the listener (before :meth:`start`)."""
        if self._running:
            raise ClientStateError(f"consumer group {self.group}: set the listener before start()")
        self._listener = listener

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the group and start consuming.

        Raises:
            ClientStateError: already started, or no listener / subscription.
            RemotingError: no name server answered.
        """
        if self._running:
            raise ClientStateError(f"consumer group {self.group} is already started")
        if self._listener is None or not self._subscriptions:
            raise ClientStateError(
                f"consumer group {self.group} needs a listener and a subscription before start()"
            )
        if self.clustering:
            self._subscriptions.setdefault(retry_topic(self.group), MessageSelector.by_tag("*"))
        instance = ClientInstance.get_or_create(self.client_config)
        self._instance = instance
        instance.register_consumer(self.group, self)
        self._store = (
            RemoteOffsetStore(instance, self.group)
            if self.clustering
            else LocalFileOffsetStore(self.config.offset_store_dir or ".", instance.client_id, self.group)
        )
        settings = ConsumeSettings(
            self.group,
            self.clustering,
            self.config.consume_thread_max,
            self.config.consume_message_batch_max_size,
            self.config.max_reconsume_times,
            self.config.suspend_current_queue_time_ms,
        )
        service_type = OrderlyConsumeService if self.config.orderly else ConcurrentConsumeService
        hooks: list[ConsumeHook] = []
        if self.client_config.enable_msg_trace:
            self._trace = TraceDispatcher(
                self.client_config.namesrv_addr,
                self.group,
                "CONSUME",
                self.client_config.trace_topic,
                request_timeout_ms=self.client_config.request_timeout_ms,
                client_ip=self.client_config.client_ip,
            )
            hooks.append(TraceConsumeHook(self._trace, self.group, self.client_config.client_ip))
        self._service = service_type(settings, self._listener, instance, self, hooks, self._stats)
        self._started_ms = _now_ms()
        self._running = True
        try:
            if self._trace is not None:
                await self._trace.start()
            await instance.start()
            for topic in self._subscriptions:
                await instance.get_route(topic)
            await self._check_sql_subscriptions(instance)
            await instance.send_heartbeat_to_all_brokers()
            self._service.start()
            await self.rebalance()
        except BaseException:
            await self.shutdown()
            raise
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._rebalance_loop(), name=f"orbitmq rebalance {self.group}"))
        if self.config.orderly and self.clustering:
            renewal = renew_locks(
                instance, self.group, self._owned_queues, self.config.lock_renew_interval_ms / 1000
            )
            self._tasks.append(loop.create_task(renewal, name=f"orbitmq lock {self.group}"))

    async def _check_sql_subscriptions(self, instance: ClientInstance) -> None:
        """CHECK_CLIENT_CONFIG for each SQL92 subscription, as the Java consumer does at start.

        Raises:
            BrokerResponseError: a broker does not filter by properties, or cannot compile.
        """
        for topic, selector in self._subscriptions.items():
            if not selector.is_sql:
                continue
            route = await instance.get_route(topic)
            for broker_name in sorted({data.broker_name for data in route.broker_datas} if route else set()):
                await check_client_config(
                    instance, broker_name, self.group, instance.client_id, selector.subscription_data(topic)
                )

    async def shutdown(self) -> None:
        """Stop pulling, let in-flight listener calls finish, commit offsets, leave the group."""
        if not self._running:
            return
        self._running = False
        self._route_retry.cancel()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        pulls = [owned.task for owned in self._owned.values() if owned.task is not None]
        for task in pulls:
            task.cancel()
        await asyncio.gather(*pulls, return_exceptions=True)
        if self._service is not None:
            await self._service.drain(self.config.shutdown_timeout_ms / 1000)
            await self._service.stop()
        if self._trace is not None:
            await self._trace.shutdown()
            self._trace = None
        instance = self._instance
        if instance is None:
            return
        try:
            await self.persist_offsets()
            if self.config.orderly and self.clustering:
                await self._unlock(list(self._owned))
            for owned in self._owned.values():
                owned.pq.dropped = True
            self._owned.clear()
            instance.unregister_consumer(self.group)
            await instance.unregister_client(consumer_group=self.group)
        finally:
            await instance.close()
            self._instance = None

    # -- ConsumerHandle ------------------------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=self.config.message_model,
            consume_from_where=self.config.consume_from_where,
            subscription_data_set=[
                selector.subscription_data(topic) for topic, selector in sorted(self._subscriptions.items())
            ],
        )

    def subscribed_topics(self) -> set[str]:
        return set(self._subscriptions)

    def rebalance_soon(self) -> None:
        self._wake.set()

    async def persist_offsets(self) -> None:
        if self._store is not None and self._owned:
            await self._store.persist(list(self._owned))

    def running_info(self) -> ConsumerRunningInfo:
        """What GET_CONSUMER_RUNNING_INFO answers: settings, subscriptions, queues and rates."""
        instance = self._require_instance()
        now = _now_ms()
        mq_table = {}
        for mq, owned in sorted(self._owned.items()):
            pq = owned.pq
            low, high = pq.cached_offset_range()
            mq_table[mq] = ProcessQueueInfo(
                commit_offset=max(pq.commit_offset(), 0),
                cached_msg_min_offset=low,
                cached_msg_max_offset=high,
                cached_msg_count=pq.msg_count,
                cached_msg_size_in_mi_b=pq.msg_size_bytes // (1024 * 1024),
                locked=pq.locked,
                last_lock_timestamp=pq.last_lock_ms,
                droped=pq.dropped,
                last_pull_timestamp=pq.last_pull_ms,
            )
        properties = {
            "clientId": instance.client_id,
            "PROP_CLIENT_VERSION": "OrbitMQ",
            "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
            "PROP_CONSUMEORDERLY": str(self.config.orderly).lower(),
            "PROP_THREADPOOL_CORE_SIZE": str(self.config.consume_thread_max),
            "PROP_CONSUMER_START_TIMESTAMP": str(self._started_ms),
            "PROP_NAMESERVER_ADDR": ";".join(self.client_config.namesrv_addrs),
            "messageModel": self.config.message_model.name,
            "consumeFromWhere": self.config.consume_from_where.name,
        }
        return ConsumerRunningInfo(
            properties,
            [selector.subscription_data(topic) for topic, selector in sorted(self._subscriptions.items())],
            mq_table,
            self._stats.status(now),
        )

    async def consume_directly(self, message: MessageExt) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY: the listener on one message now (no retry, no offset)."""
        service = self._service
        if service is None:
            return ConsumeMessageDirectlyResult(
                "CR_THROW_EXCEPTION", remark=f"group {self.group} is not started"
            )
        restore_retry_topic([message], self.group)
        mq = MessageQueue(message.topic, "", message.queue_id)
        started = time.perf_counter()
        result, return_type = await service.consume_directly([message], mq)
        spent_ms = int((time.perf_counter() - started) * 1000)
        if result is ConsumeResult.CONSUME_SUCCESS:
            outcome = "CR_SUCCESS"
        else:
            outcome = {2: "CR_THROW_EXCEPTION", 3: "CR_RETURN_NULL"}.get(return_type, "CR_LATER")
        return ConsumeMessageDirectlyResult(
            outcome, self.config.orderly, True, f"listener answered {result.value}", spent_ms
        )

    async def on_reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """Drop the topic's queues, store the new offsets, and take the queues again."""
        store = self._store
        if store is None:
            return
        for mq, queue_offset in offsets.items():
            store.table.update(mq, queue_offset)
        await store.persist(list(offsets))
        for mq in [mq for mq in self._owned if mq.topic == topic]:
            await self._drop(mq, persist=False)
        await self.rebalance()

    # -- rebalance -----------------------------------------------------------------------------

    async def _rebalance_loop(self) -> None:
        interval_s = self.config.rebalance_interval_ms / 1000
        while True:
            try:
                await wait_event(self._wake, interval_s)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.rebalance()
            except Exception:
                logger.exception("rebalance of group %s failed", self.group)

    async def rebalance(self) -> None:
        """Recompute this client's queues for every subscribed topic and start/stop pulls."""
        if not self._running:
            return
        async with self._rebalance_lock:
            routed = True
            for topic in list(self._subscriptions):
                try:
                    routed = await self._rebalance_topic(topic) and routed
                except OrbitError as exc:
                    logger.info("rebalance of group %s, topic %s failed: %s", self.group, topic, exc)
            if routed:
                self._route_retry.found()
            else:
                self._route_retry.missing()

    async def _rebalance_topic(self, topic: str) -> bool:
        """Rebalance ``topic``'s queues; False when the topic has no route (yet)."""
        instance = self._require_instance()
        route = await instance.get_route(topic)
        if route is None:
            return False
        all_queues = queues_of_route(topic, route)
        if self.clustering and all_queues:
            broker_name = random.choice(sorted({mq.broker_name for mq in all_queues}))
            members = await consumer_ids(instance, broker_name, self.group)
            mine = set(self._strategy(self.group, instance.client_id, all_queues, members))
        else:
            mine = set(all_queues)
        for mq in [mq for mq in self._owned if mq.topic == topic and mq not in mine]:
            await self._drop(mq, persist=True)
        added = [mq for mq in sorted(mine) if mq not in self._owned]
        if added and self.config.orderly and self.clustering:
            added = await self._lock_new(added)
        for mq in added:
            try:
                await self._take(mq)
            except OrbitError as exc:
                # The next rebalance tries again; the other queues need not wait for this one.
                logger.info("group %s cannot take %s yet: %s", self.group, mq, exc)
                if self.config.orderly and self.clustering:
                    await self._unlock([mq])
        return True

    async def _lock_new(self, queues: list[MessageQueue]) -> list[MessageQueue]:
        return await lock_new_queues(self._require_instance(), self.group, queues, self.rebalance_soon)

    async def _take(self, mq: MessageQueue) -> None:
        store = self._store
        if store is None:
            return
        start_offset = await self._start_offset(mq, store)
        pq = ProcessQueue()
        pq.reset_to(start_offset)
        if self.config.orderly and self.clustering:
            pq.locked = True
            pq.last_lock_ms = _now_ms()
        store.table.update(mq, start_offset)
        owned = _Owned(pq)
        self._owned[mq] = owned
        assert self._service is not None
        owned.task = asyncio.get_running_loop().create_task(
            self._pulls.run(self._require_instance(), self._service, store, mq, pq), name=f"orbitmq pull {mq}"
        )
        logger.info("group %s takes %s from queue offset %d", self.group, mq, start_offset)

    async def _start_offset(self, mq: MessageQueue, store: OffsetStore) -> int:
        return await resolve_start_offset(
            store,
            self._require_instance(),
            mq,
            self.config.consume_from_where,
            self.config.consume_timestamp_ms,
            retry_topics_from_zero=True,
        )

    async def _drop(self, mq: MessageQueue, *, persist: bool) -> None:
        owned = self._owned.pop(mq, None)
        if owned is None:
            return
        owned.pq.dropped = True
        if owned.task is not None:
            owned.task.cancel()
        store = self._store
        if store is not None:
            if persist:
                await store.persist([mq])
            store.table.remove(mq)
        if self.config.orderly and self.clustering:
            await self._unlock([mq])
        logger.info("group %s drops %s", self.group, mq)

    async def _unlock(self, queues: list[MessageQueue]) -> None:
        await unlock_queues_of(self._require_instance(), self.group, queues)

    def _owned_queues(self) -> dict[MessageQueue, ProcessQueue]:
        return {mq: owned.pq for mq, owned in self._owned.items()}

    # -- OffsetSink ------------------------------------------------------------------------------

    def on_consumed(self, mq: MessageQueue, pq: ProcessQueue, commit_offset: int) -> None:
        if commit_offset >= 0 and not pq.dropped and self._store is not None:
            self._store.table.update(mq, commit_offset, increase_only=True)
        self._pulls.on_room(pq)

    async def queue_lockable(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        if not self.clustering:
            return True
        return pq.locked and _now_ms() - pq.last_lock_ms < 30_000

    def _require_instance(self) -> ClientInstance:
        if self._instance is None:
            raise ClientStateError(f"consumer group {self.group} is not started")
        return self._instance


def _now_ms() -> int:
    return int(time.time() * 1000)
