"""The seam between the Spark connector and ``orbitmq.client``.

Readers and writers talk to OrbitMQ only through the three small protocols below, so unit
tests can hand them a fake client, and so the one place that knows the blocking client's
lifecycle is :class:`OrbitClientFactory`.

Spark reuses executor Python workers across tasks and micro-batches, so the factory keeps one
pull consumer and one producer per nameserver address and credentials for the life of the worker process
(closed at interpreter exit); connecting once per task would cost more than a small task's
reading. The driver-side admin client is owned by whichever reader opened it.

Each cluster and set of credentials gets its own client instance name (:func:`_instance_name`):
clients of one process share a client instance per instance name, and a shared instance would
use the first user's name servers, routes and credentials for every later one.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from orbitmq.client.staging import CommitResult, StagedChunk
from orbitmq.model.message import Message, MessageQueue
from orbitmq.model.route import TopicRouteData
from orbitmq.spark._options import NO_SECURITY, ClientSecurity

READER_GROUP = "orbitmq-spark-reader"
"""Consumer group of the executors' pull consumers (they never commit offsets under it)."""


class QueueBounds(Protocol):
    """A queue's first and next-to-write offsets (``QueueStatus`` of the admin client)."""

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...


class AdminPort(Protocol):
    """What the driver-side planner asks of OrbitMQ."""

    def fetch_queues(self, topic: str) -> list[MessageQueue]: ...

    def topic_route(self, topic: str) -> TopicRouteData: ...

    def queue_statuses_of(
        self, queues: Sequence[MessageQueue], broker_id: int
    ) -> Mapping[MessageQueue, QueueBounds]: ...

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int: ...

    def list_topics(self) -> list[str]: ...

    def committed_offset(
        self, group: str, mq: MessageQueue, *, zero_if_not_found: bool = True
    ) -> int | None: ...

    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None: ...

    def close(self) -> None: ...


class PullBody(Protocol):
    """Undecoded stored records of one queue (``RawBatch`` of the pull consumer)."""

    @property
    def body(self) -> bytes: ...

    @property
    def next_offset(self) -> int:
        """Where the next pull starts: how far the range has been read (filtered runs included)."""
        ...


class RangePort(Protocol):
    """What a read task asks of OrbitMQ: the records of ``[start_offset, end_offset)``.

    Bodies come in queue order; the last may hold records at or past ``end_offset``. A run
    filtered out entirely comes as an empty body; iteration ends early when the queue (or the
    member answering) ends before ``end_offset``.
    """

    def pull_range_raw(
        self,
        mq: MessageQueue,
        start_offset: int,
        end_offset: int,
        *,
        expression: str = "*",
        max_msg_nums: int = 32,
    ) -> Iterator[PullBody]: ...


class ProducerPort(Protocol):
    """What a write task asks of OrbitMQ (and, for exactly-once writes, the driver's commit)."""

    def send_batch(self, msgs: Sequence[Message]) -> Any: ...

    def send_orderly(self, msg: Message, sharding_key: str) -> Any: ...

    def stage(
        self,
        messages: Sequence[Message],
        write_id: str,
        batch_id: int,
        *,
        queue: MessageQueue | None = None,
        timeout_ms: int | None = None,
    ) -> list[StagedChunk]: ...

    def queue_for_key(self, topic: str, sharding_key: str) -> MessageQueue: ...

    def commit(
        self, write_id: str, batch_id: int, chunks: Sequence[StagedChunk], timeout_ms: int = ...
    ) -> CommitResult: ...


class ClientFactory(Protocol):
    """Builds (or reuses) client objects; must pickle, since readers and writers ship it."""

    def admin(
        self, namesrv_addr: str, request_timeout_ms: int, security: ClientSecurity = NO_SECURITY
    ) -> AdminPort: ...

    def puller(
        self, namesrv_addr: str, request_timeout_ms: int, security: ClientSecurity = NO_SECURITY
    ) -> RangePort: ...

    def producer(
        self,
        group: str,
        namesrv_addr: str,
        request_timeout_ms: int,
        security: ClientSecurity = NO_SECURITY,
    ) -> ProducerPort: ...


def _instance_name(namesrv_addr: str, security: ClientSecurity) -> str:
    """``<pid>-<digest of the cluster and credentials>``: unique per process and per target."""
    target = f"{namesrv_addr}|{security.access_key}|{security.tls_enable}|{security.tls_trust_cert_path}"
    return f"{os.getpid()}-spark-{hashlib.sha1(target.encode()).hexdigest()[:10]}"


_lock = threading.Lock()
_pullers: dict[tuple[str, ClientSecurity], Any] = {}
_producers: dict[tuple[str, str, ClientSecurity], Any] = {}


class OrbitClientFactory:
    """The real client: ``orbitmq.client.blocking`` objects, cached per worker process."""

    def admin(
        self, namesrv_addr: str, request_timeout_ms: int, security: ClientSecurity = NO_SECURITY
    ) -> AdminPort:
        from orbitmq.client.blocking import BlockingAdminClient

        admin = BlockingAdminClient(
            namesrv_addr, request_timeout_ms=request_timeout_ms, **security.client_options()
        )
        admin.start()
        return admin

    def puller(
        self, namesrv_addr: str, request_timeout_ms: int, security: ClientSecurity = NO_SECURITY
    ) -> RangePort:
        from orbitmq.client.blocking import BlockingPullConsumer

        with _lock:
            consumer = _pullers.get((namesrv_addr, security))
            if consumer is None:
                consumer = BlockingPullConsumer(
                    READER_GROUP,
                    namesrv_addr,
                    auto_commit=False,
                    request_timeout_ms=request_timeout_ms,
                    instance_name=_instance_name(namesrv_addr, security),
                    **security.client_options(),
                )
                consumer.start()
                _pullers[(namesrv_addr, security)] = consumer
            return consumer

    def producer(
        self,
        group: str,
        namesrv_addr: str,
        request_timeout_ms: int,
        security: ClientSecurity = NO_SECURITY,
    ) -> ProducerPort:
        from orbitmq.client.blocking import BlockingStagingProducer

        with _lock:
            producer = _producers.get((group, namesrv_addr, security))
            if producer is None:
                producer = BlockingStagingProducer(
                    group,
                    namesrv_addr,
                    request_timeout_ms=request_timeout_ms,
                    instance_name=_instance_name(namesrv_addr, security),
                    **security.client_options(),
                )
                producer.start()
                _producers[(group, namesrv_addr, security)] = producer
            return producer


@atexit.register
def _close_cached_clients() -> None:
    """Shut cached clients down when the worker exits (their loop threads are daemons)."""
    with _lock:
        clients = [*_pullers.values(), *_producers.values()]
        _pullers.clear()
        _producers.clear()
    for client in clients:
        try:
            client.shutdown()
        except Exception:  # noqa: BLE001 - best effort at exit; the broker forgets idle clients
            pass
