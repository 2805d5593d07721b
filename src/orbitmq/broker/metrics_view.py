"""What a ``/metrics`` scrape reads from the broker: lag, storage, connections, topic offsets.

A scrape runs in two steps (``metrics.exporter.LoopCollector``). :func:`capture` runs on the
broker's event loop and only copies what the loop writes without a lock (the recorder's
tables, the client connections): a few list copies, whatever the number of topics.
:func:`render` runs on the scrape thread: it reads the store, the offset table and the stats
(each behind its own lock), folds topics and groups past ``metricsMaxTopicLabels`` and
``metricsMaxGroupLabels`` into ``__other__`` and builds the families. The cost is per scrape,
never per message: one max-offset lookup per queue, and one store-time read per queue that has
lag (the age of the oldest message not yet consumed, ``rocketmq_consumer_lag_latency``).

Lag follows rocketmq-exporter's ``rocketmq_group_diff``: for each (group, topic) with committed
offsets on this broker, the sum over queues of ``max(0, max offset - committed offset)``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import Metric

from orbitmq import __version__
from orbitmq.broker.handlers import BrokerState, now_ms
from orbitmq.broker.validation import RETRY_GROUP_TOPIC_PREFIX, is_system_topic
from orbitmq.metrics import BrokerView, LagRow, Recorder, broker_families, request_code_names
from orbitmq.metrics.cardinality import OTHER, cap_labels, most_active_topics
from orbitmq.metrics.recorder import RecorderCapture

_CODE_NAMES = request_code_names()
_YIELD_EVERY_QUEUES = 512


def build_view(state: BrokerState, boot_timestamp_ms: int, broker_addr: str) -> BrokerView:
    """Read the broker's tables and store into a :class:`BrokerView`."""
    config = state.config
    store = state.store
    view = BrokerView(
        cluster=config.broker_cluster_name,
        broker_name=config.broker_name,
        broker_id=config.broker_id,
        broker_addr=broker_addr,
        version=f"OrbitMQ {__version__}",
        boot_timestamp_ms=boot_timestamp_ms,
        permission=config.broker_permission,
    )
    max_offsets: dict[tuple[str, int], int] = {}
    queues = list(store.queues())
    for start in range(0, len(queues), _YIELD_EVERY_QUEUES):
        # Off the loop, a chunk of queues per hold of the store's lock (one hold per queue
        # raced the loop's own store calls for it), then the GIL and the lock go to the loop,
        # so a request never queues behind a whole pass over tens of thousands of queues.
        chunk = queues[start : start + _YIELD_EVERY_QUEUES]
        max_offsets.update(zip(chunk, store.get_max_queue_offsets(chunk), strict=True))
        time.sleep(0)
    for topic in state.topics.names():
        view.topic_max_offsets.setdefault(topic, 0)
    for (topic, _), offset in max_offsets.items():
        view.topic_max_offsets[topic] = view.topic_max_offsets.get(topic, 0) + offset
    view.topic_number = len(view.topic_max_offsets)
    view.lags = list(_lag_rows(state, max_offsets))
    view.group_number = len(state.groups.names())
    _storage(state, view)
    return view


def _lag_rows(state: BrokerState, max_offsets: dict[tuple[str, int], int]) -> Iterator[LagRow]:
    current_ms = now_ms()
    per_group: dict[tuple[str, str], dict[int, int]] = {}
    for group, topic, queue_id, offset in state.offsets:
        per_group.setdefault((group, topic), {})[queue_id] = offset
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
        yield LagRow(
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


@dataclass(frozen=True, slots=True)
class ScrapeCapture:
    """The event loop's part of a scrape (see the module docstring)."""

    recorder: RecorderCapture
    connections: BrokerView
    """Only the connection counts are filled."""


def capture(state: BrokerState, recorder: Recorder) -> ScrapeCapture:
    """Copy what the event loop writes without a lock (call on the loop; cheap at any scale)."""
    connections = BrokerView("", "", 0, "", "", 0, 0)
    _connections(state, connections)
    return ScrapeCapture(recorder.capture(now_ms()), connections)


def render(
    state: BrokerState, recorder: Recorder, captured: ScrapeCapture, boot_timestamp_ms: int, broker_addr: str
) -> list[Metric]:
    """Every family of this broker as of ``captured``, labels capped (call on the scrape thread)."""
    config = state.config
    view = build_view(state, boot_timestamp_ms, broker_addr)
    view.producer_connections = captured.connections.producer_connections
    view.consumer_connections = captured.connections.consumer_connections
    # The topics are chosen first, so the recorder folds the others as it copies its tables.
    topics = most_active_topics(view, config.metrics_max_topic_labels)
    snapshot = recorder.snapshot_from(
        captured.recorder, None if topics is None else (lambda topic: topic if topic in topics else OTHER)
    )
    snapshot, view = cap_labels(
        snapshot, view, config.metrics_max_topic_labels, config.metrics_max_group_labels, topics
    )
    return list(broker_families(snapshot, view, _CODE_NAMES))


def families(
    state: BrokerState, recorder: Recorder, boot_timestamp_ms: int, broker_addr: str
) -> list[Metric]:
    """Every family of this broker, as of now, in one step (on the event loop)."""
    return render(state, recorder, capture(state, recorder), boot_timestamp_ms, broker_addr)
