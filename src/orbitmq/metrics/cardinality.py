"""A bound on label cardinality: the most active topics and groups one by one, the rest summed.

A broker with 50,000 topics would otherwise export every per-topic family 50,000 times over
(and every per-group one per group and topic): megabytes per scrape, and a Prometheus that
stores them all. ``metricsMaxTopicLabels`` and ``metricsMaxGroupLabels`` cap how many topics
and groups keep their own label; the others are folded into one series labelled
:data:`OTHER` (``topic="__other__"``, ``consumer_group="__other__"``): counters and sizes are
summed, the lag latency keeps the largest age.

Which ones keep their label is decided by activity, deterministically: topics by messages
stored (the sum of their max queue offsets), groups by messages consumed (the sum of their
committed offsets), ties by name. A broker's scrape does not walk its topics for that:
:class:`TopicActivity` keeps every topic's count, their total and the choice current as queues
move, so the kept topics are read as they are and the others are a total minus the kept ones
(``Recorder.snapshot_kept`` does the same for the produce counters); only its first choice, and
one after a count fell, is a pass over every topic. The passes there are, and the group
folding, are steps of ``metrics.steps.ROWS_PER_STEP`` rows (:func:`most_active_topics_steps`,
:func:`cap_labels_steps`), so that the event loop can run them a slice at a time.

Pure: plain data in, plain data out.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from dataclasses import replace

from orbitmq.metrics.families import BrokerView, LagRow
from orbitmq.metrics.recorder import OTHER, Histogram, RecorderSnapshot
from orbitmq.metrics.steps import ROWS_PER_STEP, Steps, run_steps

__all__ = [
    "OTHER",
    "TopicActivity",
    "cap_labels",
    "cap_labels_steps",
    "most_active_topics",
    "most_active_topics_steps",
]


def _most_active(activity: dict[str, int], limit: int) -> frozenset[str]:
    return run_steps(_most_active_steps(activity.items(), len(activity), limit))


def _most_active_steps(activity: Iterable[tuple[str, int]], size: int, limit: int) -> Steps[frozenset[str]]:
    """The ``limit`` names of most activity (ties by name) among ``size`` (name, count) pairs.

    A step keeps the best of what it kept and :data:`ROWS_PER_STEP` more pairs: the same
    choice as one ``nsmallest`` over all of them, in bounded pieces.
    """
    pairs = iter(activity)
    if size <= limit:
        return frozenset(name for name, _ in pairs)
    kept: list[tuple[int, str]] = []
    while chunk := [(-count, name) for name, count in itertools.islice(pairs, ROWS_PER_STEP)]:
        kept = heapq.nsmallest(limit, itertools.chain(kept, chunk))
        yield None
    return frozenset(name for _, name in kept)


def _merge_histogram(into: Histogram | None, other: Histogram) -> Histogram:
    if into is None:
        return other.copy()
    into.counts = [left + right for left, right in zip(into.counts, other.counts, strict=True)]
    into.total += other.total
    into.count += other.count
    return into


def most_active_topics(view: BrokerView, max_topics: int) -> frozenset[str] | None:
    """The topics that keep their own label; None when every topic does."""
    return run_steps(most_active_topics_steps(view, max_topics))


def most_active_topics_steps(view: BrokerView, max_topics: int) -> Steps[frozenset[str] | None]:
    """:func:`most_active_topics` in steps (``view.topic_max_offsets`` must not change meanwhile)."""
    if len(view.topic_max_offsets) <= max_topics:
        return None
    offsets = view.topic_max_offsets
    return (yield from _most_active_steps(offsets.items(), len(offsets), max_topics))


def cap_labels(
    snapshot: RecorderSnapshot,
    view: BrokerView,
    max_topics: int,
    max_groups: int,
    topics: frozenset[str] | None = None,
) -> tuple[RecorderSnapshot, BrokerView]:
    """``snapshot`` and ``view`` with topics and groups past the caps folded into :data:`OTHER`.

    ``topics``: the topics kept, when already chosen (:func:`most_active_topics`, whose choice
    ``Recorder.snapshot_from`` may have applied already; folding twice changes nothing).
    ``view.topic_number`` keeps the real count of topics.
    """
    return run_steps(cap_labels_steps(snapshot, view, max_topics, max_groups, topics))


def cap_labels_steps(
    snapshot: RecorderSnapshot,
    view: BrokerView,
    max_topics: int,
    max_groups: int,
    topics: frozenset[str] | None = None,
) -> Steps[tuple[RecorderSnapshot, BrokerView]]:
    """:func:`cap_labels` in steps of :data:`ROWS_PER_STEP` rows (``metrics.steps``)."""
    topic_activity: dict[str, int] = {}
    if topics is None:
        # Chosen topics need no activity table: the one pass that matters is the folding below.
        topic_activity = dict(view.topic_max_offsets)
        for index, (topic, _, _) in enumerate(snapshot.messages_in):
            topic_activity.setdefault(topic, 0)
            if not index % ROWS_PER_STEP:
                yield None
        topic_activity.pop(OTHER, None)
    group_activity: dict[str, int] = {}
    for index, row in enumerate(view.lags):
        group_activity[row.group] = group_activity.get(row.group, 0) + row.consumer_offset
        if not index % ROWS_PER_STEP:
            yield None
    for index, (_, group, _) in enumerate(snapshot.messages_out):
        group_activity.setdefault(group, 0)
        if not index % ROWS_PER_STEP:
            yield None
    for index, (group, _, _) in enumerate(snapshot.send_to_dlq):
        group_activity.setdefault(group, 0)
        if not index % ROWS_PER_STEP:
            yield None
    for index, (group, _, _, _, _) in enumerate(view.consumer_connections):
        group_activity.setdefault(group, 0)
        if not index % ROWS_PER_STEP:
            yield None
    if topics is None and len(topic_activity) <= max_topics and len(group_activity) <= max_groups:
        return snapshot, view
    if topics is None:
        topics = yield from _most_active_steps(topic_activity.items(), len(topic_activity), max_topics)
    groups = yield from _most_active_steps(group_activity.items(), len(group_activity), max_groups)

    def topic_of(name: str) -> str:
        return name if name in topics else OTHER

    def group_of(name: str) -> str:
        return name if name in groups else OTHER

    messages_in: dict[tuple[str, str, bool], list[int]] = {}
    message_size: dict[tuple[str, str, bool], Histogram] = {}
    for index, ((topic, message_type, is_system), counts) in enumerate(snapshot.messages_in.items()):
        key = (topic_of(topic), message_type, is_system)
        total = messages_in.get(key)
        messages_in[key] = list(counts) if total is None else [total[0] + counts[0], total[1] + counts[1]]
        message_size[key] = _merge_histogram(
            message_size.get(key), snapshot.message_size[(topic, message_type, is_system)]
        )
        if not index % ROWS_PER_STEP:
            yield None
    messages_out: dict[tuple[str, str, bool], list[int]] = {}
    for index, ((topic, group, is_system), counts) in enumerate(snapshot.messages_out.items()):
        key = (topic_of(topic), group_of(group), is_system)
        total = messages_out.get(key)
        messages_out[key] = list(counts) if total is None else [total[0] + counts[0], total[1] + counts[1]]
        if not index % ROWS_PER_STEP:
            yield None
    send_to_dlq: dict[tuple[str, str, bool], int] = {}
    for index, ((group, topic, is_system), count) in enumerate(snapshot.send_to_dlq.items()):
        key = (group_of(group), topic_of(topic), is_system)
        send_to_dlq[key] = send_to_dlq.get(key, 0) + count
        if not index % ROWS_PER_STEP:
            yield None
    put_tps: dict[str, float] = {}
    for index, (topic, tps) in enumerate(snapshot.put_tps.items()):
        put_tps[topic_of(topic)] = put_tps.get(topic_of(topic), 0.0) + tps
        if not index % ROWS_PER_STEP:
            yield None
    get_tps: dict[tuple[str, str], float] = {}
    for index, ((topic, group), tps) in enumerate(snapshot.get_tps.items()):
        key2 = (topic_of(topic), group_of(group))
        get_tps[key2] = get_tps.get(key2, 0.0) + tps
        if not index % ROWS_PER_STEP:
            yield None
    capped_snapshot = replace(
        snapshot,
        messages_in=messages_in,
        messages_out=messages_out,
        message_size=message_size,
        send_to_dlq=send_to_dlq,
        put_tps=put_tps,
        get_tps=get_tps,
    )

    topic_max_offsets: dict[str, int] = {}
    for index, (topic, offset) in enumerate(view.topic_max_offsets.items()):
        topic_max_offsets[topic_of(topic)] = topic_max_offsets.get(topic_of(topic), 0) + offset
        if not index % ROWS_PER_STEP:
            yield None
    lags: dict[tuple[str, str, bool, bool], LagRow] = {}
    for index, row in enumerate(view.lags):
        key4 = (group_of(row.group), topic_of(row.topic), row.is_retry, row.is_system)
        seen = lags.get(key4)
        if seen is None:
            lags[key4] = replace(row, group=key4[0], topic=key4[1])
        else:
            lags[key4] = replace(
                seen,
                lag_messages=seen.lag_messages + row.lag_messages,
                lag_latency_ms=max(seen.lag_latency_ms, row.lag_latency_ms),
                consumer_offset=seen.consumer_offset + row.consumer_offset,
                online_consumers=max(seen.online_consumers, row.online_consumers),
            )
        if not index % ROWS_PER_STEP:
            yield None
    consumer_connections: dict[tuple[str, str, str, str, bool], int] = {}
    for index, ((group, language, version, mode, is_system), count) in enumerate(
        view.consumer_connections.items()
    ):
        key5 = (group_of(group), language, version, mode, is_system)
        consumer_connections[key5] = consumer_connections.get(key5, 0) + count
        if not index % ROWS_PER_STEP:
            yield None
    capped_view = replace(
        view,
        topic_max_offsets=topic_max_offsets,
        lags=sorted(lags.values(), key=lambda row: (row.group, row.topic, row.is_retry)),
        consumer_connections=consumer_connections,
    )
    return capped_snapshot, capped_view


def _descending(name: str) -> tuple[int, ...]:
    """A key that orders names the other way round (``a < b`` iff ``_descending(a) > _descending(b)``).

    The last element, above every negated code point, puts a name after the names it begins.
    """
    return (*(-ord(char) for char in name), 1)


class TopicActivity:
    """Each topic's activity (the sum of its queues' max offsets) and the most active topics,
    kept current as queues move, so that a scrape costs what it exports, not a pass over every
    topic.

    Fed with the queues that moved since the last scrape (:meth:`move`) and the topics that
    appeared or went (:meth:`add_topic`, :meth:`remove_topic`). The choice is the one
    :func:`most_active_topics` makes (activity, ties by name), and stays so as counts grow:
    a kept topic that grows stays kept, another that grows is compared with the least active
    kept one (a heap of the kept topics, least active on top, refreshed lazily: a kept count
    only grows). A count that falls or a topic that goes makes the next :meth:`kept_steps` choose
    again over every topic, in steps; so does the first one.

    Pure: one thread (the broker's event loop) feeds and reads it.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.queue_offsets: dict[tuple[str, int], int] = {}
        """Each queue's max offset."""
        self.counts: dict[str, int] = {}
        """Each topic's activity: the sum of its queues' max offsets (0 without queues)."""
        self.total = 0
        """The sum of :attr:`counts`."""
        self._kept: set[str] = set()
        self._heap: list[tuple[int, tuple[int, ...], str]] = []  # (count, _descending(name), name)
        self._chosen = False  # _kept holds the choice (only ever while there are more topics than limit)

    def clear(self) -> None:
        """Forget every queue and topic (before they are all read again)."""
        self.queue_offsets = {}
        self.counts = {}
        self.total = 0
        self._unchoose()

    def set_limit(self, limit: int) -> None:
        if limit != self.limit:
            self.limit = limit
            self._unchoose()

    def move(self, topic: str, queue_id: int, max_offset: int) -> None:
        """Queue ``queue_id`` of ``topic`` has ``max_offset`` now (a new queue, or one that moved)."""
        key = (topic, queue_id)
        delta = max_offset - self.queue_offsets.get(key, 0)
        self.queue_offsets[key] = max_offset
        count = self.counts.get(topic)
        self.counts[topic] = delta if count is None else count + delta
        self.total += delta
        if delta < 0:
            self._unchoose()
        elif (delta or count is None) and topic not in self._kept:
            self._arrived(topic)

    def add_topic(self, topic: str) -> None:
        """A topic that may have no queue yet (counts 0 until it does)."""
        if topic not in self.counts:
            self.counts[topic] = 0
            self._arrived(topic)

    def remove_topic(self, topic: str) -> None:
        """A topic without queues that went (a topic with queues stays: the store keeps them)."""
        count = self.counts.pop(topic, None)
        if count is not None:
            self.total -= count
            self._unchoose()

    def kept_steps(self) -> Steps[frozenset[str] | None]:
        """The ``limit`` most active topics (ties by name); None when every topic keeps its label.

        Nothing to walk while the choice holds; a new choice is a pass over every topic, in steps.
        """
        if len(self.counts) <= self.limit:
            return None
        if not self._chosen:
            counts = self.counts
            kept = yield from _most_active_steps(counts.items(), len(counts), self.limit)
            self._kept = set(kept)
            self._heap = [(counts[name], _descending(name), name) for name in kept]
            heapq.heapify(self._heap)
            self._chosen = True
        return frozenset(self._kept)

    def folded_offsets(self, kept: frozenset[str] | None) -> dict[str, int]:
        """``rocketmq_producer_offset``'s rows: the kept topics', the others summed under :data:`OTHER`."""
        if kept is None:
            return dict(self.counts)
        offsets = {topic: self.counts[topic] for topic in kept}
        if len(self.counts) > len(kept):
            offsets[OTHER] = self.total - sum(offsets.values())
        return offsets

    def _unchoose(self) -> None:
        self._chosen = False
        self._kept = set()
        self._heap = []

    def _arrived(self, topic: str) -> None:
        """``topic``, not kept, is new or grew: it replaces the least active kept topic if it beats it."""
        if not self._chosen:
            return
        heap, counts = self._heap, self.counts
        while heap[0][0] != counts[heap[0][2]]:  # grown since pushed: push it again as it is
            _, descending, name = heap[0]
            heapq.heapreplace(heap, (counts[name], descending, name))
        least, _, least_name = heap[0]
        count = counts[topic]
        if count > least or (count == least and topic < least_name):
            heapq.heapreplace(heap, (count, _descending(topic), topic))
            self._kept.discard(least_name)
            self._kept.add(topic)
