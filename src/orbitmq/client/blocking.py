"""Blocking facades over the asyncio clients, for code without an event loop.

There is no second implementation here. One daemon thread runs one event loop
(:class:`_LoopThread`, shared by every facade of the process, so facades with one client id
share one client instance as in RocketMQ), and each facade method submits the matching
coroutine of the wrapped asyncio object to it and waits for the result.

Rules for facade authors: create the asyncio object on the loop thread (``run`` a small
coroutine) when its constructor needs the loop; call :meth:`_LoopThread.acquire` once per
facade and :meth:`_LoopThread.release` once when it is closed. Facade methods must not be
called from the loop thread itself (a callback), since they would wait for themselves.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeVar

from orbitmq.client._send import SendResult
from orbitmq.client.admin import AdminClient, MemberStatus, QueueProgress, QueueStatus
from orbitmq.client.producer import MessageQueueSelector, Producer, SendCallback, select_queue_by_hash
from orbitmq.client.selector import MessageSelector
from orbitmq.client.staging import CommitResult, StagedChunk, StagingProducer
from orbitmq.errors import ClientStateError
from orbitmq.model.message import Message, MessageExt, MessageQueue
from orbitmq.model.route import ClusterInfo, TopicRouteData
from orbitmq.transport.runner import new_event_loop

if TYPE_CHECKING:
    # Imported when a consumer facade is built, so producer-only code never loads them.
    from orbitmq.client.pull_consumer import PullConsumer, RawBatch
    from orbitmq.client.push_consumer import MessageListener, PushConsumer

__all__ = ["BlockingAdminClient", "BlockingProducer", "BlockingPullConsumer", "BlockingPushConsumer"]

_T = TypeVar("_T")


class _LoopThread:
    """One event loop running forever in a daemon thread, shared and reference-counted."""

    _shared: ClassVar[_LoopThread | None] = None
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self._loop = new_event_loop()
        self._users = 0
        self._thread = threading.Thread(target=self._serve, name="orbitmq-client-loop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._drain_and_close()

    def _drain_and_close(self) -> None:
        """Close the loop as asyncio.Runner does: cancel leftovers, let transports finish closing."""
        loop = self._loop
        try:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            # Closed sockets deliver connection_lost on a later loop turn; give them those turns.
            loop.run_until_complete(asyncio.sleep(0.01))
        finally:
            loop.close()

    @classmethod
    def acquire(cls) -> _LoopThread:
        """The shared loop thread (started on first use), counting one more user."""
        with cls._shared_lock:
            shared = cls._shared
            if shared is None:
                shared = cls._shared = cls()
            shared._users += 1
            return shared

    def release(self) -> None:
        """Drop one user; the last one stops the loop and joins the thread."""
        with self._shared_lock:
            self._users -= 1
            if self._users > 0:
                return
            if _LoopThread._shared is self:
                _LoopThread._shared = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        """Schedule ``coro`` on the loop; the returned future completes with its outcome."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, _T], timeout_s: float | None = None) -> _T:
        """Run ``coro`` on the loop and wait for its result (its exception is raised here).

        Raises:
            ClientStateError: called from the loop thread itself (it would deadlock).
        """
        if threading.current_thread() is self._thread:
            coro.close()
            raise ClientStateError("a blocking client method was called from the client's own event loop")
        return self.submit(coro).result(timeout_s)


class _Lifecycle(Protocol):
    async def start(self) -> None: ...


_C = TypeVar("_C", bound=_Lifecycle)


