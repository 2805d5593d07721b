"""PullConsumer: the application asks for messages (RocketMQ's DefaultLitePullConsumer, asyncio).

Queues come from :meth:`PullConsumer.assign` (fixed) or :meth:`PullConsumer.subscribe`
(shared among the group's members by a rebalance, as for push consumers). For every queue a
prefetch task long-polls the broker and keeps up to ``pull_threshold_for_queue`` messages
buffered as raw pull bodies (asking for more than ``pull_batch_size`` per pull while the
queue has a backlog: ``_pull_api.PullSizer``); :meth:`poll` hands out what is buffered,
decoding only then, and moves the queue's consumed offset past it. With ``auto_commit`` the consumed offsets are
committed every ``persist_consumer_offset_interval_ms`` and at shutdown; otherwise call
:meth:`commit_sync` / :meth:`commit_async`.

:meth:`pull_range` reads a fixed offset range with no prefetch and no commits (bulk readers
such as the Spark connector); :meth:`pull_range_raw` yields the undecoded record buffers.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from orbitmq.client._consumer_config import PullConsumerConfig, queues_of_route
from orbitmq.client._group_api import consumer_ids
from orbitmq.client._instance import ClientInstance
from orbitmq.client._pull_api import (
    PULL_DELAY_ON_ERROR_S,
    PullNodeTable,
    PullRequestSpec,
    PullSizer,
    PullStatus,
    decode_pull_body,
    pull_queue,
    query_max_offset,
    query_min_offset,
    resolve_start_offset,
    search_offset,
    wait_event,
)
from orbitmq.client._route_retry import RouteRetry
from orbitmq.client.config import split_config
from orbitmq.client.offset_store import RemoteOffsetStore
from orbitmq.client.rebalance import AllocateStrategy, strategy_by_name
from orbitmq.client.selector import MessageSelector, selector_of
from orbitmq.errors import ClientError, ClientStateError, OrbitError, RemoteProtocolError, TopicNotExistError
from orbitmq.model.heartbeat import (
    ConsumerData,
    ConsumeType,
    MessageModel,
)
from orbitmq.model.message import MessageExt, MessageQueue

__all__ = ["PullConsumer", "PullConsumerConfig", "RawBatch"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RawBatch:
    """Undecoded stored records of one queue: ``body`` holds records from ``start_offset`` on.

    Decode with ``orbitmq.protocol.message_codec.decode_stored_messages(body, decompress=True)``.
    Records filtered out by tag on the broker are absent; ``next_offset`` is where the next
    batch starts.
    """

    mq: MessageQueue
    start_offset: int
    next_offset: int
    body: bytes


@dataclass(slots=True)
class _QueueState:
    next_pull_offset: int | None = None
    consumed_offset: int | None = None
    buffer: deque[RawBatch] = field(default_factory=deque)
    buffered_estimate: int = 0
    task: asyncio.Task[None] | None = None
    space: asyncio.Event = field(default_factory=asyncio.Event)


class PullConsumer:
    """A lite pull consumer.

    Args:
        group: the consumer group (offsets are committed under it).
        namesrv_addr: ``host:port;host:port`` of the name servers.
        **config: :class:`PullConsumerConfig` and :class:`~orbitmq.client.config.ClientConfig` fields.

    Raises:
        ConfigError: an unknown or invalid option.
    """

    def __init__(self, group: str, namesrv_addr: str, **config: Any) -> None:
        self.group = group
        self.client_config, self.config = split_config(namesrv_addr, config, PullConsumerConfig)
        self._strategy: AllocateStrategy = (
            strategy_by_name(self.config.allocate_strategy)
            if isinstance(self.config.allocate_strategy, str)
            else self.config.allocate_strategy
        )
        self._queues: dict[MessageQueue, _QueueState] = {}
        self._subscriptions: dict[str, MessageSelector] = {}
        # Per queue, the broker the last pull answer suggested (a slave while the master is away).
        self._pull_nodes = PullNodeTable()
        self._instance: ClientInstance | None = None
        self._store: RemoteOffsetStore | None = None
        self._data_ready = asyncio.Event()
        self._wake = asyncio.Event()
        self._route_retry = RouteRetry(self.rebalance_soon, self.config.rebalance_interval_ms / 1000)
        self._rebalance_task: asyncio.Task[None] | None = None
        self._running = False
        self._cursor = 0
        self._rebalance_lock = asyncio.Lock()

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and start prefetching the assigned or subscribed queues.

        Raises:
            ClientStateError: already started.
        """
        if self._running:
            raise ClientStateError(f"pull consumer group {self.group} is already started")
        instance = ClientInstance.get_or_create(self.client_config)
        self._instance = instance
        self._store = RemoteOffsetStore(instance, self.group)
        instance.register_consumer(self.group, self)
        self._running = True
        try:
            await instance.start()
            for topic in self._subscriptions:
                await instance.get_route(topic)
            await instance.send_heartbeat_to_all_brokers()
        except BaseException:
            await self.shutdown()
            raise
        for mq in self._queues:
            self._start_prefetch(mq)
        if self._subscriptions:
            await self.rebalance()
            self._rebalance_task = asyncio.get_running_loop().create_task(self._rebalance_loop())

    async def shutdown(self) -> None:
        """Stop prefetching, commit consumed offsets (with auto_commit) and leave the group."""
        if not self._running:
            return
        self._running = False
        self._route_retry.cancel()
        tasks = [state.task for state in self._queues.values() if state.task is not None]
        if self._rebalance_task is not None:
            tasks.append(self._rebalance_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        instance = self._instance
        if instance is None:
            return
        try:
            if self.config.auto_commit:
                await self.commit_sync()
            instance.unregister_consumer(self.group)
            await instance.unregister_client(consumer_group=self.group)
        finally:
            await instance.close()
            self._instance = None

    # -- assignment ----------------------------------------------------------------------------

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted.

        Raises:
            TopicNotExistError: the name server does not know the topic.
        """
        route = await self._require_instance().get_route(topic, refresh=True)
        if route is None:
            raise TopicNotExistError(17, f"topic {topic} does not exist")
        return queues_of_route(topic, route)

    def assign(self, queues: list[MessageQueue]) -> None:
        """Consume exactly ``queues`` (replacing any earlier assignment)."""
        wanted = set(queues)
        for mq in [mq for mq in self._queues if mq not in wanted]:
            self._release(mq)
        for mq in sorted(wanted):
            if mq not in self._queues:
                self._queues[mq] = _QueueState()
                if self._running:
                    self._start_prefetch(mq)

    def assignment(self) -> list[MessageQueue]:
        return sorted(self._queues)

    async def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Consume ``topic`` messages that ``expression`` selects (a tag expression or a
        :class:`~orbitmq.client.MessageSelector`), sharing its queues with the group's members.
        """
        self._subscriptions[topic] = selector_of(expression)
        if self._running:
            instance = self._require_instance()
            await instance.get_route(topic)
            # The broker must know this member before the rebalance asks for the member list.
            await instance.send_heartbeat_to_all_brokers()
            await self.rebalance()
            if self._rebalance_task is None:
                self._rebalance_task = asyncio.get_running_loop().create_task(self._rebalance_loop())

    def _release(self, mq: MessageQueue) -> None:
        state = self._queues.pop(mq, None)
        if state is not None and state.task is not None:
            state.task.cancel()

    # -- offsets -------------------------------------------------------------------------------

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Make the next poll of ``mq`` start at queue offset ``offset`` (drops its buffer).

        Raises:
            ClientStateError: ``mq`` is not assigned.
        """
        state = self._queues.get(mq)
        if state is None:
            raise ClientStateError(f"cannot seek {mq}: it is not assigned to group {self.group}")
        if state.task is not None:
            state.task.cancel()
        fresh = _QueueState(next_pull_offset=offset, consumed_offset=offset)
        self._queues[mq] = fresh
        if self._running:
            self._start_prefetch(mq)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        self.seek(mq, await query_min_offset(await self._routed(mq), mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        self.seek(mq, await query_max_offset(await self._routed(mq), mq))

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first queue offset of ``mq`` stored at or after ``timestamp_ms``."""
        return await search_offset(await self._routed(mq), mq, timestamp_ms)

    async def committed(self, mq: MessageQueue) -> int | None:
        """The group's committed offset of ``mq`` on its broker (None when it never committed)."""
        await self._routed(mq)
        assert self._store is not None
        return await self._store.load(mq)

    async def commit_sync(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit ``offsets`` (default: the consumed offset of every assigned queue) to the brokers."""
        store = self._store
        if store is None:
            raise ClientStateError(f"pull consumer group {self.group} is not started")
        if offsets is None:
            offsets = {
                mq: s.consumed_offset for mq, s in self._queues.items() if s.consumed_offset is not None
            }
        for mq, queue_offset in offsets.items():
            await self._routed(mq)
            store.table.update(mq, queue_offset)
        await store.persist(list(offsets))

    def commit_async(self, offsets: dict[MessageQueue, int] | None = None) -> asyncio.Task[None]:
        """Start :meth:`commit_sync` in the background and return its task."""
        return asyncio.get_running_loop().create_task(self.commit_sync(offsets))

    # -- reading -------------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 1000) -> list[MessageExt]:
        """Buffered messages of the assigned queues (empty after ``timeout_ms`` without any)."""
        messages: list[MessageExt] = []
        for batch in await self.poll_raw(timeout_ms):
            selector = self._subscriptions.get(batch.mq.topic, _ALL)
            try:
                messages += decode_pull_body(batch.body, selector, batch.mq)
            except RemoteProtocolError as exc:
                # Records an OrbitMQ broker serves always decode (its store checks them); a
                # batch from elsewhere that does not must not cost the other batches.
                logger.error(
                    "queue offsets [%d, %d) of %s skipped: %s",
                    batch.start_offset,
                    batch.next_offset,
                    batch.mq,
                    exc,
                )
        return messages

    async def poll_raw(self, timeout_ms: int = 1000) -> list[RawBatch]:
        """Like :meth:`poll`, but undecoded record buffers (no client-side tag re-check)."""
        if not self._running:
            raise ClientStateError(f"pull consumer group {self.group} is not started")
        batches = self._take_buffered()
        if not batches and timeout_ms > 0:
            self._data_ready.clear()
            try:
                await wait_event(self._data_ready, timeout_ms / 1000)
            except TimeoutError:
                return []
            batches = self._take_buffered()
        return batches

    def _take_buffered(self) -> list[RawBatch]:
        taken: list[RawBatch] = []
        budget = self.config.max_poll_records
        queues = list(self._queues.items())
        if not queues:
            return taken
        # Start at a rotating queue so that one busy queue cannot starve the others.
        self._cursor = (self._cursor + 1) % len(queues)
        for _mq, state in queues[self._cursor :] + queues[: self._cursor]:
            while state.buffer and budget > 0:
                batch = state.buffer.popleft()
                taken.append(batch)
                state.consumed_offset = batch.next_offset
                state.buffered_estimate -= self._estimate(batch)
                budget -= self._estimate(batch)
            state.space.set()
        return taken

    def _estimate(self, batch: RawBatch) -> int:
        return max(batch.next_offset - batch.start_offset, 1)

    async def pull_range(
        self,
        mq: MessageQueue,
        start_offset: int,
        end_offset: int,
        *,
        expression: str | MessageSelector = "*",
        max_msg_nums: int = 32,
    ) -> AsyncIterator[list[MessageExt]]:
        """Read queue offsets ``[start_offset, end_offset)`` of ``mq`` in order, in batches.

        No prefetch state and no offset commits. Stops early when the queue ends before
        ``end_offset``.

        Raises:
            ClientError: ``start_offset`` lies below the queue's min offset (data was removed).
        """
        selector = selector_of(expression)
        async for batch in self.pull_range_raw(
            mq, start_offset, end_offset, expression=selector, max_msg_nums=max_msg_nums
        ):
            messages = [m for m in decode_pull_body(batch.body, selector, mq) if m.queue_offset < end_offset]
            if messages:
                yield messages

    async def pull_range_raw(
        self,
        mq: MessageQueue,
        start_offset: int,
        end_offset: int,
        *,
        expression: str | MessageSelector = "*",
        max_msg_nums: int = 32,
    ) -> AsyncIterator[RawBatch]:
        """:meth:`pull_range` yielding undecoded record buffers (the last may pass ``end_offset``).

        A run the broker filtered out entirely yields a batch with an empty body, so the caller
        always knows how far the range was read (``next_offset`` of the last batch): short of
        ``end_offset`` means the queue (or the member that answered) ended before it.
        """
        invoker = await self._routed(mq)
        spec = PullRequestSpec(self.group, selector_of(expression), max_msg_nums)
        queue_offset = start_offset
        while queue_offset < end_offset:
            wanted = PullRequestSpec(spec.group, spec.selector, min(max_msg_nums, end_offset - queue_offset))
            result = await pull_queue(
                invoker, mq, queue_offset, wanted, suspend=False, nodes=self._pull_nodes
            )
            if result.status is PullStatus.FOUND:
                yield RawBatch(mq, queue_offset, result.next_begin_offset, result.body)
            elif result.status is PullStatus.NO_MATCHED_MSG and result.next_begin_offset > queue_offset:
                yield RawBatch(mq, queue_offset, result.next_begin_offset, b"")
            elif result.status is PullStatus.OFFSET_ILLEGAL and queue_offset < result.min_offset:
                raise ClientError(
                    f"{mq}: queue offset {queue_offset} is below the min offset {result.min_offset}; "
                    f"messages [{queue_offset}, {result.min_offset}) were removed"
                )
            elif result.status is not PullStatus.NO_MATCHED_MSG:
                return
            if result.next_begin_offset <= queue_offset:
                return
            queue_offset = result.next_begin_offset

    # -- prefetch ------------------------------------------------------------------------------

    def _start_prefetch(self, mq: MessageQueue) -> None:
        state = self._queues[mq]
        state.task = asyncio.get_running_loop().create_task(
            self._prefetch(mq, state), name=f"orbitmq prefetch {mq}"
        )

    async def _prefetch(self, mq: MessageQueue, state: _QueueState) -> None:
        instance = await self._routed(mq)
        if state.next_pull_offset is None:
            state.next_pull_offset = await self._start_offset(mq)
            state.consumed_offset = state.next_pull_offset
        selector = self._subscriptions.get(mq.topic, _ALL)
        threshold = self.config.pull_threshold_for_queue
        sizer = PullSizer(self.config.pull_batch_size)
        while True:
            if state.buffered_estimate >= threshold:
                state.space.clear()
                await state.space.wait()
                continue
            queue_offset = state.next_pull_offset
            spec = PullRequestSpec(
                self.group,
                selector,
                sizer.next_size(threshold - state.buffered_estimate),
                self.config.broker_suspend_max_ms,
                self.config.consumer_timeout_when_suspend_ms,
            )
            try:
                result = await pull_queue(instance, mq, queue_offset, spec, nodes=self._pull_nodes)
            except OrbitError as exc:
                logger.info("prefetch of %s at queue offset %d failed: %s", mq, queue_offset, exc)
                await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                continue
            sizer.on_result(result)
            if result.status is PullStatus.FOUND:
                batch = RawBatch(mq, queue_offset, result.next_begin_offset, result.body)
                state.buffer.append(batch)
                state.buffered_estimate += self._estimate(batch)
                self._data_ready.set()
            elif result.status is PullStatus.OFFSET_ILLEGAL:
                logger.warning(
                    "queue offset %d of %s is outside the queue; continuing at %d",
                    queue_offset,
                    mq,
                    result.next_begin_offset,
                )
            if result.status is not PullStatus.NO_NEW_MSG:
                state.next_pull_offset = result.next_begin_offset
                if not state.buffer and result.status is not PullStatus.FOUND:
                    state.consumed_offset = result.next_begin_offset

    async def _start_offset(self, mq: MessageQueue) -> int:
        assert self._store is not None
        return await resolve_start_offset(
            self._store,
            self._require_instance(),
            mq,
            self.config.consume_from_where,
            self.config.consume_timestamp_ms,
            retry_topics_from_zero=False,
        )

    async def _routed(self, mq: MessageQueue) -> ClientInstance:
        """The instance, with the route of ``mq``'s topic (hence its broker address) known."""
        instance = self._require_instance()
        if instance.find_broker_addr(mq.broker_name) is None:
            await instance.get_route(mq.topic)
        return instance

    # -- rebalance (subscribe) and ConsumerHandle -----------------------------------------------

    async def _rebalance_loop(self) -> None:
        while True:
            try:
                await wait_event(self._wake, self.config.rebalance_interval_ms / 1000)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.rebalance()
            except Exception:
                logger.exception("rebalance of pull consumer group %s failed", self.group)

    async def rebalance(self) -> None:
        """Recompute this member's share of the subscribed topics' queues."""
        async with self._rebalance_lock:
            await self._rebalance_topics()

    async def _rebalance_topics(self) -> None:
        instance = self._require_instance()
        routed = True
        for topic in list(self._subscriptions):
            try:
                route = await instance.get_route(topic)
                if route is None:
                    routed = False
                    continue
                all_queues = queues_of_route(topic, route)
                if not all_queues:
                    continue
                broker_name = random.choice(sorted({mq.broker_name for mq in all_queues}))
                members = await consumer_ids(instance, broker_name, self.group)
            except OrbitError as exc:
                logger.info("rebalance of pull group %s, topic %s failed: %s", self.group, topic, exc)
                continue
            mine = set(self._strategy(self.group, instance.client_id, all_queues, members))
            for mq in [mq for mq in self._queues if mq.topic == topic and mq not in mine]:
                if self.config.auto_commit and self._queues[mq].consumed_offset is not None:
                    await self.commit_sync({mq: self._queues[mq].consumed_offset or 0})
                self._release(mq)
            for mq in sorted(mine - set(self._queues)):
                self._queues[mq] = _QueueState()
                self._start_prefetch(mq)
        if routed:
            self._route_retry.found()
        else:
            self._route_retry.missing()

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=MessageModel.CLUSTERING,
            consume_from_where=self.config.consume_from_where,
            subscription_data_set=[
                selector.subscription_data(topic) for topic, selector in sorted(self._subscriptions.items())
            ],
        )

    def subscribed_topics(self) -> set[str]:
        return set(self._subscriptions) | {mq.topic for mq in self._queues}

    def rebalance_soon(self) -> None:
        self._wake.set()

    async def persist_offsets(self) -> None:
        if self.config.auto_commit and self._store is not None and self._queues:
            await self.commit_sync()

    async def on_reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        for mq, queue_offset in offsets.items():
            if mq in self._queues:
                self.seek(mq, queue_offset)

    def _require_instance(self) -> ClientInstance:
        if self._instance is None:
            raise ClientStateError(f"pull consumer group {self.group} is not started")
        return self._instance


_ALL = MessageSelector.by_tag("*")
