"""Exactly-once batches through staged writes: stage now, commit once per (write id, batch id).

:class:`StagingProducer` is a :class:`~orbitmq.client.producer.Producer` with two more
operations (OrbitMQ's own requests, ``protocol/staging.py``; RocketMQ brokers do not have them):

* :meth:`StagingProducer.stage` sends messages of one topic as STAGE_MESSAGES requests: each
  request's messages are stored on the queue's broker as one staged record, invisible to
  consumers. It returns :class:`StagedChunk` handles. Staging again (a retried task) only
  leaves unreferenced staged records behind.
* :meth:`StagingProducer.commit` makes the chunks of one ``(write id, batch id)`` visible, at
  most once per key: a second commit of the key (a replayed batch) writes nothing and reports
  ``already_committed``.

Several brokers. Each broker keeps its own ledger, so the commit has a *coordinator*: the
broker whose name sorts first among the name server's brokers. It receives the whole decision
first (its chunks, and every other broker's chunks as ``remote``), then each other broker its
own part. If the writer dies in between, the next commit of the key gets the recorded decision
back from the coordinator and completes it on the other brokers, ignoring its own new chunks;
every broker's part is idempotent. The coordinator must stay the same while a batch is in
doubt: adding or removing the first-sorting broker at that moment breaks the guarantee.

Failover. A broker group is named by its broker name, not by its master's address: staging and
each broker's part of a commit ask the name server for the group's master again after a
connection fault, a ``SERVICE_NOT_AVAILABLE`` (a deposed master, a slave) or while the group
has no master, and retry with back-off until their budget is spent. In controller mode the
promoted slave holds the staged records and the ledger (both in the replicated CommitLog), so
the retried commit is recorded once: a key the old master committed is answered as committed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from orbitmq.client._send import prepare_batches
from orbitmq.client.producer import Producer, select_queue_by_hash
from orbitmq.errors import (
    NoRouteError,
    OrbitError,
    RemoteProtocolError,
    RemotingError,
    RequestTimeoutError,
    ServiceNotAvailableError,
    SystemBusyError,
    error_for_code,
)
from orbitmq.model.message import Message, MessageQueue
from orbitmq.model.route import MASTER_BROKER_ID
from orbitmq.protocol.bodies import decode_cluster_info
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.staging import CommitBody, CommitStagedRequestHeader, StageMessagesRequestHeader

__all__ = ["CommitResult", "StagedChunk", "StagingProducer"]

_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 1.0
_FAILOVER_FAULTS = (RemotingError, SystemBusyError, ServiceNotAvailableError, NoRouteError)
"""What a broker group failing over answers: retried until the budget is spent."""


@dataclass(frozen=True, slots=True)
class StagedChunk:
    """Messages staged on one broker for one queue, stored as one record."""

    broker_name: str
    commit_log_offset: int
    topic: str
    queue_id: int
    count: int


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What a commit did: ``already_committed`` when an earlier commit of the key won."""

    already_committed: bool
    brokers: int


