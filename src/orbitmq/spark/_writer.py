"""Batch and streaming writers of the ``orbitmq`` sink.

Each write task sends its rows through one producer per worker process: rows without a
``sharding_key`` in batches of ``writeBatchSize`` per topic (SEND_BATCH_MESSAGE), rows with one
by ordered send, which picks the queue from the key, so rows sharing a key keep their order.

With ``exactlyOnce=true`` a task *stages* its rows instead (``orbitmq.client.staging``: batches
of ``writeBatchSize`` stored on the broker as staged records nobody reads; rows with a
``sharding_key`` staged per target queue, in order) and reports the staged chunks; the driver's
``commit`` then commits every chunk of the micro-batch at once under the key ``(query id,
batch id)`` (batch writes: ``(write id, 0)``). The broker commits a key once: a retried task's
first attempt is never committed (only the attempt Spark accepted reports its chunks), and a
micro-batch replayed after a crash finds its key committed and writes nothing. ``abort``
commits nothing, so an aborted batch write leaves no message behind.

Default delivery guarantee: at least once. A message is acknowledged by the broker before the task
reports success, but a task that fails after sending some rows is retried from its first row,
and a streaming micro-batch that was running when the query died is re-run after restart; both
send again. Every message therefore carries a deterministic id in its ``UNIQ_KEY`` property
(what consumers see as ``msg_id``)::

    <write id>-<batch id>-<partition id>-<row index>

``write id`` is the streaming query id (stable across restarts of one checkpoint) or, for a
batch write, an id drawn once per write job; ``batch id`` is the micro-batch id (0 for a batch
write); ``row index`` counts the task's rows from 0. Spark re-runs a partition over the same
input rows in the same order, so a re-sent copy has the same id, and consumers de-duplicate by
``msg_id``. The id is also added to ``KEYS``, so the broker's key index finds every copy.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from orbitmq.client.staging import StagedChunk
from orbitmq.errors import ClientError
from orbitmq.model.message import Message, MessageConst, MessageQueue
from orbitmq.spark._client import ClientFactory, OrbitClientFactory, ProducerPort
from orbitmq.spark._options import WriteOptions

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True, slots=True)
class SentMessages(WriterCommitMessage):
    """What one write task reports to the driver."""

    partition_id: int
    messages_sent: int
    first_row_key: str | None


@dataclass(frozen=True, slots=True)
class StagedMessages(WriterCommitMessage):
    """What one exactly-once write task reports: its staged chunks, committed by the driver."""

    partition_id: int
    messages_sent: int
    write_id: str
    batch_id: int
    chunks: tuple[StagedChunk, ...]


def row_key(write_id: str, batch_id: int, partition_id: int, row_index: int) -> str:
    """The de-duplication id of one written row (see the module docstring)."""
    return f"{write_id}-{batch_id}-{partition_id}-{row_index}"


@dataclass(frozen=True, slots=True)
class RowSource:
    """Where a task's rows come from: the ids that make their keys deterministic."""

    write_id: str
    batch_id: int
    partition_id: int


class RowSender:
    """Turns Arrow batches of rows into messages and sends them."""

    def __init__(self, options: WriteOptions, producer: ProducerPort, source: RowSource) -> None:
        self.options = options
        self.producer = producer
        self.source = source
        self.sent = 0
        self._pending: dict[str, list[Message]] = {}

    def send_all(self, batches: Iterator[pa.RecordBatch]) -> SentMessages:
        row_index = 0
        first_key = None
        for batch in batches:
            for row in _rows(batch):
                key = row_key(self.source.write_id, self.source.batch_id, self.source.partition_id, row_index)
                first_key = first_key or key
                self._send_row(row, key, row_index)
                row_index += 1
        for topic in list(self._pending):
            self._flush(topic)
        return SentMessages(self.source.partition_id, self.sent, first_key)

    def _send_row(self, row: dict[str, Any], key: str, row_index: int) -> None:
        msg = build_message(row, self.options.topic, key, row_index)
        sharding_key = row.get("sharding_key")
        if sharding_key is not None:
            self.producer.send_orderly(msg, str(sharding_key))
            self.sent += 1
            return
        pending = self._pending.setdefault(msg.topic, [])
        pending.append(msg)
        if len(pending) >= self.options.write_batch_size:
            self._flush(msg.topic)

    def _flush(self, topic: str) -> None:
        messages = self._pending.pop(topic, [])
        if messages:
            self.producer.send_batch(messages)
            self.sent += len(messages)


