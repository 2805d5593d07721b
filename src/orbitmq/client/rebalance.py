"""Queue allocation strategies for clustering consumers (RocketMQ's AllocateMessageQueueStrategy).

Every member of a consumer group runs the same strategy over the same inputs (the topic's
queues and the group's client ids, both sorted here) and keeps only its own share, so the
members agree on who consumes what without talking to each other. A strategy is therefore a
pure function of ``(group, current client id, queues, client ids)``; none of them does I/O or
keeps state between calls, and all of them return a sorted list.

Strategies:

=================  ===========================================================================
``average``        contiguous blocks: the first ``len(queues) % len(cids)`` members get one
                   queue more than the others (RocketMQ ``AllocateMessageQueueAveragely``)
``circle``         round-robin: member i gets queues i, i + n, i + 2n ...
                   (``AllocateMessageQueueAveragelyByCircle``)
``consistent_hash``each queue goes to the member owning the next point on a hash ring with
                   ``virtual_nodes`` points per member, so a join or leave moves few queues
``config``         a fixed list of queues for this member, whatever the others do
=================  ===========================================================================
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from orbitmq.errors import ConfigError
from orbitmq.model.message import MessageQueue

AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]
"""``strategy(group, current_client_id, queues, client_ids) -> queues of current_client_id``."""


def _prepared(
    current_client_id: str, queues: Sequence[MessageQueue], client_ids: Sequence[str]
) -> tuple[list[MessageQueue], list[str]] | None:
    """Sorted inputs, or None when this client is not (yet) a member or there is nothing to share."""
    if not queues or current_client_id not in client_ids:
        return None
    return sorted(set(queues)), sorted(set(client_ids))


def allocate_average(
    group: str, current_client_id: str, queues: Sequence[MessageQueue], client_ids: Sequence[str]
) -> list[MessageQueue]:
    """Contiguous blocks of queues; the first ``len(queues) % len(client_ids)`` members get one more."""
    prepared = _prepared(current_client_id, queues, client_ids)
    if prepared is None:
        return []
    all_queues, all_cids = prepared
    index = all_cids.index(current_client_id)
    base, extra = divmod(len(all_queues), len(all_cids))
    start = index * base + min(index, extra)
    count = base + (1 if index < extra else 0)
    return all_queues[start : start + count]


def allocate_average_by_circle(
    group: str, current_client_id: str, queues: Sequence[MessageQueue], client_ids: Sequence[str]
) -> list[MessageQueue]:
    """Round-robin: member i of n gets queues i, i + n, i + 2n, ..."""
    prepared = _prepared(current_client_id, queues, client_ids)
    if prepared is None:
        return []
    all_queues, all_cids = prepared
    index = all_cids.index(current_client_id)
    return all_queues[index :: len(all_cids)]


def _ring_hash(key: str) -> int:
    # MD5 is stable across processes and languages (Python's hash() is salted per process).
    return int.from_bytes(hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()[:8], "big")


def _queue_key(queue: MessageQueue) -> str:
    return f"{queue.topic}@{queue.broker_name}@{queue.queue_id}"


@dataclass(frozen=True, slots=True)
class ConsistentHashStrategy:
    """Consistent hashing with ``virtual_nodes`` ring points per member."""

    virtual_nodes: int = 10

    def __call__(
        self, group: str, current_client_id: str, queues: Sequence[MessageQueue], client_ids: Sequence[str]
    ) -> list[MessageQueue]:
        prepared = _prepared(current_client_id, queues, client_ids)
        if prepared is None:
            return []
        all_queues, all_cids = prepared
        ring = sorted(
            (_ring_hash(f"{cid}-{node}"), cid)
            for cid in all_cids
            for node in range(max(self.virtual_nodes, 1))
        )
        points = [point for point, _ in ring]
        mine = []
        for queue in all_queues:
            slot = bisect.bisect_left(points, _ring_hash(_queue_key(queue))) % len(ring)
            if ring[slot][1] == current_client_id:
                mine.append(queue)
        return mine


allocate_consistent_hash: AllocateStrategy = ConsistentHashStrategy()


@dataclass(frozen=True, slots=True)
class ByConfigStrategy:
    """A fixed set of queues for this member (RocketMQ ``AllocateMessageQueueByConfig``).

    Only the configured queues that currently exist in the topic's route are returned.
    """

    configured: frozenset[MessageQueue]

    @classmethod
    def of(cls, queues: Iterable[MessageQueue]) -> ByConfigStrategy:
        return cls(frozenset(queues))

    def __call__(
        self, group: str, current_client_id: str, queues: Sequence[MessageQueue], client_ids: Sequence[str]
    ) -> list[MessageQueue]:
        return sorted(set(queues) & self.configured)


_BY_NAME: dict[str, AllocateStrategy] = {
    "average": allocate_average,
    "circle": allocate_average_by_circle,
    "consistent_hash": allocate_consistent_hash,
}


def strategy_by_name(name: str) -> AllocateStrategy:
    """The strategy called ``name`` (``average``, ``circle`` or ``consistent_hash``).

    Raises:
        ConfigError: the name is unknown; the message lists the known names.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ConfigError(
            f"unknown allocate strategy {name!r}; known: {', '.join(sorted(_BY_NAME))} "
            "(or pass a ByConfigStrategy / any callable)"
        ) from None