class _Facade(Generic[_C]):
    """Owns one reference to the shared loop thread and the asyncio object it drives.

    ``start``, the context manager and :meth:`_stop` are shared by every facade; a facade
    names its public stop (``shutdown`` or ``close``) as a one-line call of :meth:`_stop`.
    """

    def __init__(self, build: Callable[[], _C]) -> None:
        self._loop_thread: _LoopThread | None = _LoopThread.acquire()
        try:
            # Built on the loop thread: the asyncio objects may need the running loop.
            self._target: _C = self._runner.run(_construct(build))
        except BaseException:
            self._release()
            raise

    def start(self) -> None:
        self._runner.run(self._target.start())

    def _stop(self, stopping: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run the wrapped object's stop, then release the loop thread (idempotent)."""
        if self._loop_thread is None:
            return
        try:
            self._runner.run(stopping())
        finally:
            self._release()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._exit()

    def _exit(self) -> None:
        raise NotImplementedError

    @property
    def _runner(self) -> _LoopThread:
        if self._loop_thread is None:
            raise ClientStateError(f"{type(self).__name__} is closed")
        return self._loop_thread

    def _release(self) -> None:
        loop_thread, self._loop_thread = self._loop_thread, None
        if loop_thread is not None:
            loop_thread.release()


async def _construct(factory: Callable[[], _T]) -> _T:
    return factory()


class BlockingProducer(_Facade[Producer]):
    """:class:`~orbitmq.client.producer.Producer` with synchronous methods (same arguments)."""

    def __init__(self, group: str, namesrv_addr: str, **options: Any) -> None:
        super().__init__(lambda: Producer(group, namesrv_addr, **options))
        self._producer = self._target

    @property
    def producer(self) -> Producer:
        """The wrapped asyncio producer (use it only on the facade's loop)."""
        return self._producer

    def shutdown(self) -> None:
        """Shut the producer down and release the loop thread (idempotent)."""
        self._stop(self._producer.shutdown)

    _exit = shutdown

    def send(self, message: Message, timeout_ms: int | None = None) -> SendResult:
        return self._runner.run(self._producer.send(message, timeout_ms))

    def send_async(
        self, message: Message, callback: SendCallback | None = None, timeout_ms: int | None = None
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send; ``callback`` runs on the client's loop thread (keep it short)."""

        async def start() -> asyncio.Future[SendResult]:
            return self._producer.send_async(message, callback, timeout_ms)

        pending = self._runner.run(start())
        return self._runner.submit(_await(pending))

    def send_oneway(self, message: Message) -> None:
        self._runner.run(self._producer.send_oneway(message))

    def send_batch(self, messages: Sequence[Message], timeout_ms: int | None = None) -> list[SendResult]:
        return self._runner.run(self._producer.send_batch(messages, timeout_ms))

    def send_orderly(
        self,
        message: Message,
        sharding_key: Any,
        selector: MessageQueueSelector = select_queue_by_hash,
        timeout_ms: int | None = None,
    ) -> SendResult:
        return self._runner.run(self._producer.send_orderly(message, sharding_key, selector, timeout_ms))


class BlockingStagingProducer(BlockingProducer):
    """:class:`~orbitmq.client.staging.StagingProducer` with synchronous methods (same arguments)."""

    def __init__(self, group: str, namesrv_addr: str, **options: Any) -> None:
        staging: list[StagingProducer] = []

        def build() -> StagingProducer:
            staging.append(StagingProducer(group, namesrv_addr, **options))
            return staging[0]

        _Facade.__init__(self, build)
        self._producer = self._target
        self._staging = staging[0]

    def stage(
        self,
        messages: Sequence[Message],
        write_id: str,
        batch_id: int,
        *,
        queue: MessageQueue | None = None,
        timeout_ms: int | None = None,
    ) -> list[StagedChunk]:
        return self._runner.run(
            self._staging.stage(messages, write_id, batch_id, queue=queue, timeout_ms=timeout_ms)
        )

    def queue_for_key(self, topic: str, sharding_key: str) -> MessageQueue:
        return self._runner.run(self._staging.queue_for_key(topic, sharding_key))

    def commit(
        self, write_id: str, batch_id: int, chunks: Sequence[StagedChunk], timeout_ms: int = 120_000
    ) -> CommitResult:
        return self._runner.run(self._staging.commit(write_id, batch_id, chunks, timeout_ms))


async def _await(future: asyncio.Future[_T]) -> _T:
    return await future


class BlockingAdminClient(_Facade[AdminClient]):
    """:class:`~orbitmq.client.admin.AdminClient` with synchronous methods (same arguments)."""

    def __init__(self, namesrv_addr: str, **config: Any) -> None:
        super().__init__(lambda: AdminClient(namesrv_addr, **config))
        self._admin = self._target

    def close(self) -> None:
        """Close the admin client and release the loop thread (idempotent)."""
        self._stop(self._admin.close)

    _exit = close

    def topic_route(self, topic: str) -> TopicRouteData:
        return self._runner.run(self._admin.topic_route(topic))

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return self._runner.run(self._admin.fetch_queues(topic))

    def topic_status(self, topic: str) -> dict[MessageQueue, QueueStatus]:
        return self._runner.run(self._admin.topic_status(topic))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._runner.run(self._admin.search_offset(mq, timestamp_ms))

    def queue_statuses_of(
        self, queues: Sequence[MessageQueue], broker_id: int
    ) -> dict[MessageQueue, QueueStatus]:
        return self._runner.run(self._admin.queue_statuses_of(queues, broker_id))

    def max_offset(self, mq: MessageQueue) -> int:
        return self._runner.run(self._admin.max_offset(mq))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._runner.run(self._admin.min_offset(mq))

    def committed_offset(self, group: str, mq: MessageQueue, *, zero_if_not_found: bool = True) -> int | None:
        return self._runner.run(self._admin.committed_offset(group, mq, zero_if_not_found=zero_if_not_found))

    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self._runner.run(self._admin.update_consumer_offset(group, mq, offset))

    def consumer_progress(self, group: str, topic: str | None = None) -> dict[MessageQueue, QueueProgress]:
        return self._runner.run(self._admin.consumer_progress(group, topic))

    def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int) -> dict[MessageQueue, int]:
        return self._runner.run(self._admin.reset_offset_by_time(group, topic, timestamp_ms))

    def create_topic(
        self,
        topic: str,
        queue_nums: int = 8,
        *,
        cluster: str | None = None,
        perm: int = 6,
        order: bool = False,
    ) -> None:
        self._runner.run(self._admin.create_topic(topic, queue_nums, cluster=cluster, perm=perm, order=order))

    def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        self._runner.run(self._admin.delete_topic(topic, cluster=cluster))

    def list_topics(self) -> list[str]:
        return self._runner.run(self._admin.list_topics())

    def user_topics(self) -> list[str]:
        return self._runner.run(self._admin.user_topics())

    def cluster_info(self) -> ClusterInfo:
        return self._runner.run(self._admin.cluster_info())

    def cluster_members(self) -> list[MemberStatus]:
        return self._runner.run(self._admin.cluster_members())


# -- consumers -------------------------------------------------------------------------------


class BlockingPushConsumer(_Facade["PushConsumer"]):
    """A :class:`~orbitmq.client.push_consumer.PushConsumer` driven from synchronous code.

    A plain-function listener runs in the consumer's thread pool, never on the loop thread.
    """

    def __init__(
        self, group: str, namesrv_addr: str, listener: MessageListener | None = None, **config: Any
    ) -> None:
        from orbitmq.client.push_consumer import PushConsumer

        super().__init__(lambda: PushConsumer(group, namesrv_addr, listener, **config))
        self._consumer = self._target

    @property
    def consumer(self) -> PushConsumer:
        return self._consumer

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self._consumer.subscribe(topic, expression)

    def register_message_listener(self, listener: MessageListener) -> None:
        self._consumer.register_message_listener(listener)

    def shutdown(self) -> None:
        """Stop consuming and release the loop thread (idempotent)."""
        self._stop(self._consumer.shutdown)

    _exit = shutdown


class BlockingPullConsumer(_Facade["PullConsumer"]):
    """A :class:`~orbitmq.client.pull_consumer.PullConsumer` with synchronous methods."""

    def __init__(self, group: str, namesrv_addr: str, **config: Any) -> None:
        from orbitmq.client.pull_consumer import PullConsumer

        super().__init__(lambda: PullConsumer(group, namesrv_addr, **config))
        self._consumer = self._target

    @property
    def consumer(self) -> PullConsumer:
        return self._consumer

    def shutdown(self) -> None:
        """Commit (with auto_commit), leave the group and release the loop thread (idempotent)."""
        self._stop(self._consumer.shutdown)

    _exit = shutdown

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._runner.run(self._consumer.fetch_message_queues(topic))

    def assign(self, queues: list[MessageQueue]) -> None:
        self._runner.run(_construct(lambda: self._consumer.assign(queues)))

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self._runner.run(self._consumer.subscribe(topic, expression))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._runner.run(_construct(lambda: self._consumer.seek(mq, offset)))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._runner.run(self._consumer.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._runner.run(self._consumer.seek_to_end(mq))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._runner.run(self._consumer.offset_for_timestamp(mq, timestamp_ms))

    def poll(self, timeout_ms: int = 1000) -> list[MessageExt]:
        return self._runner.run(self._consumer.poll(timeout_ms))

    def poll_raw(self, timeout_ms: int = 1000) -> list[RawBatch]:
        return self._runner.run(self._consumer.poll_raw(timeout_ms))

    def committed(self, mq: MessageQueue) -> int | None:
        return self._runner.run(self._consumer.committed(mq))

    def commit_sync(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        self._runner.run(self._consumer.commit_sync(offsets))

    def commit_async(self, offsets: dict[MessageQueue, int] | None = None) -> concurrent.futures.Future[None]:
        """Commit in the background; the returned future completes when the brokers answered."""
        return self._runner.submit(self._consumer.commit_sync(offsets))

    def pull_range(
        self,
        mq: MessageQueue,
        start_offset: int,
        end_offset: int,
        *,
        expression: str = "*",
        max_msg_nums: int = 32,
    ) -> Iterator[list[MessageExt]]:
        """Blocking iterator over :meth:`PullConsumer.pull_range` batches."""
        return self._iterate(
            self._consumer.pull_range(
                mq, start_offset, end_offset, expression=expression, max_msg_nums=max_msg_nums
            )
        )

    def pull_range_raw(
        self,
        mq: MessageQueue,
        start_offset: int,
        end_offset: int,
        *,
        expression: str = "*",
        max_msg_nums: int = 32,
    ) -> Iterator[RawBatch]:
        return self._iterate(
            self._consumer.pull_range_raw(
                mq, start_offset, end_offset, expression=expression, max_msg_nums=max_msg_nums
            )
        )

    def _iterate(self, source: AsyncIterator[_T]) -> Iterator[_T]:
        runner = self._runner
        while True:
            try:
                yield runner.run(_next(source))
            except StopAsyncIteration:
                return


async def _next(source: AsyncIterator[_T]) -> _T:
    return await source.__anext__()
