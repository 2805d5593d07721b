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

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from orbitmq.errors import ClientError
from orbitmq.spark._client import ClientFactory, OrbitClientFactory
from orbitmq.spark._errors import plain_errors
from orbitmq.spark._offsets import (
    OffsetJson,
    QueueOffsets,
    backlog,
    cap_to_limit,
    from_offset_json,
    offsets_behind,
    to_offset_json,
)
from orbitmq.spark._options import ReadOptions, StartKind
from orbitmq.spark._partition import ARROW_BATCH_ROWS, QueueRange, QueueReadError, read_range
from orbitmq.spark._planner import QueuePlanner, QueueUnavailableError, is_system_topic

__all__ = [
    "ARROW_BATCH_ROWS",
    "OrbitBatchReader",
    "OrbitStreamReader",
    "QueuePlanner",
    "QueueRange",
    "QueueReadError",
    "QueueUnavailableError",
    "is_system_topic",
    "read_range",
]

log = logging.getLogger(__name__)


def _is_placeholder(partition: InputPartition) -> bool:
    """Spark's stand-in when ``partitions()`` planned none (nothing to read in any queue)."""
    return type(partition) is InputPartition and partition.value is None


class OrbitBatchReader(DataSourceReader):
    """``spark.read.format("orbitmq")``: reads ``[startingOffsets, endingOffsets)`` of each queue."""

    def __init__(self, options: ReadOptions, factory: ClientFactory | None = None) -> None:
        self.planner = QueuePlanner(options, factory or OrbitClientFactory())

    @plain_errors
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

    @plain_errors
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

    @plain_errors
    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {mq: status.max_offset for mq, status in self.planner.bounds().items()}

    @plain_errors
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> OffsetJson:
        begin = from_offset_json(start)
        self._publish(begin)
        if self._target is not None:
            latest = dict(self._target)
        else:
            # No waiting here: a queue whose group does not answer keeps its position below.
            found = self.planner.survey()
            if found.unavailable:
                log.warning(
                    "orbitmq source: %d queue(s) unavailable, not advanced this trigger: %s",
                    len(found.unavailable), next(iter(found.unavailable.values())),
                )  # fmt: skip
            latest = {mq: status.max_offset for mq, status in found.known.items()}
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

    @plain_errors
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return self.planner.ranges(from_offset_json(start), from_offset_json(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_partition(partition, self.planner.factory)

    @plain_errors
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
