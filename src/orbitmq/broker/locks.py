"""Queue locks for orderly consumers (RocketMQ's RebalanceLockManager).

An orderly consumer locks a queue on the broker before it pulls from it, so that two members
of a group never consume one queue at the same time during a rebalance. Rules:

- a queue is lockable by a client when it is unlocked, already held by that client, or its
  holder has not renewed the lock for ``lock_expiry_ms`` (60 s by default);
- locking renews the lock (orderly clients re-lock every 20 s);
- unlocking releases only the queues the client holds.

The table holds at most ``entries_max`` locks (``maxQueueLocks``): when it is full, expired
locks are dropped first, and a queue that still finds no room is simply not locked (it is left
out of the answer, as a queue another client holds would be).

Pure state: time is passed in, nothing here sleeps or does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from orbitmq.model.message import MessageQueue

DEFAULT_LOCK_EXPIRY_MS = 60_000


@dataclass(slots=True)
class _LockEntry:
    client_id: str
    renewed_ms: int


class QueueLockTable:
    """Which client holds which queue, per consumer group."""

    def __init__(self, lock_expiry_ms: int = DEFAULT_LOCK_EXPIRY_MS, entries_max: int = 0) -> None:
        self._lock_expiry_ms = lock_expiry_ms
        self._groups: dict[str, dict[MessageQueue, _LockEntry]] = {}
        self.entries_max = entries_max
        self._entries = 0

    def try_lock(
        self, group: str, client_id: str, queues: Iterable[MessageQueue], now_ms: int
    ) -> set[MessageQueue]:
        """Lock (or renew) every lockable queue and return the ones ``client_id`` now holds."""
        table = self._groups.setdefault(group, {})
        locked: set[MessageQueue] = set()
        for queue in queues:
            entry = table.get(queue)
            if entry is None:
                if self.entries_max and self._entries >= self.entries_max:
                    self._drop_expired(now_ms)
                    # Dropping may have removed this group's (emptied) table.
                    table = self._groups.setdefault(group, table)
                    if self._entries >= self.entries_max:
                        continue
                self._entries += 1
            elif entry.client_id != client_id and not self._expired(entry, now_ms):
                continue
            table[queue] = _LockEntry(client_id, now_ms)
            locked.add(queue)
        if not table:
            del self._groups[group]
        return locked

    def _drop_expired(self, now_ms: int) -> None:
        for group, table in list(self._groups.items()):
            for queue in [queue for queue, entry in table.items() if self._expired(entry, now_ms)]:
                del table[queue]
                self._entries -= 1
            if not table:
                del self._groups[group]

    def unlock(self, group: str, client_id: str, queues: Iterable[MessageQueue]) -> None:
        """Release the queues among ``queues`` that ``client_id`` holds; others are left alone."""
        table = self._groups.get(group)
        if table is None:
            return
        for queue in queues:
            entry = table.get(queue)
            if entry is not None and entry.client_id == client_id:
                del table[queue]
                self._entries -= 1
        if not table:
            del self._groups[group]

    def holder(self, group: str, queue: MessageQueue, now_ms: int) -> str | None:
        """The client holding an unexpired lock on ``queue``, or None."""
        entry = self._groups.get(group, {}).get(queue)
        if entry is None or self._expired(entry, now_ms):
            return None
        return entry.client_id

    def _expired(self, entry: _LockEntry, now_ms: int) -> bool:
        return now_ms - entry.renewed_ms > self._lock_expiry_ms
