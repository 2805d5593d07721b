"""Source offsets of the Spark connector: canonical JSON, start resolution, read limits.

Spark stores a streaming source's position as JSON text in the query checkpoint and compares
positions *as text*: two equal dicts written with different key orders look like new data and
start an endless run of empty micro-batches. Every offset therefore leaves this module through
:func:`to_offset_json`, which emits one fixed shape with a fixed key order::

    {"<topic>": {"<broker_name>": {"<queue_id>": <next queue_offset>, ...}, ...}, ...}

topics and broker names sorted as strings, queue ids sorted as numbers, values plain ints.
A value is the queue offset of the next message to read, so a micro-batch covers
``[previous value, this value)`` of each queue. Everything here is pure (no I/O).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from orbitmq.errors import ClientError
from orbitmq.model.message import MessageQueue
from orbitmq.spark._options import EARLIEST_SENTINEL, LATEST_SENTINEL, OffsetSpec, ReadOptions, StartKind

QueueOffsets = dict[MessageQueue, int]
OffsetJson = dict[str, dict[str, dict[str, int]]]


class DataLossError(ClientError):
    """Messages a query still has to read are gone (retention deleted them, or a queue vanished)."""


class OffsetFormatError(ClientError):
    """An offset read back from a Spark checkpoint does not have the connector's shape."""


def to_offset_json(offsets: Mapping[MessageQueue, int]) -> OffsetJson:
    """The canonical JSON-ready form of ``offsets`` (fixed key order, plain ints)."""
    doc: OffsetJson = {}
    for mq in sorted(offsets, key=lambda q: (q.topic, q.broker_name, q.queue_id)):
        doc.setdefault(mq.topic, {}).setdefault(mq.broker_name, {})[str(mq.queue_id)] = int(offsets[mq])
    return doc


def from_offset_json(doc: Any) -> QueueOffsets:
    """Parse what :func:`to_offset_json` produced (after a JSON round trip through Spark).

    Raises:
        OffsetFormatError: ``doc`` is not ``{topic: {broker: {queue_id: int}}}``.
    """
    if not isinstance(doc, dict):
        raise OffsetFormatError(f"source offset must be a JSON object, got {doc!r}")
    offsets: QueueOffsets = {}
    for topic, brokers in doc.items():
        if not isinstance(brokers, dict):
            raise OffsetFormatError(
                f"source offset of topic {topic!r} must map broker names, got {brokers!r}"
            )
        for broker_name, queues in brokers.items():
            if not isinstance(queues, dict):
                raise OffsetFormatError(
                    f"source offset of {topic}/{broker_name} must map queue ids, got {queues!r}"
                )
            for queue_id, queue_offset in queues.items():
                valid = (
                    str(queue_id).isdigit()
                    and isinstance(queue_offset, int)
                    and not isinstance(queue_offset, bool)
                )
                if not valid or queue_offset < 0:
                    raise OffsetFormatError(
                        f"source offset of {topic}/{broker_name} queue {queue_id!r} is invalid: {queue_offset!r}"
                    )
                offsets[MessageQueue(topic, broker_name, int(queue_id))] = queue_offset
    return offsets


def backlog(start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]) -> int:
    """Messages between ``start`` and ``end`` over every queue of ``end``."""
    return sum(max(0, end_offset - start.get(mq, end_offset)) for mq, end_offset in end.items())


def resolve_offset(
    spec_value: int | None, kind: StartKind, min_offset: int, max_offset: int, by_time: int | None
) -> int:
    """The first queue offset to read for one queue of a brand-new query.

    ``spec_value`` is the queue's entry in explicit offset JSON (None when absent: such a queue
    starts at its earliest offset, as Spark's Kafka source does for new partitions); ``by_time``
    is the broker's answer to a timestamp search when ``kind`` is TIMESTAMP.
    """
    if kind is StartKind.EARLIEST:
        return min_offset
    if kind is StartKind.LATEST:
        return max_offset
    if kind is StartKind.TIMESTAMP:
        return max_offset if by_time is None else max(min_offset, min(by_time, max_offset))
    if spec_value is None or spec_value == EARLIEST_SENTINEL:
        return min_offset
    if spec_value == LATEST_SENTINEL:
        return max_offset
    return spec_value


