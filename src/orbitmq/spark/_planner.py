"""Driver-side planning of the ``orbitmq`` source: which queues, which offsets, what is lost.

Offsets are learned from the broker *group*, not from one address. For every topic the
planner reads the route from the name server, then asks each broker name's members for the
min and max offset of its queues (GET_MIN_OFFSET / GET_MAX_OFFSET), the master first and,
when it does not answer or has left the route, its slaves (ids 1, 2, ... in the route's
``brokerAddrs``), which hold the same queues. A queue no member answers for is *unavailable*:
never taken to be empty, nor to have lost its messages. Where planning needs a queue's
offsets (a batch read, a query's start, a micro-batch's data-loss check), unavailable queues
are asked again with back-off for up to ``failoverTimeoutMs``, then the read fails with
:class:`QueueUnavailableError` naming topic, broker, queue and what each member answered.
``latestOffset`` does not wait: a queue it cannot see keeps its position until it answers.

Name-server lookups (routes, topic lists) are retried ``fetchOffset.numRetries`` times,
``fetchOffset.retryIntervalMs`` apart, as Spark's Kafka source retries its offset fetches.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from orbitmq.errors import ClientError, OrbitError
from orbitmq.model.message import MessageQueue
from orbitmq.spark._client import AdminPort, ClientFactory, QueueBounds
from orbitmq.spark._offsets import (
    DataLossError,
    QueueOffsets,
    resolve_end,
    resolve_offset,
    spec_value,
    split_ranges,
)
from orbitmq.spark._options import ReadOptions, SelectKind, StartKind, TimestampStrategy
from orbitmq.spark._partition import QueueRange

log = logging.getLogger(__name__)
_T = TypeVar("_T")

RETRY_FIRST_DELAY_S = 0.1
"""First pause before asking an unavailable broker group again (doubles up to the cap)."""
RETRY_MAX_DELAY_S = 2.0

_SYSTEM_TOPIC = re.compile(
    r"^(%RETRY%|%DLQ%|RMQ_SYS_|rmq_sys_|SCHEDULE_TOPIC_XXXX$|TBW102$|OFFSET_MOVED_EVENT$)"
)


def is_system_topic(topic: str) -> bool:
    """Retry, dead-letter and broker-internal topics, which a pattern never selects."""
    return _SYSTEM_TOPIC.match(topic) is not None


class QueueUnavailableError(ClientError):
    """No member of a queue's broker group told its offsets within ``failoverTimeoutMs``.

    Nothing is known to be lost: the messages may come back with the broker.
    """


@dataclass(slots=True)
class GroupBounds:
    """Offsets of the selected queues: those learned, and why the others could not be."""

    known: dict[MessageQueue, QueueBounds] = field(default_factory=dict)
    unavailable: dict[MessageQueue, str] = field(default_factory=dict)
    brokers_in_route: set[tuple[str, str]] = field(default_factory=set)
    """(topic, broker name) pairs the route names: a queue of another pair is not in the route."""


def backoff_delays(timeout_ms: int) -> Callable[[], float | None]:
    """A source of pauses: 0.1 s doubling up to 2 s, then None once ``timeout_ms`` has passed."""
    deadline = time.monotonic() + timeout_ms / 1000
    delay = RETRY_FIRST_DELAY_S

    def next_delay() -> float | None:
        nonlocal delay
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        pause, delay = min(delay, left), min(delay * 2, RETRY_MAX_DELAY_S)
        return pause

    return next_delay


class QueuePlanner:
    """Driver-side planning over an admin client (opened lazily, never pickled)."""

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

    # -- offsets from the broker groups ----------------------------------------------------------

    def survey(self) -> GroupBounds:
        """One pass over every selected queue's broker group (no waiting)."""
        selection = self.options.selection
        found = GroupBounds()
        for topic in self.topics():
            route = self._retrying(f"route of {topic}", functools.partial(self.admin.topic_route, topic))
            members = {data.broker_name: data.broker_addrs for data in route.broker_datas}
            for data in sorted(route.queue_datas, key=lambda d: d.broker_name):
                if not data.readable:
                    continue
                found.brokers_in_route.add((topic, data.broker_name))
                queues = [
                    MessageQueue(topic, data.broker_name, queue_id)
                    for queue_id in range(data.read_queue_nums)
                    if selection.queue_selected(topic, data.broker_name, queue_id)
                ]
                if queues:
                    self._ask_group(queues, members.get(data.broker_name, {}), found)
        return found

    def _ask_group(self, queues: list[MessageQueue], addrs: Mapping[int, str], found: GroupBounds) -> None:
        """Offsets of one broker name's queues from its first member that answers."""
        tried = []
        for broker_id in sorted(addrs):
            try:
                statuses = self.admin.queue_statuses_of(queues, broker_id)
            except OrbitError as exc:
                tried.append(f"{_member(broker_id)} {addrs[broker_id]}: {exc}")
                continue
            if broker_id != 0:
                log.info(
                    "orbitmq source: offsets of %s from slave %s", queues[0].broker_name, addrs[broker_id]
                )
            found.known.update(statuses)
            return
        if not addrs:
            tried.append("the route names no member of the group (master and slaves away)")
        elif 0 not in addrs:
            tried.insert(0, "the route names no master")
        why = "; ".join(tried)
        for mq in queues:
            found.unavailable[mq] = why

    def bounds(self, required: Collection[MessageQueue] | None = None) -> dict[MessageQueue, QueueBounds]:
        """Min/max offsets of every selected queue, waiting for unavailable groups.

        ``required`` names the queues that must be learned (None: every selected queue the
        route names); a required queue whose broker name the route does not name at all is
        unavailable too (its whole group is away).

        Raises:
            QueueUnavailableError: a required queue's offsets were not learned within
                ``failoverTimeoutMs``; names topic, broker, queue and each member's answer.
        """
        next_delay = backoff_delays(self.options.failover_timeout_ms)
        attempts = 0
        while True:
            attempts += 1
            found = self.survey()
            missing = self._missing(found, required)
            if not missing:
                return found.known
            pause = next_delay()
            if pause is None:
                raise QueueUnavailableError(
                    _unavailable_text(missing, attempts, self.options.failover_timeout_ms)
                )
            log.warning(
                "orbitmq source: offsets of %d queue(s) unavailable (%s); asking again in %.1f s",
                len(missing), next(iter(missing.values())), pause,
            )  # fmt: skip
            time.sleep(pause)

    @staticmethod
    def _missing(found: GroupBounds, required: Collection[MessageQueue] | None) -> dict[MessageQueue, str]:
        if required is None:
            return dict(found.unavailable)
        missing = {}
        for mq in required:
            if mq in found.unavailable:
                missing[mq] = found.unavailable[mq]
            elif mq not in found.known and (mq.topic, mq.broker_name) not in found.brokers_in_route:
                missing[mq] = "the route names no queue of this broker (its whole group is away)"
        return missing

    def _search(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._retrying(f"offset search in {mq}", lambda: self.admin.search_offset(mq, timestamp_ms))

    # -- start and end ---------------------------------------------------------------------------

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

    # -- partitions ------------------------------------------------------------------------------

    def ranges(self, start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]) -> list[QueueRange]:
        """Partitions for ``[start, end)``, after checking nothing below ``end`` was deleted.

        A queue missing from ``start`` (discovered after the query began) starts at 0, so
        a queue whose oldest messages are already gone is reported like any other loss. A
        queue whose group does not answer is waited for (see :meth:`bounds`), never taken
        for lost.

        Raises:
            DataLossError: ``failOnDataLoss`` is true and a queue's min offset is above the
                range's start; the message names topic, broker, queue and both offsets.
            QueueUnavailableError: a queue's offsets could not be learned in time.
        """
        wanted = {
            mq: (start.get(mq, 0), end_offset)
            for mq, end_offset in end.items()
            if end_offset > start.get(mq, 0)
        }
        if not wanted:
            return []
        bounds = self.bounds(required=wanted)
        spans = []
        for mq in sorted(wanted, key=lambda q: (q.topic, q.broker_name, q.queue_id)):
            first, stop = wanted[mq]
            status = bounds.get(mq)
            # Not among the queues its (answering) broker has: the queue itself is gone.
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
            opts.security, opts.failover_timeout_ms,
        )  # fmt: skip


def _member(broker_id: int) -> str:
    return "master" if broker_id == 0 else f"slave {broker_id}"


def _unavailable_text(missing: Mapping[MessageQueue, str], attempts: int, timeout_ms: int) -> str:
    by_broker: dict[tuple[str, str], list[int]] = {}
    for mq in missing:
        by_broker.setdefault((mq.topic, mq.broker_name), []).append(mq.queue_id)
    first = next(iter(missing))
    named = "; ".join(
        f"topic {topic} broker {broker} queue(s) {', '.join(map(str, sorted(ids)))}"
        for (topic, broker), ids in sorted(by_broker.items())
    )
    return (
        f"offsets unavailable for {named}: no member of the broker group answered in "
        f"{timeout_ms / 1000:g} s ({attempts} attempts; last: {missing[first]}). Nothing is known "
        "to be lost; read again once the broker or its slave is back (failoverTimeoutMs sets the wait)"
    )
