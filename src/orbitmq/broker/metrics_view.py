"""What a ``/metrics`` scrape reads from the broker: lag, storage, connections, topic offsets.

A scrape runs on the broker's event loop a slice at a time (``metrics.exporter.SlicedCollector``,
``metrics.steps``), and costs what it exports plus what moved since the last one, not a pass over
every topic: :func:`scrape_steps` keeps, per store, every queue's max offset and every topic's
activity between scrapes (``_TopicTracker``, ``metrics.cardinality.TopicActivity``), fed with the
queues that moved (``MessageStore.take_moved_queues``: one set swapped under the store's lock) and,
when the topic table's version moved, its topics. The topics past ``metricsMaxTopicLabels`` are
summed under ``__other__`` from running totals (``Recorder.snapshot_kept``). Only the first scrape
and one after the store changed shape (a topic deleted, the log truncated) read every queue, a
chunk of queues per hold of the store's lock, on a worker thread. The other reads that may wait
for the lock (the storage figures) are made off the loop too. Per queue with lag, one store-time
read (the age of the oldest message not yet consumed, ``rocketmq_consumer_lag_latency``).

Lag follows rocketmq-exporter's ``rocketmq_group_diff``: for each (group, topic) with committed
offsets on this broker, the sum over queues of ``max(0, max offset - committed offset)``.
"""

from __future__ import annotations

import shutil
import time
import weakref

from prometheus_client.core import Metric

from orbitmq import __version__
from orbitmq.broker.handlers import BrokerState, now_ms
from orbitmq.broker.validation import RETRY_GROUP_TOPIC_PREFIX, is_system_topic
from orbitmq.metrics import BrokerView, LagRow, Recorder, broker_families, request_code_names
from orbitmq.metrics.cardinality import TopicActivity, cap_labels_steps
from orbitmq.metrics.steps import ROWS_PER_STEP, Steps, off_loop, run_steps
from orbitmq.store.message_store import MessageStore

_CODE_NAMES = request_code_names()


def build_view(state: BrokerState, boot_timestamp_ms: int, broker_addr: str) -> BrokerView:
    """Read the broker's tables and store into a :class:`BrokerView`."""
    return run_steps(view_steps(state, boot_timestamp_ms, broker_addr))


def _base_view(state: BrokerState, boot_timestamp_ms: int, broker_addr: str) -> BrokerView:
    config = state.config
    return BrokerView(
        cluster=config.broker_cluster_name,
        broker_name=config.broker_name,
        broker_id=config.broker_id,
        broker_addr=broker_addr,
        version=f"OrbitMQ {__version__}",
        boot_timestamp_ms=boot_timestamp_ms,
        permission=config.broker_permission,
    )


def view_steps(state: BrokerState, boot_timestamp_ms: int, broker_addr: str) -> Steps[BrokerView]:
    """:func:`build_view` in steps of at most :data:`ROWS_PER_STEP` queues, topics or offsets."""
    store = state.store
    view = _base_view(state, boot_timestamp_ms, broker_addr)

    # Off the loop: the store answers under its lock, which a flush of every queue can hold for
    # seconds with tens of thousands of them; the loop's steps only sum what comes back.
    def read_store() -> dict[tuple[str, int], int]:
        _storage(state, view)
        return _max_queue_offsets(store)

    max_offsets = yield from off_loop(read_store)
    topic_max_offsets = view.topic_max_offsets
    for index, topic in enumerate(state.topics.names()):
        topic_max_offsets.setdefault(topic, 0)
        if not index % ROWS_PER_STEP:
            yield None
    for index, ((topic, _), offset) in enumerate(max_offsets.items()):
        topic_max_offsets[topic] = topic_max_offsets.get(topic, 0) + offset
        if not index % ROWS_PER_STEP:
            yield None
    view.topic_number = len(topic_max_offsets)
    view.lags = yield from _lag_rows(state, max_offsets)
    view.group_number = len(state.groups.names())
    return view


