"""Batch and streaming readers of the ``orbitmq`` source, and the partitions they plan.

Theory of operation. A read is planned on the driver and executed in executor tasks, by
*different* Python objects in different processes: Spark pickles the reader into each task,
and the streaming reader's planning methods run in a long-lived source-runner process. So:

* a :class:`QueueRange` partition carries everything a task needs (queue, offset range,
  nameserver, tag expression); tasks never consult driver state;
* client connections are opened lazily and never pickled (``__getstate__`` drops them);
* one Spark partition reads one queue's ``[start_offset, end_offset)`` (``minPartitions`` and
  ``maxRecordsPerPartition`` split a queue's range into several). Filtering by tag happens
  inside that range, so a replayed range yields exactly the same rows.

Streaming positions are dicts in the canonical shape of :mod:`orbitmq.spark._offsets`. The
first position is resolved by :meth:`OrbitStreamReader.initialOffset`, which Spark calls again
after every restart until batch 0 commits; ``latest`` and ``startingTimestamp`` would then
drift, so when ``consumerGroup`` is set the resolved start is written to that group at once
and read back on the next call (see docs/spark.md, "Starting position").
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from orbitmq.errors import ClientError, OrbitError
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.tags import TagFilter
from orbitmq.spark._client import AdminPort, ClientFactory, OrbitClientFactory, QueueBounds
from orbitmq.spark._offsets import (
    DataLossError,
    OffsetJson,
    QueueOffsets,
    backlog,
    cap_to_limit,
    from_offset_json,
    offsets_behind,
    resolve_end,
    resolve_offset,
    spec_value,
    split_ranges,
    to_offset_json,
)
from orbitmq.spark._options import (
    NO_SECURITY,
    ClientSecurity,
    ReadOptions,
    SelectKind,
    StartKind,
    TimestampStrategy,
)
from orbitmq.spark._schema import ColumnBuilder

log = logging.getLogger(__name__)
_T = TypeVar("_T")

ARROW_BATCH_ROWS = 4096
"""Rows per Arrow batch a task yields (a batch is flushed after the pull that reaches it)."""

_SYSTEM_TOPIC = re.compile(
    r"^(%RETRY%|%DLQ%|RMQ_SYS_|rmq_sys_|SCHEDULE_TOPIC_XXXX$|TBW102$|OFFSET_MOVED_EVENT$)"
)


def is_system_topic(topic: str) -> bool:
    """Retry, dead-letter and broker-internal topics, which a pattern never selects."""
    return _SYSTEM_TOPIC.match(topic) is not None


def _is_placeholder(partition: InputPartition) -> bool:
    """Spark's stand-in when ``partitions()`` planned none (nothing to read in any queue)."""
    return type(partition) is InputPartition and partition.value is None


@dataclass(frozen=True, slots=True)
class QueueRange(InputPartition):
    """One Spark partition: ``[start_offset, end_offset)`` of one queue, and how to reach it."""

    topic: str
    broker_name: str
    queue_id: int
    start_offset: int
    end_offset: int
    namesrv_addr: str
    expression: str
    pull_batch_size: int
    request_timeout_ms: int
    security: ClientSecurity = NO_SECURITY

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)


def read_range(partition: QueueRange, factory: ClientFactory) -> Iterator[pa.RecordBatch]:
    """Yield the partition's messages as Arrow batches of up to about :data:`ARROW_BATCH_ROWS` rows."""
    if partition.end_offset <= partition.start_offset:
        return
    puller = factory.puller(partition.namesrv_addr, partition.request_timeout_ms, partition.security)
    builder = ColumnBuilder(
        partition.broker_name, TagFilter.parse(partition.expression), partition.end_offset
    )
    pulls = puller.pull_range_raw(
        partition.queue,
        partition.start_offset,
        partition.end_offset,
        expression=partition.expression,
        max_msg_nums=partition.pull_batch_size,
    )
    for pulled in pulls:
        builder.add_pull_body(pulled.body)
        if len(builder) >= ARROW_BATCH_ROWS:
            yield builder.flush()
    if len(builder):
        yield builder.flush()


