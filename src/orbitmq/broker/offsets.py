"""Consumer offsets committed by clustering consumers: (group, topic, queue_id) -> queue_offset.

Pure state, no I/O: the broker's persistence service asks for :meth:`ConsumerOffsetTable.encode`
when the table is dirty and writes the bytes itself. The JSON layout is RocketMQ's
``consumerOffset.json`` so an operator's tooling recognises it::

    {"offsetTable": {"<topic>@<group>": {"<queue_id>": <queue_offset>, ...}, ...}}

RocketMQ joins topic and group with ``@``; neither name may contain it (the name charset is
``[%|a-zA-Z0-9_-]``), so the split on load is unambiguous.

The table holds only what its loader accepts: legal topic and group names, queue ids
0..2^31-1 and 64-bit offsets (:meth:`ConsumerOffsetTable.commit` ignores anything else). A
damaged entry found at load is skipped with a warning; the broker still starts.

Pending resets (RocketMQ 5's server-side offset reset): an admin reset records the new offset
both as the committed offset and as a one-shot reset of the queue. Until the group's next pull
of that queue takes it (:meth:`ConsumerOffsetTable.take_reset`), commits from the group's
consumers for that queue are acknowledged but ignored, so an online consumer cannot write its
old position over the reset. Pending resets live in memory only.

Local commits (a slave's, see ``broker.replication.metadata``): once
:meth:`ConsumerOffsetTable.track_local_commits` is called, the table remembers which offsets
consumers committed to this broker itself, as against those copied from its master, so that
the ones that moved ahead while the master was away can be merged back into the master
(:meth:`ConsumerOffsetTable.local_commits_ahead_of`, :meth:`ConsumerOffsetTable.merge_max`)
before the master's table is taken. They live in memory only.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator

import orjson

from orbitmq.errors import ConfigError, RemoteProtocolError
from orbitmq.protocol import fastjson
from orbitmq.protocol.names import group_name_problem, shorten, topic_name_problem

logger = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"
_QUEUE_ID_MAX = (1 << 31) - 1
_DECIMAL = re.compile(r"-?[0-9]{1,19}")
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


class ConsumerOffsetTable:
    """Committed queue offsets per consumer group, topic and queue.

    Thread-safe: handlers commit on the event loop while the persistence service may encode
    a snapshot; a lock keeps each operation atomic.
    """

    def __init__(self) -> None:
        self._table: dict[tuple[str, str], dict[int, int]] = {}
        self._resets: dict[tuple[str, str], dict[int, int]] = {}
        self._lock = threading.Lock()
        self._dirty = False
        # (topic, group, queue_id) -> offset committed here by a consumer; None: not tracked.
        self._local: dict[tuple[str, str, int], int] | None = None

    def commit(self, group: str, topic: str, queue_id: int, queue_offset: int) -> bool:
        """Record ``queue_offset`` as the next offset ``group`` will consume from this queue.

        Returns False, and records nothing, for what the loader would refuse (see the module
        docstring): the handlers check first; this keeps a missed check off the disk.
        """
        if entry_problem(group, topic, queue_id, queue_offset) is not None:
            return False
        with self._lock:
            queues = self._table.setdefault((topic, group), {})
            if queues.get(queue_id) != queue_offset:
                queues[queue_id] = queue_offset
                self._dirty = True
        return True

    def commit_unless_reset(self, group: str, topic: str, queue_id: int, queue_offset: int) -> bool:
        """A consumer's commit: ignored (False) while an admin reset of the queue is pending."""
        with self._lock:
            if queue_id in self._resets.get((topic, group), {}):
                return False
        if self.commit(group, topic, queue_id, queue_offset) and self._local is not None:
            with self._lock:
                self._local[(topic, group, queue_id)] = queue_offset
        return True

    def track_local_commits(self) -> None:
        """Remember consumers' commits to this broker from now on (a slave: see the module doc)."""
        with self._lock:
            if self._local is None:
                self._local = {}

    def local_commits_ahead_of(self, master: ConsumerOffsetTable) -> dict[tuple[str, str], dict[int, int]]:
        """The local commits ahead of ``master``'s offsets (or absent there), as (topic, group) tables.

        A local commit the master has reached or passed is forgotten: from then on the
        master's value is the one to keep, as RocketMQ's copy keeps it.
        """
        if self._local is None:
            return {}
        ahead: dict[tuple[str, str], dict[int, int]] = {}
        with self._lock:
            local = list(self._local.items())
        for (topic, group, queue_id), queue_offset in local:
            theirs = master.query(group, topic, queue_id)
            if theirs is None or queue_offset > theirs:
                ahead.setdefault((topic, group), {})[queue_id] = queue_offset
            else:
                self._forget_local(topic, group, queue_id, queue_offset)
        return ahead

    def forget_local_commits(self, merged: dict[tuple[str, str], dict[int, int]]) -> None:
        """The master took ``merged``: those commits are no longer this broker's alone."""
        for (topic, group), queues in merged.items():
            for queue_id, queue_offset in queues.items():
                self._forget_local(topic, group, queue_id, queue_offset)

    def _forget_local(self, topic: str, group: str, queue_id: int, queue_offset: int) -> None:
        with self._lock:
            # A commit made since the value was read stays to be merged next time.
            if self._local is not None and self._local.get((topic, group, queue_id)) == queue_offset:
                del self._local[(topic, group, queue_id)]

    def merge_max(self, other: ConsumerOffsetTable) -> int:
        """Take each offset of ``other`` that is ahead of this table's (or absent here).

        A master merging its slave's commits: the larger offset wins, and a queue with a
        pending admin reset keeps the reset. Returns how many offsets moved.
        """
        changed = 0
        for group, topic, queue_id, queue_offset in other:
            with self._lock:
                if queue_id in self._resets.get((topic, group), {}):
                    continue
                queues = self._table.setdefault((topic, group), {})
                current = queues.get(queue_id)
                if current is None or queue_offset > current:
                    queues[queue_id] = queue_offset
                    self._dirty = True
                    changed += 1
        return changed

    def assign_reset(self, group: str, topic: str, queue_id: int, queue_offset: int) -> None:
        """An admin reset: commit ``queue_offset`` and hold it for the group's next pull."""
        with self._lock:
            self._resets.setdefault((topic, group), {})[queue_id] = queue_offset
        self.commit(group, topic, queue_id, queue_offset)

    def take_reset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The pending reset of a queue, removed (the pull that asks applies it); None if none."""
        with self._lock:
            resets = self._resets.get((topic, group))
            if not resets or queue_id not in resets:
                return None
            queue_offset = resets.pop(queue_id)
            if not resets:
                del self._resets[(topic, group)]
            return queue_offset

    def pending_reset(self, group: str, topic: str, queue_id: int) -> int | None:
        with self._lock:
            return self._resets.get((topic, group), {}).get(queue_id)

    def topics_of_group(self, group: str) -> set[str]:
        """Every topic ``group`` has a committed offset on."""
        with self._lock:
            return {topic for (topic, table_group) in self._table if table_group == group}

    def clone(self, src_group: str, dest_group: str, topic: str | None = None) -> int:
        """Copy ``src_group``'s offsets (on ``topic``, or every topic) to ``dest_group``; the count."""
        with self._lock:
            sources = [(key, queues) for key, queues in self._table.items() if key[1] == src_group]
            copied = 0
            for (source_topic, _), queues in sources:
                if topic is not None and source_topic != topic:
                    continue
                self._table[(source_topic, dest_group)] = dict(queues)
                copied += len(queues)
            if copied:
                self._dirty = True
            return copied

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, or None when this group never committed for this queue."""
        with self._lock:
            queues = self._table.get((topic, group))
            return None if queues is None else queues.get(queue_id)

    def groups_of_topic(self, topic: str) -> set[str]:
        """Every group with a committed offset on ``topic``."""
        with self._lock:
            return {group for (table_topic, group) in self._table if table_topic == topic}

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        """A copy of the committed offsets of one group on one topic (queue_id -> offset)."""
        with self._lock:
            return dict(self._table.get((topic, group), {}))

    def remove_topic(self, topic: str) -> None:
        """Forget every group's offsets on a deleted topic."""
        with self._lock:
            for key in [key for key in self._table if key[0] == topic]:
                del self._table[key]
                self._dirty = True

    def remove_group(self, group: str) -> None:
        with self._lock:
            for key in [key for key in self._table if key[1] == group]:
                del self._table[key]
                self._dirty = True

    def __iter__(self) -> Iterator[tuple[str, str, int, int]]:
        """(group, topic, queue_id, queue_offset) for every committed offset (a snapshot)."""
        with self._lock:
            rows = [
                (group, topic, queue_id, queue_offset)
                for (topic, group), queues in self._table.items()
                for queue_id, queue_offset in queues.items()
            ]
        return iter(rows)

    @property
    def dirty(self) -> bool:
        """True when something changed since the last :meth:`encode`."""
        return self._dirty

    def encode(self) -> bytes:
        """The table as RocketMQ's consumerOffset.json and clear the dirty flag."""
        with self._lock:
            document = self._document()
            self._dirty = False
        return orjson.dumps(document, option=orjson.OPT_INDENT_2)

    def snapshot(self, extra: dict[tuple[str, str], dict[int, int]] | None = None) -> bytes:
        """The table as consumerOffset.json plus ``extra`` (topic, group) entries; dirty flag untouched."""
        with self._lock:
            document = self._document()
        for (topic, group), queues in (extra or {}).items():
            document["offsetTable"][f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"] = {
                str(queue_id): queue_offset for queue_id, queue_offset in queues.items()
            }
        return orjson.dumps(document)

    def _document(self) -> dict[str, dict[str, dict[str, int]]]:
        return {
            "offsetTable": {
                f"{topic}{TOPIC_GROUP_SEPARATOR}{group}": {
                    str(queue_id): queue_offset for queue_id, queue_offset in sorted(queues.items())
                }
                for (topic, group), queues in sorted(self._table.items())
            }
        }

    def merge(self, other: ConsumerOffsetTable) -> int:
        """Take every offset ``other`` holds, keeping this table's others (a slave's copy of its
        master's offsets, RocketMQ's ``putAll``); returns how many offsets changed."""
        changed = 0
        for group, topic, queue_id, queue_offset in other:
            with self._lock:
                queues = self._table.setdefault((topic, group), {})
                if queues.get(queue_id) != queue_offset:
                    queues[queue_id] = queue_offset
                    self._dirty = True
                    changed += 1
        return changed

    @classmethod
    def decode(
        cls, data: bytes, source: str = "consumerOffset.json", *, log_skipped: bool = True
    ) -> ConsumerOffsetTable:
        """Load a table written by :meth:`encode` (or by RocketMQ); damaged entries are skipped.

        Each skipped entry is logged unless ``log_skipped`` is False (a request's body: its
        sender could fill the log).

        Raises:
            ConfigError: the document is not valid JSON or has no ``offsetTable``; names ``source``.
        """
        table = cls()
        try:
            # RocketMQ's broker writes the queue ids unquoted (fastjson: ``{0:7}``).
            document = fastjson.loads(data, source)
        except RemoteProtocolError as exc:
            raise ConfigError(f"{source}: not valid JSON: {exc}") from exc
        raw = document.get("offsetTable") if isinstance(document, dict) else None
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: no 'offsetTable' object")
        skipped = 0
        for key, queues in raw.items():
            topic, _, group = str(key).rpartition(TOPIC_GROUP_SEPARATOR)
            if not isinstance(queues, dict):
                if log_skipped:
                    logger.warning("%s: entry %s is not an object; skipped", source, shorten(key))
                skipped += 1
                continue
            for queue_text, offset_value in queues.items():
                queue_id, queue_offset = _as_int(queue_text), _as_int(offset_value)
                if queue_id is None or queue_offset is None:
                    problem: str | None = "queue id or offset is not an integer"
                else:
                    problem = entry_problem(group, topic, queue_id, queue_offset)
                if problem is not None or queue_id is None or queue_offset is None:
                    skipped += 1
                    if not log_skipped:
                        continue
                    logger.warning(
                        "%s: entry %s queue %s skipped: %s",
                        source,
                        shorten(key),
                        shorten(queue_text),
                        problem,
                    )
                    continue
                table._table.setdefault((topic, group), {})[queue_id] = queue_offset
        if skipped and log_skipped:
            logger.warning("%s: %d damaged entries skipped", source, skipped)
        return table


def entry_problem(group: str, topic: str, queue_id: int, queue_offset: int) -> str | None:
    """Why (group, topic, queue_id, queue_offset) cannot be an entry of the table (None if it can)."""
    problem = topic_name_problem(topic) or group_name_problem(group)
    if problem is not None:
        return problem
    if not 0 <= queue_id <= _QUEUE_ID_MAX:
        return f"queue id {queue_id} is not 0..{_QUEUE_ID_MAX}"
    if not _LONG_MIN <= queue_offset <= _LONG_MAX:
        return f"offset {queue_offset} is not a 64-bit integer"
    return None


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        return int(value)
    return None