def _max_queue_offsets(store: MessageStore) -> dict[tuple[str, int], int]:
    """Every queue's max offset, a chunk of queues per hold of the store's lock (one hold per
    queue raced the store's other users for it, one hold for all kept them waiting)."""
    queues = list(store.queue_set())
    max_offsets: dict[tuple[str, int], int] = {}
    for start in range(0, len(queues), ROWS_PER_STEP):
        chunk = queues[start : start + ROWS_PER_STEP]
        max_offsets.update(zip(chunk, store.get_max_queue_offsets(chunk), strict=True))
        # The GIL given up between two holds: else this thread, holding it, takes the lock
        # back before a request woken to take it can (it would wait for every chunk).
        time.sleep(0)
    return max_offsets


def _lag_rows(state: BrokerState, max_offsets: dict[tuple[str, int], int]) -> Steps[list[LagRow]]:
    current_ms = now_ms()
    per_group: dict[tuple[str, str], dict[int, int]] = {}
    for index, (group, topic, queue_id, offset) in enumerate(state.offsets):
        per_group.setdefault((group, topic), {})[queue_id] = offset
        if not index % ROWS_PER_STEP:
            yield None
    rows: list[LagRow] = []
    lookups = 0
    for (group, topic), queues in sorted(per_group.items()):
        lag = 0
        oldest_ms = current_ms
        for queue_id, committed in queues.items():
            behind = max(0, max_offsets.get((topic, queue_id), 0) - max(committed, 0))
            if behind:
                lag += behind
                stored_ms = state.store.get_store_timestamp(topic, queue_id, max(committed, 0))
                if stored_ms > 0:
                    oldest_ms = min(oldest_ms, stored_ms)
        members = state.consumers.get(group)
        rows.append(
            LagRow(
                group=group,
                topic=topic,
                is_retry=topic.startswith(RETRY_GROUP_TOPIC_PREFIX),
                is_system=is_system_topic(topic),
                lag_messages=lag,
                lag_latency_ms=current_ms - oldest_ms if lag else 0,
                consumer_offset=sum(max(offset, 0) for offset in queues.values()),
                online_consumers=len(members.channels) if members is not None else 0,
                msg_model="0" if members is not None and members.message_model == "BROADCASTING" else "1",
            )
        )
        lookups += len(queues)
        if lookups >= ROWS_PER_STEP:
            lookups = 0
            yield None
    return rows


def _storage(state: BrokerState, view: BrokerView) -> None:
    store = state.store
    max_offset = store.max_commit_log_offset
    min_offset = store.min_commit_log_offset
    view.commit_log_min_offset = min_offset
    view.commit_log_max_offset = max_offset
    view.storage_size_bytes = max_offset - min_offset
    view.flush_behind_bytes = max(0, max_offset - store.flushed_commit_log_offset)
    view.dispatch_behind_bytes = max(0, max_offset - store.confirm_commit_log_offset)
    if max_offset > min_offset:
        oldest_ms = store.store_timestamp_at(min_offset)
        view.message_reserve_time_ms = max(0, now_ms() - oldest_ms) if oldest_ms > 0 else 0
    try:
        usage = shutil.disk_usage(store.store_path)
    except OSError:
        return
    view.disk_total_bytes = usage.total
    view.disk_free_bytes = usage.free


def _connections(state: BrokerState, view: BrokerView) -> None:
    """Per connection, not per topic: cheap enough for the event loop, which owns these tables."""
    for group in state.producers.groups():
        for channel in state.producers.channels(group):
            key = (channel.language, str(channel.version))
            view.producer_connections[key] = view.producer_connections.get(key, 0) + 1
    for group in state.consumers.groups():
        members = state.consumers.get(group)
        if members is None:
            continue
        mode = "push" if members.consume_type == "CONSUME_PASSIVELY" else "pull"
        for channel in members.channels.values():
            member = (group, channel.language, str(channel.version), mode, False)
            view.consumer_connections[member] = view.consumer_connections.get(member, 0) + 1