class RowStager(RowSender):
    """Stages rows instead of sending them (exactly-once writes; see the module docstring)."""

    def __init__(self, options: WriteOptions, producer: ProducerPort, source: RowSource) -> None:
        super().__init__(options, producer, source)
        self.chunks: list[StagedChunk] = []
        self._staged: dict[tuple[str, MessageQueue | None], list[Message]] = {}
        self._queues: dict[tuple[str, str], MessageQueue] = {}

    def stage_all(self, batches: Iterator[pa.RecordBatch]) -> StagedMessages:
        sent = self.send_all(batches)
        for target in list(self._staged):
            self._stage(target)
        source = self.source
        return StagedMessages(
            sent.partition_id, self.sent, source.write_id, source.batch_id, tuple(self.chunks)
        )

    def _send_row(self, row: dict[str, Any], key: str, row_index: int) -> None:
        msg = build_message(row, self.options.topic, key, row_index)
        queue = None
        sharding_key = row.get("sharding_key")
        if sharding_key is not None:
            cache_key = (msg.topic, str(sharding_key))
            queue = self._queues.get(cache_key)
            if queue is None:
                queue = self._queues[cache_key] = self.producer.queue_for_key(msg.topic, str(sharding_key))
        pending = self._staged.setdefault((msg.topic, queue), [])
        pending.append(msg)
        if len(pending) >= self.options.write_batch_size:
            self._stage((msg.topic, queue))

    def _stage(self, target: tuple[str, MessageQueue | None]) -> None:
        messages = self._staged.pop(target, [])
        if messages:
            source = self.source
            # A failover of the queue's broker group is waited out (failoverTimeoutMs).
            self.chunks += self.producer.stage(
                messages,
                source.write_id,
                source.batch_id,
                queue=target[1],
                timeout_ms=self.options.failover_timeout_ms or None,
            )
            self.sent += len(messages)


def build_message(row: dict[str, Any], topic_option: str | None, key: str, row_index: int) -> Message:
    """The message for one row; the ``topic`` option overrides a row's ``topic`` column.

    Raises:
        ClientError: the row has no body, or no topic and no ``topic`` option; names the row.
    """
    topic = topic_option or row.get("topic")
    if not topic:
        raise ClientError(f"row {row_index} ({key}) has no topic and the option topic is not set")
    body = row.get("body")
    if body is None:
        raise ClientError(f"row {row_index} ({key}) of topic {topic} has a null body")
    if isinstance(body, str):
        body = body.encode()
    properties = dict(row.get("properties") or ())
    msg = Message(str(topic), bytes(body), properties=properties)
    if row.get("tags") is not None:
        msg.tags = str(row["tags"])
    keys = row.get("keys")
    key_list = [str(k) for k in keys] if isinstance(keys, list) else str(keys or "").split()
    msg.keys = [*key_list, key]
    msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = key
    return msg


def _rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    names = batch.schema.names
    columns = [batch.column(index).to_pylist() for index in range(batch.num_columns)]
    for values in zip(*columns, strict=True):
        yield dict(zip(names, values, strict=True))


def _task_source(default_write_id: str, *, need_query_id: bool = False) -> RowSource:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return RowSource(default_write_id, 0, 0)
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY)
    if need_query_id and not (query_id and batch_id):
        # Without them a replayed micro-batch would get a new key and be committed again.
        raise ClientError(
            f"exactlyOnce needs the streaming query id and batch id (task properties {QUERY_ID_PROPERTY}, "
            f"{BATCH_ID_PROPERTY}), which this Spark did not set"
        )
    return RowSource(query_id or default_write_id, int(batch_id or 0), context.partitionId())