def resolve_end(spec: OffsetSpec | None, mq: MessageQueue, max_offset: int) -> int:
    """The exclusive end of a batch read for one queue (``endingOffsets``; latest when absent)."""
    value = None if spec is None else spec.lookup(mq.topic, mq.broker_name, mq.queue_id)
    if value is None or value == LATEST_SENTINEL:
        return max_offset
    return min(value, max_offset)


def spec_value(options: ReadOptions, mq: MessageQueue) -> int | None:
    """The queue's entry in ``startingOffsets`` JSON, if any."""
    spec = options.starting_offsets
    return None if spec is None else spec.lookup(mq.topic, mq.broker_name, mq.queue_id)


def cap_to_limit(
    start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int], max_rows: int
) -> QueueOffsets:
    """Advance from ``start`` towards ``latest`` by at most ``max_rows`` messages in total.

    The budget is split in proportion to each queue's backlog, as Spark's Kafka source does;
    the rounding remainder goes to the queues with the largest fractional share, ties broken
    by queue order, so the result is deterministic and sums to ``min(max_rows, backlog)``.
    """
    pending = {mq: max(0, end - start.get(mq, end)) for mq, end in latest.items()}
    total = sum(pending.values())
    if total <= max_rows:
        return dict(latest)
    order = sorted(pending, key=lambda q: (q.topic, q.broker_name, q.queue_id))
    grants = {mq: pending[mq] * max_rows // total for mq in order}
    left = max_rows - sum(grants.values())
    by_remainder = sorted(order, key=lambda q: -((pending[q] * max_rows) % total))
    for mq in by_remainder:
        if left == 0:
            break
        if grants[mq] < pending[mq]:
            grants[mq] += 1
            left -= 1
    return {mq: start.get(mq, latest[mq]) + grants[mq] for mq in order}


def offsets_behind(end: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int]) -> dict[str, Any]:
    """Spark's Kafka source metrics: how far a batch's end is behind each queue's latest offset.

    ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and ``avgOffsetsBehindLatest`` over
    the queues of ``latest`` (values as strings, like the Kafka source's metrics map); empty
    when there is no queue.
    """
    behind = [max(0, latest_offset - end.get(mq, 0)) for mq, latest_offset in latest.items()]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": str(sum(behind) / len(behind)),
    }


Span = tuple[MessageQueue, int, int]
"""One queue's offset range ``(queue, first, stop)``, stop exclusive."""


def split_ranges(spans: Sequence[Span], min_partitions: int | None, max_records: int | None) -> list[Span]:
    """Split queue ranges into Spark partitions (``minPartitions``, ``maxRecordsPerPartition``).

    As in Spark's Kafka source: first every range is cut into pieces of at most
    ``max_records``; then, if there are still fewer pieces than ``min_partitions``, each piece
    is cut again into ``size / total * min_partitions`` pieces rounded half up (at least one), so big
    ranges give more tasks. Pieces of one range are contiguous and cover it exactly; the
    result depends only on the input, so a replayed batch is split the same way.
    """
    pieces = [span for span in spans if span[2] > span[1]]
    if max_records is not None:
        pieces = [part for span in pieces for part in _divide(span, -(-(span[2] - span[1]) // max_records))]
    if min_partitions is not None and min_partitions > len(pieces):
        total = sum(stop - first for _, first, stop in pieces)
        pieces = [
            part
            for span in pieces
            for part in _divide(span, max(1, math.floor((span[2] - span[1]) / total * min_partitions + 0.5)))
        ]
    return pieces


def _divide(span: Span, parts: int) -> list[Span]:
    """``parts`` contiguous pieces of ``span`` whose sizes differ by at most one (no empty piece)."""
    mq, first, stop = span
    parts = max(1, min(parts, stop - first))
    remaining, position, result = stop - first, first, []
    for index in range(parts):
        size = remaining // (parts - index)
        result.append((mq, position, position + size))
        position += size
        remaining -= size
    return result