class StagingProducer(Producer):
    """A producer that can also stage messages and commit them once (see the module docstring)."""

    async def stage(
        self,
        messages: Sequence[Message],
        write_id: str,
        batch_id: int,
        *,
        queue: MessageQueue | None = None,
        timeout_ms: int | None = None,
    ) -> list[StagedChunk]:
        """Stage messages of one topic; one chunk per request (at most the max message size).

        Without ``queue`` each request goes to the next queue (round robin, retried on another
        queue like a send); with one (e.g. :meth:`queue_for_key`), every message goes there,
        in order. A request that fails retriably (its broker group failing over included) is
        sent again, to the group's master of the moment, with back-off, until ``timeout_ms``
        (default ``send_msg_timeout_ms``) is spent; each attempt waits at most
        ``send_msg_timeout_ms``.

        Raises:
            MessageValidationError: as :meth:`send_batch` (nothing was staged).
            OrbitError: a request failed; earlier chunks may be staged (harmless).
        """
        self._running_instance()
        batches = prepare_batches(messages, self._keys, self.config.max_message_size_bytes)
        chunks = []
        for batch in batches:
            count = len(batch.uniq_keys)
            budget_ms = timeout_ms or self.config.send_msg_timeout_ms
            retry = _Retry(time.monotonic() + budget_ms / 1000)
            chunks.append(
                await self._stage_retrying(batch.topic, batch.body, count, write_id, batch_id, queue, retry)
            )
        return chunks

    async def queue_for_key(self, topic: str, sharding_key: str) -> MessageQueue:
        """The queue :meth:`send_orderly` would pick for ``sharding_key`` (Java string hash)."""
        self._running_instance()
        info = await self._publish_info(topic)
        return select_queue_by_hash(info.queues, Message(topic, b"-"), sharding_key)

    async def _stage_retrying(
        self,
        topic: str,
        body: bytes,
        count: int,
        write_id: str,
        batch_id: int,
        fixed_queue: MessageQueue | None,
        retry: _Retry,
    ) -> StagedChunk:
        """Stage on ``fixed_queue`` or the next queue; a failover's faults are retried until the
        budget is spent, other retriable faults ``retry_times_when_send_failed`` times."""
        what = f"staging to topic {topic}"
        failed_broker: str | None = None
        refresh = False
        other_faults = 0
        while True:
            queue = fixed_queue
            try:
                if queue is None:
                    queue = self._select(await self._publish_info(topic, refresh=refresh), failed_broker)
                elif refresh:
                    await self._publish_info(topic, refresh=True)
                attempt_ms = min(retry.remaining_ms(), self.config.send_msg_timeout_ms)
                return await self._stage_one(queue, body, count, write_id, batch_id, attempt_ms)
            except OrbitError as exc:
                if not exc.retriable:
                    raise
                if not isinstance(exc, _FAILOVER_FAULTS):
                    other_faults += 1
                    if other_faults > self.config.retry_times_when_send_failed:
                        raise
                if queue is not None:
                    failed_broker = queue.broker_name
                    what = f"staging to topic {topic} on broker {queue.broker_name}"
                refresh = exc.refresh_route or isinstance(exc, RequestTimeoutError)
                retry.failed(what, exc)
                await retry.back_off()

    async def _stage_one(
        self, queue: MessageQueue, body: bytes, count: int, write_id: str, batch_id: int, timeout_ms: int
    ) -> StagedChunk:
        instance = self._running_instance()
        header = StageMessagesRequestHeader(
            producer_group=self.group,
            topic=queue.topic,
            queue_id=queue.queue_id,
            write_id=write_id,
            batch_id=batch_id,
            born_timestamp=time.time_ns() // 1_000_000,
            default_topic=self.config.create_topic_key,
            default_topic_queue_nums=self.config.default_topic_queue_nums,
        )
        request = RemotingCommand.request(RequestCode.STAGE_MESSAGES, header.to_ext(), body)
        response = await instance.remoting.invoke(self._broker_addr(instance, queue), request, timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, response.remark)
        offset_text = response.ext_fields.get("commitLogOffset", "")
        if not offset_text.isdigit():
            raise RemoteProtocolError(f"STAGE_MESSAGES answer has no commitLogOffset: {offset_text!r}")
        offset = int(offset_text)
        return StagedChunk(queue.broker_name, offset, queue.topic, queue.queue_id, count)

    async def commit(
        self, write_id: str, batch_id: int, chunks: Sequence[StagedChunk], timeout_ms: int = 120_000
    ) -> CommitResult:
        """Make ``chunks`` visible unless ``(write_id, batch_id)`` was committed before.

        A broker writes a big commit's messages before it answers, so the request may time
        out; it is then sent again (it is idempotent) until ``timeout_ms`` is spent, as it is
        after a connection fault, ``SYSTEM_BUSY`` or ``SERVICE_NOT_AVAILABLE``, each time to
        the broker group's master of the moment (a failover; see the module docstring). An
        answer that the key is committed with exactly this decision is this commit's own
        success.

        Raises:
            NoRouteError: no broker is known to the name server, or none by a chunk's name.
            OrbitError: a broker refused, or no master of a group answered in time; commit again.
        """
        deadline = time.monotonic() + timeout_ms / 1000
        groups = _Groups(self)
        members = await groups.members()
        by_broker: dict[str, list[int]] = {}
        for chunk in chunks:
            by_broker.setdefault(chunk.broker_name, []).append(chunk.commit_log_offset)
        unknown = sorted(set(by_broker) - set(members))
        if not members or unknown:
            raise NoRouteError(f"no broker named {unknown or 'any'} is registered to commit write {write_id}")
        # Among every registered group, masterless ones included: a failover must not move it.
        coordinator = min(members)
        remote = {name: offsets for name, offsets in by_broker.items() if name != coordinator}
        decision = CommitBody(by_broker.get(coordinator, []), remote)
        recorded = await self._commit_on(_Master(groups, coordinator), write_id, batch_id, decision, deadline)
        for name, offsets in sorted(recorded.remote.items()):
            part = CommitBody(offsets, {})
            await self._commit_on(_Master(groups, name), write_id, batch_id, part, deadline)
        return CommitResult(recorded != decision, 1 + len(recorded.remote))

    async def _commit_on(
        self, target: str | _Master, write_id: str, batch_id: int, body: CommitBody, deadline: float
    ) -> CommitBody:
        """COMMIT_STAGED to ``target`` (an address, or a group's master of the moment), resent on
        a failover's faults until ``deadline`` (see :meth:`commit`); returns the recorded decision."""
        instance = self._running_instance()
        header = CommitStagedRequestHeader(write_id=write_id, batch_id=batch_id).to_ext()
        payload = body.encode()
        retry = _Retry(deadline)
        where = target if isinstance(target, str) else f"broker {target.broker_name}"
        what = f"commit of write {write_id} batch {batch_id} on {where}"
        while True:
            try:
                addr = target if isinstance(target, str) else await target.address()
                request = RemotingCommand.request(RequestCode.COMMIT_STAGED, header, payload)
                response = await instance.remoting.invoke(addr, request, retry.remaining_ms())
                if response.code in (ResponseCode.SYSTEM_BUSY, ResponseCode.SERVICE_NOT_AVAILABLE):
                    # A broker just made master, still loading its ledger; a deposed master; a slave.
                    raise error_for_code(response.code, f"{addr}: {response.remark}")
            except _FAILOVER_FAULTS as exc:
                if not isinstance(target, str) and (
                    exc.refresh_route or isinstance(exc, RequestTimeoutError)
                ):
                    target.groups.forget()
                retry.failed(what, exc)
                await retry.back_off()
                continue
            if response.code != ResponseCode.SUCCESS:
                raise error_for_code(response.code, response.remark)
            if response.ext_fields.get("alreadyCommitted") == "true":
                return CommitBody.decode(response.body)
            return body


