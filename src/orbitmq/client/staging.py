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
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from orbitmq.client._send import prepare_batches
from orbitmq.client.producer import Producer, select_queue_by_hash
from orbitmq.errors import NoRouteError, OrbitError, RemoteProtocolError, RequestTimeoutError, error_for_code
from orbitmq.model.message import Message, MessageQueue
from orbitmq.model.route import MASTER_BROKER_ID
from orbitmq.protocol.bodies import decode_cluster_info
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.staging import CommitBody, CommitStagedRequestHeader, StageMessagesRequestHeader

__all__ = ["CommitResult", "StagedChunk", "StagingProducer"]


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
        broker like a send); with one (e.g. :meth:`queue_for_key`), every message goes there,
        in order, without retry (as :meth:`send_orderly`).

        Raises:
            MessageValidationError: as :meth:`send_batch` (nothing was staged).
            OrbitError: a request failed; earlier chunks may be staged (harmless).
        """
        self._running_instance()
        batches = prepare_batches(messages, self._keys, self.config.max_message_size_bytes)
        chunks = []
        for batch in batches:
            count = len(batch.uniq_keys)
            if queue is not None:
                budget = timeout_ms or self.config.send_msg_timeout_ms
                chunks.append(await self._stage_one(queue, batch.body, count, write_id, batch_id, budget))
            else:
                chunks.append(
                    await self._stage_retrying(batch.topic, batch.body, count, write_id, batch_id, timeout_ms)
                )
        return chunks

    async def queue_for_key(self, topic: str, sharding_key: str) -> MessageQueue:
        """The queue :meth:`send_orderly` would pick for ``sharding_key`` (Java string hash)."""
        self._running_instance()
        info = await self._publish_info(topic)
        return select_queue_by_hash(info.queues, Message(topic, b"-"), sharding_key)

    async def _stage_retrying(
        self, topic: str, body: bytes, count: int, write_id: str, batch_id: int, timeout_ms: int | None
    ) -> StagedChunk:
        """Stage on the next queue; on a retriable fault, on another broker (as a send)."""
        budget_ms = timeout_ms or self.config.send_msg_timeout_ms
        deadline = time.monotonic() + budget_ms / 1000
        info = await self._publish_info(topic)
        failed_broker: str | None = None
        last_error: OrbitError | None = None
        for _ in range(1 + self.config.retry_times_when_send_failed):
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                break
            queue = self._select(info, failed_broker)
            try:
                return await self._stage_one(queue, body, count, write_id, batch_id, remaining_ms)
            except OrbitError as exc:
                if not exc.retriable:
                    raise
                last_error, failed_broker = exc, queue.broker_name
                if exc.refresh_route:
                    info = await self._publish_info(topic, refresh=True)
        if last_error is not None:
            raise last_error
        raise RequestTimeoutError(f"staging to topic {topic} used up its {budget_ms} ms budget")

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
        out; it is then sent again (it is idempotent) until ``timeout_ms`` is spent. An answer
        that the key is committed with exactly this decision is this commit's own success.

        Raises:
            NoRouteError: no broker is known to the name server.
            OrbitError: a broker refused or could not be reached in time; commit again.
        """
        instance = self._running_instance()
        deadline = time.monotonic() + timeout_ms / 1000
        response = await instance.invoke_namesrv(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, response.remark)
        masters = {
            name: data.broker_addrs[MASTER_BROKER_ID]
            for name, data in decode_cluster_info(response.body).broker_addr_table.items()
            if MASTER_BROKER_ID in data.broker_addrs
        }
        by_broker: dict[str, list[int]] = {}
        for chunk in chunks:
            by_broker.setdefault(chunk.broker_name, []).append(chunk.commit_log_offset)
        unknown = sorted(set(by_broker) - set(masters))
        if not masters or unknown:
            raise NoRouteError(
                f"no master address for broker(s) {unknown or 'any'} to commit write {write_id}"
            )
        coordinator = min(masters)
        remote = {name: offsets for name, offsets in by_broker.items() if name != coordinator}
        decision = CommitBody(by_broker.get(coordinator, []), remote)
        recorded = await self._commit_on(masters[coordinator], write_id, batch_id, decision, deadline)
        for name, offsets in sorted(recorded.remote.items()):
            if name not in masters:
                raise NoRouteError(f"broker {name} of write {write_id} batch {batch_id} has no master now")
            await self._commit_on(masters[name], write_id, batch_id, CommitBody(offsets, {}), deadline)
        return CommitResult(recorded != decision, 1 + len(recorded.remote))

    async def _commit_on(
        self, addr: str, write_id: str, batch_id: int, body: CommitBody, deadline: float
    ) -> CommitBody:
        """COMMIT_STAGED to one broker, resent on a connection fault or SYSTEM_BUSY; returns the
        recorded decision."""
        instance = self._running_instance()
        header = CommitStagedRequestHeader(write_id=write_id, batch_id=batch_id).to_ext()
        payload = body.encode()
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                raise RequestTimeoutError(
                    f"commit of write {write_id} batch {batch_id} to {addr} not answered"
                )
            request = RemotingCommand.request(RequestCode.COMMIT_STAGED, header, payload)
            try:
                response = await instance.remoting.invoke(addr, request, remaining_ms)
            except OrbitError as exc:
                if not exc.retriable:
                    raise
                await asyncio.sleep(0.1)
                continue
            if response.code == ResponseCode.SYSTEM_BUSY:
                # E.g. a broker just made master by the controller, still loading its ledger.
                await asyncio.sleep(0.1)
                continue
            if response.code != ResponseCode.SUCCESS:
                raise error_for_code(response.code, response.remark)
            if response.ext_fields.get("alreadyCommitted") == "true":
                return CommitBody.decode(response.body)
            return body