class QueuePlanner:
    """Driver-side planning over an admin client: which queues, which offsets, what is lost."""

    def __init__(self, options: ReadOptions, factory: ClientFactory) -> None:
        self.options = options
        self.factory = factory
        self._admin: AdminPort | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "factory": self.factory, "_admin": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.options, self.factory, self._admin = state["options"], state["factory"], None

    @property
    def admin(self) -> AdminPort:
        if self._admin is None:
            opts = self.options
            self._admin = self.factory.admin(opts.namesrv_addr, opts.request_timeout_ms, opts.security)
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            admin, self._admin = self._admin, None
            admin.close()

    def _retrying(self, what: str, call: Callable[[], _T]) -> _T:
        """``call()``, retried ``fetchOffset.numRetries`` times on a retriable client error."""
        opts = self.options
        for attempt in range(opts.fetch_offset_retries + 1):
            try:
                return call()
            except OrbitError as exc:
                if not exc.retriable or attempt == opts.fetch_offset_retries:
                    raise
                log.info("orbitmq source: %s failed (%s); retry %d", what, exc, attempt + 1)
                time.sleep(opts.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def topics(self) -> list[str]:
        selection = self.options.selection
        if selection.kind is SelectKind.TOPICS:
            return list(selection.topics)
        if selection.kind is SelectKind.ASSIGN:
            return sorted(selection.assigned)
        names = self._retrying("listing topics", lambda: self.admin.list_topics())
        return sorted(t for t in names if not is_system_topic(t) and selection.topic_matches(t))

    def bounds(self) -> dict[MessageQueue, QueueBounds]:
        """Min/max offsets of every selected queue, now."""
        selection = self.options.selection
        found: dict[MessageQueue, QueueBounds] = {}
        for topic in self.topics():
            statuses = self._retrying(
                f"offsets of {topic}", functools.partial(self.admin.topic_status, topic)
            )
            for mq, status in statuses.items():
                if selection.queue_selected(mq.topic, mq.broker_name, mq.queue_id):
                    found[mq] = status
        return found

    def _search(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._retrying(f"offset search in {mq}", lambda: self.admin.search_offset(mq, timestamp_ms))

    def starting_offsets(self, bounds: Mapping[MessageQueue, QueueBounds]) -> QueueOffsets:
        """Resolve ``startingOffsets`` / ``startingTimestamp`` / ``startingOffsetsByTimestamp``.

        Raises:
            ClientError: a queue has no message stored at or after its start time and
                ``startingOffsetsByTimestampStrategy`` is ``error``; names queue and time.
        """
        opts = self.options
        start: QueueOffsets = {}
        for mq, status in bounds.items():
            by_time = None
            timestamp_ms = opts.timestamp_for(mq.topic, mq.broker_name, mq.queue_id)
            if opts.start_kind is StartKind.TIMESTAMP and timestamp_ms is not None:
                by_time = self._search(mq, timestamp_ms)
                if by_time >= status.max_offset:  # every message is older (or there is none)
                    by_time = self._no_message_since(mq, timestamp_ms, status.max_offset)
            kind = opts.start_kind
            if kind is StartKind.TIMESTAMP and timestamp_ms is None:
                kind = StartKind.EARLIEST  # a queue the JSON does not name
            start[mq] = resolve_offset(
                spec_value(opts, mq), kind, status.min_offset, status.max_offset, by_time
            )
        return start

    def _no_message_since(self, mq: MessageQueue, timestamp_ms: int, max_offset: int) -> int:
        if self.options.timestamp_strategy is TimestampStrategy.LATEST:
            return max_offset
        raise ClientError(
            f"topic {mq.topic} broker {mq.broker_name} queue {mq.queue_id} has no message stored at or "
            f"after timestamp {timestamp_ms} (max offset {max_offset}); set "
            "startingOffsetsByTimestampStrategy=latest to start such queues at their latest offset"
        )

    def ending_offsets(self, bounds: Mapping[MessageQueue, QueueBounds]) -> QueueOffsets:
        """Resolve ``endingOffsets`` / ``endingTimestamp`` / ``endingOffsetsByTimestamp`` (batch).

        A time end is the first message stored at or after the time (exclusive), or the
        queue's latest offset when there is none, as in Spark's Kafka source.
        """
        opts = self.options
        end: QueueOffsets = {}
        for mq, status in bounds.items():
            timestamp_ms = opts.end_timestamp_for(mq.topic, mq.broker_name, mq.queue_id)
            if timestamp_ms is not None:
                end[mq] = min(self._search(mq, timestamp_ms), status.max_offset)
            else:
                end[mq] = resolve_end(opts.ending_offsets, mq, status.max_offset)
        return end

    def ranges(self, start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]) -> list[QueueRange]:
        """Partitions for ``[start, end)``, after checking nothing below ``end`` was deleted.

        A queue missing from ``start`` (discovered after the query began) starts at 0, so
        a queue whose oldest messages are already gone is reported like any other loss.

        Raises:
            DataLossError: ``failOnDataLoss`` is true and a queue's min offset is above the
                range's start; the message names topic, broker, queue and both offsets.
        """
        wanted = {
            mq: (start.get(mq, 0), end_offset)
            for mq, end_offset in end.items()
            if end_offset > start.get(mq, 0)
        }
        if not wanted:
            return []
        bounds = self.bounds()
        spans = []
        for mq in sorted(wanted, key=lambda q: (q.topic, q.broker_name, q.queue_id)):
            first, stop = wanted[mq]
            status = bounds.get(mq)
            min_offset = status.min_offset if status is not None else stop
            if min_offset > first:
                first = self._on_data_loss(mq, first, stop, min_offset)
            if stop > first:
                spans.append((mq, first, stop))
        opts = self.options
        return [
            self._range(mq, first, stop)
            for mq, first, stop in split_ranges(spans, opts.min_partitions, opts.max_records_per_partition)
        ]

    def _on_data_loss(self, mq: MessageQueue, first: int, stop: int, min_offset: int) -> int:
        text = (
            f"topic {mq.topic} broker {mq.broker_name} queue {mq.queue_id}: queue offsets "
            f"[{first}, {min(min_offset, stop)}) are no longer available (min offset is now {min_offset}); "
            "retention removed them or the queue was recreated"
        )
        if self.options.fail_on_data_loss:
            raise DataLossError(text + ". Set failOnDataLoss=false to skip them.")
        log.warning("%s; skipping them (failOnDataLoss=false)", text)
        return min(min_offset, stop)

    def _range(self, mq: MessageQueue, first: int, stop: int) -> QueueRange:
        opts = self.options
        return QueueRange(
            mq.topic, mq.broker_name, mq.queue_id, first, stop,
            opts.namesrv_addr, opts.sub_expression, opts.pull_batch_size, opts.request_timeout_ms,
            opts.security,
        )  # fmt: skip


class OrbitBatchReader(DataSourceReader):
    """``spark.read.format("orbitmq")``: reads ``[startingOffsets, endingOffsets)`` of each queue."""

    def __init__(self, options: ReadOptions, factory: ClientFactory | None = None) -> None:
        self.planner = QueuePlanner(options, factory or OrbitClientFactory())

    def partitions(self) -> Sequence[InputPartition]:
        try:
            bounds = self.planner.bounds()
            start = self.planner.starting_offsets(bounds)
            return self.planner.ranges(start, self.planner.ending_offsets(bounds))
        finally:
            self.planner.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_partition(partition, self.planner.factory)


def _read_partition(partition: InputPartition, factory: ClientFactory) -> Iterator[pa.RecordBatch]:
    if _is_placeholder(partition):
        return iter(())
    if not isinstance(partition, QueueRange):
        raise ClientError(f"orbitmq reader got a foreign partition {partition!r}")
    return read_range(partition, factory)


class OrbitStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("orbitmq")``: micro-batches of queue offset ranges.

    Admission control: ``maxOffsetsPerTrigger`` caps a batch (split across queues in
    proportion to backlog); ``minOffsetsPerTrigger`` skips triggers until that many messages
    wait or ``maxTriggerDelay`` passed since the last batch. Trigger.AvailableNow reads up to
    the max offsets seen when the query started, then stops.
    """

    def __init__(self, options: ReadOptions, factory: ClientFactory | None = None) -> None:
        self.planner = QueuePlanner(options, factory or OrbitClientFactory())
        self._target: QueueOffsets | None = None
        self._latest: QueueOffsets = {}
        self._end: QueueOffsets = {}
        self._published: QueueOffsets = {}
        self._last_trigger_ms = time.monotonic() * 1000

    @property
    def options(self) -> ReadOptions:
        return self.planner.options

    def initialOffset(self) -> OffsetJson:
        bounds = self.planner.bounds()
        group = self.options.consumer_group
        if group is None or self.options.start_kind not in (StartKind.LATEST, StartKind.TIMESTAMP):
            return to_offset_json(self.planner.starting_offsets(bounds))
        start: QueueOffsets = {}
        missing = {}
        for mq, status in bounds.items():
            # setZeroIfNotFound=false: a group that never committed is "not found", not 0.
            committed = self.planner.admin.committed_offset(group, mq, zero_if_not_found=False)
            if committed is None:
                missing[mq] = status
            else:
                start[mq] = committed
        resolved = self.planner.starting_offsets(missing)
        for mq, queue_offset in resolved.items():
            # Written at once so that a restart before batch 0 commits resolves the same start.
            self.planner.admin.update_consumer_offset(group, mq, queue_offset)
        start.update(resolved)
        self._published = dict(start)
        return to_offset_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        max_rows = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if max_rows is None else ReadMaxRows(max_rows)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {mq: status.max_offset for mq, status in self.planner.bounds().items()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> OffsetJson:
        begin = from_offset_json(start)
        self._publish(begin)
        if self._target is not None:
            latest = dict(self._target)
        else:
            latest = {mq: status.max_offset for mq, status in self.planner.bounds().items()}
        self._latest = latest
        # Queues that vanished keep their position; an end never moves backwards.
        end = {mq: max(latest.get(mq, 0), begin.get(mq, 0)) for mq in {*begin, *latest}}
        if self._hold_back(begin, end):
            self._end = begin
            return to_offset_json(begin)
        if isinstance(limit, ReadMaxRows):
            end = cap_to_limit(begin, end, limit.max_rows)
        self._last_trigger_ms = time.monotonic() * 1000
        self._end = end
        return to_offset_json(end)

    def _hold_back(self, begin: QueueOffsets, end: QueueOffsets) -> bool:
        min_rows = self.options.min_offsets_per_trigger
        if min_rows is None or self._target is not None:
            return False
        waited_ms = time.monotonic() * 1000 - self._last_trigger_ms
        return backlog(begin, end) < min_rows and waited_ms < self.options.max_trigger_delay_ms

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """Shown as ``latestOffset`` in ``StreamingQueryProgress.sources``.

        PySpark 4.3 gives a Python source no way to fill the progress's ``metrics`` map (its
        JVM stream class does not report source metrics), so the Kafka source's metrics
        (``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``, ``avgOffsetsBehindLatest``:
        the batch's end against each queue's latest offset) travel here, beside ``latest``.
        """
        if not self._latest:
            return None
        return {"latest": to_offset_json(self._latest), **offsets_behind(self._end, self._latest)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return self.planner.ranges(from_offset_json(start), from_offset_json(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_partition(partition, self.planner.factory)

    def commit(self, end: dict[str, Any]) -> None:
        self._publish(from_offset_json(end))

    def stop(self) -> None:
        self.planner.close()

    def _publish(self, offsets: QueueOffsets) -> None:
        """Record progress under ``consumerGroup`` so lag tools see the query (never read back
        for recovery: the checkpoint is the only source of truth)."""
        group = self.options.consumer_group
        if group is None:
            return
        for mq, queue_offset in offsets.items():
            if self._published.get(mq) != queue_offset:
                self.planner.admin.update_consumer_offset(group, mq, queue_offset)
                self._published[mq] = queue_offset