class _Retry:
    """A retry loop's deadline, back-off and record of what failed (for the final error)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.attempts = 0
        self._backoff_s = _FIRST_BACKOFF_S
        self._first: str | None = None
        self._last = ""

    def remaining_ms(self) -> int:
        return max(1, int((self.deadline - time.monotonic()) * 1000))

    def failed(self, what: str, exc: OrbitError) -> None:
        """Record a retriable failure; raise when no time is left to try again."""
        self.attempts += 1
        self._last = f"{type(exc).__name__}: {exc}"
        self._first = self._first or self._last
        if time.monotonic() + self._backoff_s >= self.deadline:
            first = "" if self._first == self._last else f"; first: {self._first}"
            raise RequestTimeoutError(
                f"{what} not done after {self.attempts} attempt(s) within its budget; last: {self._last}{first}"
            ) from exc

    async def back_off(self) -> None:
        await asyncio.sleep(self._backoff_s)
        self._backoff_s = min(self._backoff_s * 2, _MAX_BACKOFF_S)


class _Groups:
    """The name server's broker groups (name -> member id -> address), asked again on demand."""

    def __init__(self, producer: StagingProducer) -> None:
        self._producer = producer
        self._members: dict[str, dict[int, str]] | None = None

    async def members(self) -> dict[str, dict[int, str]]:
        if self._members is None:
            instance = self._producer._running_instance()
            request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
            response = await instance.invoke_namesrv(request)
            if response.code != ResponseCode.SUCCESS:
                raise error_for_code(response.code, response.remark)
            table = decode_cluster_info(response.body).broker_addr_table
            self._members = {name: dict(data.broker_addrs) for name, data in table.items()}
        return self._members

    async def master(self, broker_name: str) -> str:
        """The group's master address; a retriable error while it has none."""
        addr = (await self.members()).get(broker_name, {}).get(MASTER_BROKER_ID)
        if addr is None:
            self.forget()
            raise NoRouteError(f"broker group {broker_name} has no master registered")
        return addr

    def forget(self) -> None:
        self._members = None


@dataclass(frozen=True, slots=True)
class _Master:
    """The master of one broker group, looked up when a request is sent."""

    groups: _Groups
    broker_name: str

    async def address(self) -> str:
        return await self.groups.master(self.broker_name)
