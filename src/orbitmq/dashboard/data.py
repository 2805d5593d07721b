"""What the dashboard's pages show, read through OrbitMQ's admin client in batches.

The seam between the web app and the cluster: pages call these methods and render what they
return; nothing here knows HTML. Every list is built from one request per broker
(``AdminClient`` whole-broker reads: topic configs, subscription groups, consumer offsets,
runtime info), never one request per row, so the topic page over 1,000 topics and the group
page over 500 groups cost a handful of requests. Per-queue offsets (GET_MAX_OFFSET) are read
only for the rows a page shows, all at once, at most :data:`CONCURRENCY` in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from orbitmq.client.admin import TOOLS_CONSUMER_GROUP, AdminClient, QueueStatus
from orbitmq.errors import OrbitError
from orbitmq.model.message import MessageQueue
from orbitmq.model.route import PERM_READ, PERM_WRITE

__all__ = ["BrokerRow", "ClusterData", "GroupRow", "TopicRow", "topic_kind"]

CONCURRENCY = 64
"""Requests one page keeps in flight at most."""

TOPIC_KINDS = ("normal", "retry", "dlq", "system")
_SYSTEM_TOPICS = frozenset(
    (
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "TRANS_CHECK_MAX_TIME_TOPIC",
    )
)
_SYSTEM_GROUPS = frozenset((TOOLS_CONSUMER_GROUP, "CID_RMQ_SYS_TRANS", "SELF_TEST_C_GROUP"))

_T = TypeVar("_T")


def topic_kind(topic: str) -> str:
    """normal, retry (%RETRY%), dlq (%DLQ%) or system (RocketMQ's reserved names)."""
    if topic.startswith("%RETRY%"):
        return "retry"
    if topic.startswith("%DLQ%"):
        return "dlq"
    if topic in _SYSTEM_TOPICS or topic.lower().startswith("rmq_sys_"):
        return "system"
    return "normal"


def is_system_group(group: str) -> bool:
    """RocketMQ's own groups: the tools', transactions', self test's and ``CID_RMQ_SYS_*``."""
    return group in _SYSTEM_GROUPS or group.startswith(("CID_RMQ_SYS_", "CID_SYS_RMQ_"))


def perm_text(perm: int) -> str:
    return ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-")


async def bounded(calls: Iterable[Awaitable[_T]], limit: int = CONCURRENCY) -> list[_T]:
    """Await every call with at most ``limit`` in flight; results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Awaitable[_T]) -> _T:
        async with gate:
            return await call

    return await asyncio.gather(*(one(call) for call in calls))


@dataclass(slots=True)
class BrokerRow:
    cluster: str
    name: str
    broker_id: int
    address: str
    role: str
    version: str = "-"
    produce_tps: float = 0.0
    consume_tps: float = 0.0
    put_total: str = "-"
    get_total: str = "-"
    disk: str = "-"
    disk_ratio: float = 0.0
    replication: str = ""
    error: str = ""


@dataclass(slots=True)
class TopicRow:
    name: str
    kind: str
    read_queues: int
    write_queues: int
    perm: str
    order: bool
    brokers: list[str] = field(default_factory=list)


@dataclass(slots=True)
class GroupRow:
    name: str
    orderly: bool
    retry_max_times: int
    consume_enable: bool
    brokers: list[str] = field(default_factory=list)
    members: int = 0
    topics: list[str] = field(default_factory=list)
    lag: int | None = None


@dataclass(slots=True)
class ClientRow:
    client_id: str
    address: str
    language: str
    version: str
    queues: list[str] = field(default_factory=list)


@dataclass(slots=True)
class QueueLag:
    queue: MessageQueue
    broker_offset: int
    committed_offset: int
    lag: int


def _first(tps: str) -> float:
    try:
        return float(tps.split()[0])
    except (IndexError, ValueError):
        return 0.0


class ClusterData:
    """Reads for the dashboard's pages (see the module docstring)."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin

    # -- cluster --------------------------------------------------------------------------------

    async def brokers(self) -> list[BrokerRow]:
        """Every broker with its role, version, TPS and disk (one runtime-info request each)."""
        members = await self.admin.cluster_members()
        infos = await bounded(self._runtime(member.address) for member in members)
        rows = []
        for member, info in zip(members, infos, strict=True):
            row = BrokerRow(
                member.cluster,
                member.broker_name,
                member.broker_id,
                member.address,
                member.role or ("MASTER" if member.broker_id == 0 else "SLAVE"),
            )
            if member.broker_id != 0 and member.lag_bytes is not None:
                row.replication = (
                    f"{'in sync' if member.in_sync else 'behind'}, {member.lag_bytes} bytes behind"
                )
            if isinstance(info, str):
                row.error = info
            else:
                row.version = info.get("brokerVersionDesc", "-")
                row.produce_tps = _first(info.get("putTps", ""))
                row.consume_tps = _first(info.get("getTransferedTps", ""))
                row.put_total = info.get("msgPutTotalTodayNow", "-")
                row.get_total = info.get("msgGetTotalTodayNow", "-")
                row.disk = info.get("commitLogDirCapacity", "-")
                row.disk_ratio = _first(info.get("commitLogDiskRatio", "0"))
            rows.append(row)
        return rows

    async def _runtime(self, addr: str) -> dict[str, str] | str:
        try:
            return await self.admin.broker_runtime_info(addr)
        except OrbitError as exc:
            return f"unreachable: {exc}"

    # -- topics ---------------------------------------------------------------------------------

    async def topics(self) -> list[TopicRow]:
        """Every topic: the name server's list joined with each master's topic table."""
        names, masters = await asyncio.gather(self.admin.list_topics(), self.admin.master_addresses())
        tables = await bounded(self.admin.all_topic_configs(addr) for addr in masters.values())
        rows: dict[str, TopicRow] = {}
        for broker_name, table in zip(masters, tables, strict=True):
            for name, config in table.items():
                row = rows.get(name)
                if row is None:
                    row = rows[name] = TopicRow(
                        name, topic_kind(name), config.read_queue_nums, config.write_queue_nums,
                        perm_text(config.perm), config.order,
                    )  # fmt: skip
                row.brokers.append(broker_name)
        for name in names:
            rows.setdefault(name, TopicRow(name, topic_kind(name), 0, 0, "--", False))
        return sorted(rows.values(), key=lambda row: row.name)

    async def topic_status(self, topic: str) -> dict[MessageQueue, QueueStatus]:
        return await self.admin.topic_status(topic)

    async def consumers_of(self, topic: str) -> dict[str, list[QueueLag]]:
        """Groups with committed offsets on ``topic`` -> per-queue lag (one offsets request per master)."""
        offsets = await self._all_offsets()
        queues = await self.admin.fetch_queues(topic)
        max_offsets = dict(
            zip(queues, await bounded(self.admin.max_offset(mq) for mq in queues), strict=True)
        )
        groups: dict[str, list[QueueLag]] = {}
        for (broker_name, offset_topic, group), committed in offsets.items():
            if offset_topic != topic or group in _SYSTEM_GROUPS:
                continue
            for queue_id, offset in committed.items():
                mq = MessageQueue(topic, broker_name, queue_id)
                broker_offset = max_offsets.get(mq, 0)
                groups.setdefault(group, []).append(
                    QueueLag(mq, broker_offset, offset, max(0, broker_offset - offset))
                )
        return dict(sorted(groups.items()))

    async def _all_offsets(self) -> dict[tuple[str, str, str], dict[int, int]]:
        """(broker name, topic, group) -> committed offsets, from every master at once."""
        masters = await self.admin.master_addresses()
        tables = await bounded(self.admin.all_consumer_offsets(addr) for addr in masters.values())
        return {
            (broker_name, topic, group): queues
            for broker_name, table in zip(masters, tables, strict=True)
            for (topic, group), queues in table.items()
        }

    # -- groups ---------------------------------------------------------------------------------

    async def groups(self, include_system: bool = False) -> list[GroupRow]:
        """Every consumer group of every master: its subscription-group config, or committed offsets.

        RocketMQ's own groups (tools, transactions, self test, ``CID_RMQ_SYS_*``) only with
        ``include_system``.

        One subscription-group request and one consumer-offset request per master; a group
        that only committed offsets (no config was created for it) is listed too.
        """
        masters = await self.admin.master_addresses()
        tables, offsets = await asyncio.gather(
            bounded(self.admin.all_subscription_groups(addr) for addr in masters.values()),
            self._all_offsets(),
        )
        rows: dict[str, GroupRow] = {}
        configured: set[str] = set()
        hidden = (lambda name: False) if include_system else is_system_group
        for broker_name, _, group in offsets:
            if not hidden(group) and group not in rows:
                rows[group] = GroupRow(group, False, 16, True, [broker_name])
        for broker_name, table in zip(masters, tables, strict=True):
            for name, config in table.items():
                if hidden(name):
                    continue
                row = rows.get(name)
                if row is None or name not in configured:
                    brokers = row.brokers if row is not None else []
                    row = rows[name] = GroupRow(
                        name,
                        bool(config.get("consumeMessageOrderly", False)),
                        int(config.get("retryMaxTimes", 16)),
                        bool(config.get("consumeEnable", True)),
                        brokers,
                    )
                    configured.add(name)
                if broker_name not in row.brokers:
                    row.brokers.append(broker_name)
        return sorted(rows.values(), key=lambda row: row.name)

    async def fill_group_rows(self, rows: list[GroupRow]) -> None:
        """Members, topics and lag of the rows a page shows (batched over all of them)."""
        if not rows:
            return
        offsets = await self._all_offsets()
        wanted = {row.name for row in rows}
        per_group: dict[str, dict[MessageQueue, int]] = {}
        for (broker_name, topic, group), committed in offsets.items():
            if group in wanted and not topic.startswith("%RETRY%"):
                for queue_id, offset in committed.items():
                    per_group.setdefault(group, {})[MessageQueue(topic, broker_name, queue_id)] = offset
        queues = sorted({mq for committed in per_group.values() for mq in committed})
        broker_offsets = dict(zip(queues, await bounded(self._max_offset(mq) for mq in queues), strict=True))
        masters = await self.admin.master_addresses()
        members = await bounded(
            self.admin.group_members(masters[broker], row.name) for row in rows for broker in row.brokers[:1]
        )
        member_iter = iter(members)
        for row in rows:
            row.members = len(next(member_iter)) if row.brokers else 0
            positions = per_group.get(row.name, {})
            row.topics = sorted({mq.topic for mq in positions})
            row.lag = (
                sum(max(0, broker_offsets[mq] - offset) for mq, offset in positions.items())
                if positions
                else None
            )

    async def _max_offset(self, mq: MessageQueue) -> int:
        try:
            return await self.admin.max_offset(mq)
        except OrbitError:
            return 0

    async def group_detail(self, group: str) -> tuple[dict[str, list[QueueLag]], dict[str, list[str]]]:
        """Per topic, each queue's offsets and lag; per broker, the online members' client ids."""
        offsets = await self._all_offsets()
        lags: dict[str, list[QueueLag]] = {}
        queues = [
            (MessageQueue(topic, broker_name, queue_id), offset)
            for (broker_name, topic, offset_group), committed in sorted(offsets.items())
            if offset_group == group
            for queue_id, offset in sorted(committed.items())
        ]
        broker_offsets = await bounded(self._max_offset(mq) for mq, _ in queues)
        for (mq, offset), broker_offset in zip(queues, broker_offsets, strict=True):
            lags.setdefault(mq.topic, []).append(
                QueueLag(mq, broker_offset, offset, max(0, broker_offset - offset))
            )
        masters = await self.admin.master_addresses()
        members = await bounded(self.admin.group_members(addr, group) for addr in masters.values())
        return lags, dict(zip(masters, members, strict=True))

    async def clients(self, group: str) -> list[ClientRow]:
        """The group's online members: address, language, version and the queues each holds."""
        try:
            connection = await self.admin.consumer_connection(group)
        except OrbitError:
            return []

        async def one(client: Any) -> ClientRow:
            row = ClientRow(client.client_id, client.client_addr, client.language, str(client.version))
            try:
                info = await self.admin.consumer_running_info(group, client.client_id)
            except OrbitError as exc:
                row.queues = [f"unknown ({exc})"]
                return row
            row.queues = [f"{mq.topic} {mq.broker_name} q{mq.queue_id}" for mq in sorted(info.mq_table)]
            return row

        return await bounded(one(client) for client in sorted(connection.connection_set))

    async def total_lag(self) -> int:
        """Messages behind summed over every group and queue (for the lag chart)."""
        offsets = await self._all_offsets()
        queues = {
            MessageQueue(topic, broker_name, queue_id): offset
            for (broker_name, topic, group), committed in offsets.items()
            if group not in _SYSTEM_GROUPS and not topic.startswith("%RETRY%")
            for queue_id, offset in committed.items()
        }
        broker_offsets = await bounded(self._max_offset(mq) for mq in queues)
        return sum(
            max(0, top - offset) for (_, offset), top in zip(queues.items(), broker_offsets, strict=True)
        )

    async def reset_offsets(self, group: str, topic: str, timestamp_ms: int) -> dict[MessageQueue, int]:
        """Move ``group``'s offsets on ``topic`` to the first message at ``timestamp_ms``."""
        return await self.admin.reset_offset_by_time(group, topic, timestamp_ms)


def describe_error(exc: BaseException) -> str:
    """One line for an error box: the exception's class and message."""
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def summary(values: dict[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in values.items())
