"""Consumer-group progress for the admin client: lag per queue, and whether a group exists at all.

OrbitMQ brokers do not serve GET_CONSUME_STATS, so progress is put together from per-queue
requests: QUERY_CONSUMER_OFFSET with ``setZeroIfNotFound=false`` (so "never committed" is told
from "committed 0"), GET_MIN_OFFSET and GET_MAX_OFFSET. A group exists when some broker holds
an offset it committed, its subscription group config or an online member of it; a mistyped
group has none of these, and is an error rather than an empty, healthy-looking answer.

:func:`require_group` makes that check alone, before an offset reset: a broker resets the
offsets of any group it is asked to (RocketMQ's does; the offsets wait for the group to come),
so a mistyped name is caught here, before offsets are written for it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from orbitmq.errors import SubscriptionGroupNotExistError, TopicNotExistError
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.codes import ResponseCode

__all__ = ["QueueProgress", "consumer_progress", "require_group"]


class _Admin(Protocol):
    async def fetch_queues(self, topic: str) -> list[MessageQueue]: ...

    async def list_topics(self) -> list[str]: ...

    async def user_topics(self) -> list[str]: ...

    async def broker_knows_group(self, group: str) -> bool: ...

    async def min_offset(self, mq: MessageQueue) -> int: ...

    async def max_offset(self, mq: MessageQueue) -> int: ...

    async def committed_offset(
        self, group: str, mq: MessageQueue, *, zero_if_not_found: bool = True
    ) -> int | None: ...


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """How far a group is in one queue.

    ``committed_offset`` is -1 when the group never committed on the queue; its ``lag`` then
    counts every message still stored, from ``min_offset`` to ``broker_offset`` (the max
    offset). Otherwise ``lag`` is ``broker_offset - committed_offset`` (never below 0).
    """

    committed_offset: int
    broker_offset: int
    lag: int
    min_offset: int = 0


async def consumer_progress(
    admin: _Admin, group: str, topic: str | None
) -> dict[MessageQueue, QueueProgress]:
    """What :meth:`AdminClient.consumer_progress <orbitmq.client.admin.AdminClient.consumer_progress>` answers."""
    if topic is not None:
        topics = [topic]
        queues_by_topic = {topic: await admin.fetch_queues(topic)}
    else:
        topics = await admin.user_topics()
        retry_topic = f"%RETRY%{group}"
        if retry_topic in await admin.list_topics():
            topics.append(retry_topic)
        queues_by_topic = await _queues_by_topic(admin, topics)
    progress: dict[MessageQueue, QueueProgress] = {}
    for queues in queues_by_topic.values():
        rows = await asyncio.gather(*(_queue_progress(admin, group, mq) for mq in queues))
        if topic is None and all(row.committed_offset < 0 for row in rows):
            continue
        progress.update(zip(queues, rows, strict=True))
    # Nothing committed where we looked: a real group has online members or offsets
    # elsewhere; a mistyped one has neither.
    if not any(row.committed_offset >= 0 for row in progress.values()) and not await _group_exists(
        admin, group, set(topics)
    ):
        raise SubscriptionGroupNotExistError(
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            f"consumer group {group} does not exist: no broker has its config, an online member "
            "of it or an offset it committed",
        )
    return progress


async def require_group(admin: _Admin, group: str, topic: str) -> None:
    """Return when ``group`` exists: an offset it committed (on ``topic`` or elsewhere), its
    config or an online member on some broker.

    Raises:
        TopicNotExistError: the name server does not know ``topic`` (checked first).
        SubscriptionGroupNotExistError: no broker knows ``group``.
    """
    queues = await admin.fetch_queues(topic)
    committed = await asyncio.gather(
        *(admin.committed_offset(group, mq, zero_if_not_found=False) for mq in queues)
    )
    if any(offset is not None for offset in committed) or await _group_exists(admin, group, {topic}):
        return
    raise SubscriptionGroupNotExistError(
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        f"consumer group {group} does not exist: no broker has its config, an online member "
        "of it or an offset it committed",
    )


async def _queues_by_topic(admin: _Admin, topics: list[str]) -> dict[str, list[MessageQueue]]:
    found: dict[str, list[MessageQueue]] = {}
    for name in topics:
        try:
            found[name] = await admin.fetch_queues(name)
        except TopicNotExistError:
            continue  # deleted since the topic list was read
    return found


async def _group_exists(admin: _Admin, group: str, checked_topics: set[str]) -> bool:
    """A broker that knows ``group`` (its config, an online member), or an offset it committed
    outside ``checked_topics``?"""
    if await admin.broker_knows_group(group):
        return True
    others = [name for name in await admin.list_topics() if name not in checked_topics]
    for queues in (await _queues_by_topic(admin, others)).values():
        committed = await asyncio.gather(
            *(admin.committed_offset(group, mq, zero_if_not_found=False) for mq in queues)
        )
        if any(offset is not None for offset in committed):
            return True
    return False


async def _queue_progress(admin: _Admin, group: str, mq: MessageQueue) -> QueueProgress:
    committed, min_offset, broker_offset = await asyncio.gather(
        admin.committed_offset(group, mq, zero_if_not_found=False),
        admin.min_offset(mq),
        admin.max_offset(mq),
    )
    # Never committed: everything still stored is still to be consumed.
    start = min_offset if committed is None else committed
    return QueueProgress(
        -1 if committed is None else committed, broker_offset, max(broker_offset - start, 0), min_offset
    )