class _SendingWriter:
    """Shared by the batch and streaming writers: one producer, one task's rows."""

    def __init__(self, options: WriteOptions, factory: ClientFactory | None = None) -> None:
        self.options = options
        self.factory: ClientFactory = factory or OrbitClientFactory()
        # Drawn on the driver and pickled into every task, so all tasks (and retries) share it.
        self.write_id = uuid.uuid4().hex

    streaming = False

    def _producer(self) -> ProducerPort:
        opts = self.options
        return self.factory.producer(
            opts.producer_group, opts.namesrv_addr, opts.request_timeout_ms, opts.security
        )

    def _write(self, batches: Iterator[pa.RecordBatch]) -> SentMessages | StagedMessages:
        if self.options.exactly_once:
            source = _task_source(self.write_id, need_query_id=self.streaming)
            return RowStager(self.options, self._producer(), source).stage_all(batches)
        return RowSender(self.options, self._producer(), _task_source(self.write_id)).send_all(batches)

    def _commit_staged(self, messages: Sequence[WriterCommitMessage | None], batch_id: int) -> None:
        """Commit every task's staged chunks under (write id, batch id), once (module docstring)."""
        staged = [m for m in messages if isinstance(m, StagedMessages)]
        if not staged:
            return  # no task reported: nothing was staged, nothing to commit
        write_ids = {m.write_id for m in staged}
        if len(write_ids) != 1 or any(m.batch_id != batch_id for m in staged):
            raise ClientError(f"staged chunks of batch {batch_id} come from writes {sorted(write_ids)}")
        chunks = [chunk for m in sorted(staged, key=lambda m: m.partition_id) for chunk in m.chunks]
        write_id = write_ids.pop()
        result = self._producer().commit(write_id, batch_id, chunks, self.options.commit_timeout_ms)
        if result.already_committed:
            log.warning(
                "orbitmq write %s batch %d was committed before (a replay): its %d staged messages are "
                "dropped", write_id, batch_id, _total(messages),
            )  # fmt: skip
        else:
            log.info("orbitmq write %s batch %d: %d messages committed", write_id, batch_id, _total(messages))


def _total(messages: Sequence[WriterCommitMessage | None]) -> int:
    return sum(m.messages_sent for m in messages if isinstance(m, SentMessages | StagedMessages))


class OrbitBatchWriter(_SendingWriter, DataSourceArrowWriter):
    """``df.write.format("orbitmq")``: at-least-once (de-duplicable by ``msg_id``) or exactly-once."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages | StagedMessages:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.exactly_once:
            self._commit_staged(messages, 0)
            return
        log.info("orbitmq write %s: %d messages sent", self.write_id, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.exactly_once:
            log.warning("orbitmq write %s aborted: nothing was committed", self.write_id)
            return
        log.warning(
            "orbitmq write %s aborted after %d messages were sent; sent messages stay in the topic "
            "(de-duplicate by msg_id when the job is re-run)", self.write_id, _total(messages),
        )  # fmt: skip


class OrbitStreamWriter(_SendingWriter, DataSourceStreamArrowWriter):
    """``df.writeStream.format("orbitmq")``: at-least-once or exactly-once per micro-batch."""

    streaming = True

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages | StagedMessages:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.exactly_once:
            self._commit_staged(messages, batchId)
            return
        log.info("orbitmq stream write: batch %d sent %d messages", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.exactly_once:
            log.warning("orbitmq stream write: batch %d aborted; nothing was committed", batchId)
            return
        log.warning(
            "orbitmq stream write: batch %d aborted after %d messages were sent; the batch is "
            "re-sent on restart with the same msg_ids", batchId, _total(messages),
        )  # fmt: skip