class _TopicTracker:
    """What the scrapes of one store keep between them: every queue's max offset, every topic's
    activity and the choice of the topics that keep their label (``metrics.cardinality.TopicActivity``),
    brought up to date at each scrape from the queues that moved since the last one
    (``MessageStore.take_moved_queues``) and, when the topic table's version moved, its topics.
    """

    def __init__(self) -> None:
        self.activity = TopicActivity(0)
        self._table_version: object = None
        self._table_topics: set[str] = set()
        self._store_topics: set[str] = set()
        self._caught_up = False  # the last refresh ran to its end (a scrape cut short may not)

    def refresh_steps(self, state: BrokerState) -> Steps[None]:
        """Catch up with the store and the topic table: a pass over every queue only the first
        time, after the store changed shape and after a refresh that did not finish (a scrape
        that timed out: the moves it took are lost); else over the queues that moved."""
        store = state.store
        activity = self.activity
        activity.set_limit(state.config.metrics_max_topic_labels)
        caught_up, self._caught_up = self._caught_up, False
        moved = yield from off_loop(store.take_moved_queues)
        if moved is None or not caught_up:
            moved = yield from off_loop(lambda: _max_queue_offsets(store))
            activity.clear()
            self._table_version, self._table_topics, self._store_topics = None, set(), set()
        store_topics = self._store_topics
        for index, ((topic, queue_id), offset) in enumerate(moved.items()):
            activity.move(topic, queue_id, offset)
            store_topics.add(topic)
            if not index % ROWS_PER_STEP:
                yield None
        version = state.topics.data_version
        if version == self._table_version:
            self._caught_up = True
            return
        table_topics = set(state.topics.names())
        yield None
        for index, topic in enumerate(table_topics - self._table_topics):
            activity.add_topic(topic)
            if not index % ROWS_PER_STEP:
                yield None
        for topic in self._table_topics - table_topics:
            if topic not in store_topics:
                activity.remove_topic(topic)
        self._table_topics, self._table_version = table_topics, version
        self._caught_up = True


_trackers: weakref.WeakKeyDictionary[MessageStore, _TopicTracker] = weakref.WeakKeyDictionary()


def _tracker(store: MessageStore) -> _TopicTracker:
    """The one tracker of ``store`` (``take_moved_queues`` has one reader)."""
    tracker = _trackers.get(store)
    if tracker is None:
        tracker = _trackers[store] = _TopicTracker()
    return tracker


def scrape_steps(
    state: BrokerState, recorder: Recorder, boot_timestamp_ms: int, broker_addr: str
) -> Steps[list[Metric]]:
    """Every family of this broker, topics and groups capped, in steps of at most
    ``metrics.steps.ROWS_PER_STEP`` rows (on the event loop).

    The cost follows what the scrape exports and what moved since the last one: the topics
    past ``metricsMaxTopicLabels`` are summed from running totals, not walked.
    """
    config = state.config
    view = _base_view(state, boot_timestamp_ms, broker_addr)
    _connections(state, view)
    yield from off_loop(lambda: _storage(state, view))
    tracker = _tracker(state.store)
    yield from tracker.refresh_steps(state)
    activity = tracker.activity
    topics = yield from activity.kept_steps()
    view.topic_max_offsets = activity.folded_offsets(topics)
    view.topic_number = len(activity.counts)
    view.lags = yield from _lag_rows(state, activity.queue_offsets)
    view.group_number = len(state.groups.names())
    if topics is None:
        snapshot = yield from recorder.snapshot_steps(recorder.capture(now_ms()))
    else:
        snapshot = recorder.snapshot_kept(now_ms(), topics)
    snapshot, view = yield from cap_labels_steps(
        snapshot, view, config.metrics_max_topic_labels, config.metrics_max_group_labels, topics
    )
    yield None
    metrics: list[Metric] = []
    for family in broker_families(snapshot, view, _CODE_NAMES):
        metrics.append(family)
        yield None
    return metrics


def families(
    state: BrokerState, recorder: Recorder, boot_timestamp_ms: int, broker_addr: str
) -> list[Metric]:
    """Every family of this broker, as of now, in one step (on the event loop)."""
    return run_steps(scrape_steps(state, recorder, boot_timestamp_ms, broker_addr))
