"""Consumer offsets committed by clustering consumers: (group, topic, queue_id) -> queue_offset.

Pure state, no I/O: the broker's persistence service asks for :meth:`ConsumerOffsetTable.encode`
when the table is dirty and writes the bytes itself. The JSON layout is RocketMQ's
``consumerOffset.json`` so an operator's tooling recognises it::

    {"offsetTable": {"<topic>@<group>": {"<queue_id>": <queue_offset>, ...}, ...}}

RocketMQ joins topic and group with ``@``; neither name may contain it (the name charset is
``[%|a-zA-Z0-9_-]``), so the split on load is unambiguous.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import orjson

from orbitmq.errors import ConfigError

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetTable:
    """Committed queue offsets per consumer group, topic and queue.

    Thread-safe: handlers commit on the event loop while the persistence service may encode
    a snapshot; a lock keeps each operation atomic.
    """

    def __init__(self) -> None:
        self._table: dict[tuple[str, str], dict[int, int]] = {}
        self._lock = threading.Lock()
        self._dirty = False

    def commit(self, group: str, topic: str, queue_id: int, queue_offset: int) -> None:
        """Record ``queue_offset`` as the next offset ``group`` will consume from this queue."""
        with self._lock:
            queues = self._table.setdefault((topic, group), {})
            if queues.get(queue_id) != queue_offset:
                queues[queue_id] = queue_offset
                self._dirty = True

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
    def decode(cls, data: bytes, source: str = "consumerOffset.json") -> ConsumerOffsetTable:
        """Load a table written by :meth:`encode` (or by RocketMQ).

        Raises:
            ConfigError: the document is not valid JSON or has the wrong shape; names ``source``.
        """
        table = cls()
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"{source}: not valid JSON: {exc}") from exc
        raw = document.get("offsetTable") if isinstance(document, dict) else None
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: no 'offsetTable' object")
        for key, queues in raw.items():
            topic, separator, group = str(key).rpartition(TOPIC_GROUP_SEPARATOR)
            if not separator or not topic or not group or not isinstance(queues, dict):
                raise ConfigError(f"{source}: malformed entry {key!r}")
            for queue_id, queue_offset in queues.items():
                try:
                    table._table.setdefault((topic, group), {})[int(queue_id)] = int(queue_offset)
                except (TypeError, ValueError) as exc:
                    raise ConfigError(f"{source}: entry {key!r} queue {queue_id!r}: {exc}") from exc
        return table
