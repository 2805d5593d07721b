"""What a ``/metrics`` scrape reads from the broker: lag, storage, connections, topic offsets.

Runs on the broker's event loop (``metrics.exporter.LoopCollector`` puts it there), so the
tables it reads are not being changed under it. The cost is per scrape, never per message:
one max-offset lookup per queue, and one store-time read per queue that has lag (the age of
the oldest message not yet consumed, ``rocketmq_consumer_lag_latency``).

Lag follows rocketmq-exporter's ``rocketmq_group_diff``: for each (group, topic) with committed
offsets on this broker, the sum over queues of ``max(0, max offset - committed offset)``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

from prometheus_client.core import Metric

from orbitmq import __version__
from orbitmq.broker.handlers import BrokerState, now_ms
from orbitmq.broker.validation import RETRY_GROUP_TOPIC_PREFIX, is_system_topic
from orbitmq.metrics import BrokerView, LagRow, Recorder, broker_families, request_code_names

_CODE_NAMES = request_code_names()


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
    for topic, queue_id in store.queues():
        max_offsets[(topic, queue_id)] = store.get_max_queue_offset(topic, queue_id)
    for topic in state.topics.names():
        view.topic_max_offsets.setdefault(topic, 0)
    for (topic, _), offset in max_offsets.items():
        view.topic_max_offsets[topic] = view.topic_max_offsets.get(topic, 0) + offset
    view.lags = list(_lag_rows(state, max_offsets))
    view.group_number = len(state.groups.names())
    _storage(state, view)
    _connections(state, view)
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


def families(
    state: BrokerState, recorder: Recorder, boot_timestamp_ms: int, broker_addr: str
) -> list[Metric]:
    """Every family of this broker, as of now (called on the event loop)."""
    snapshot = recorder.snapshot(now_ms())
    view = build_view(state, boot_timestamp_ms, broker_addr)
    return list(broker_families(snapshot, view, _CODE_NAMES))
