"""The queue manifest (``<store>/queue_manifest.json``): which ConsumeQueues exist, with their bounds.

Why it exists. A ConsumeQueue is derived data that the CommitLog alone can rebuild, but only
for a queue the store knows of. Recovery re-dispatches the log from the checkpoint, so a
queue directory deleted under an intact checkpoint (a stray ``rm``, a restore that missed a
directory) used to leave no trace: nothing said the queue had existed. The same holds for
the index. The manifest is that trace: recovery compares it with what is on disk and rebuilds
what went missing (see ``recovery.py``).

Format: one JSON object (orjson), replaced atomically (temp file, fsync, rename, fsync of
the directory)::

    field                   type                  meaning
    version                 int (1)               another version reads as "no manifest"
    commit_log_end_offset   int                   the log's end when written: every entry the
                                                  manifest counts points at a record below it
    index_has_entries       bool                  whether the index held any key
    queues                  list of               one item per queue, sorted:
                              [topic, queue_id,     the queue's name,
                               min_queue_offset,    its oldest readable entry,
                               max_queue_offset]    its next queue offset: the entries below
                                                    it exist once recovery has re-dispatched
                                                    the log from the checkpoint
                                                    (both null when unknown: a queue on disk
                                                    that was not loaded since the manifest began)
    exact                   bool (optional)       written by close: every bound is exact
    commit_log_min_offset   int (optional)        the log's first offset when written

When it is written. After a thorough flush (the one that advances the checkpoint), only when
something recovery relies on changed: the set of queues, whether the index holds entries, or
whether a queue holds any entries at all. At open and close it is written whenever anything
differs, moved bounds included. So between writes a queue's ``max_queue_offset`` is a lower
bound of what the queue holds after recovery and ``min_queue_offset`` may trail retention,
which keeps the checks at open valid:

* a listed queue whose directory is gone was lost;
* a listed queue whose files no longer run, without a hole, up to the file that holds entry
  ``max_queue_offset - 1`` lost files (a missing prefix is retention's work, not a loss);
* ``index_has_entries`` with an index that holds nothing means the index was lost.

Damaged entries inside a file that is still there are not looked for: that would cost a
read per queue at every open.

Exact bounds. The manifest close() writes is ``exact``: every queue's bounds are what its
files hold (queues not loaded during the run keep bounds that were exact before, since only a
put, a truncation or retention moves them, and those load the queue). At the next open, if the
shutdown was clean and the log still spans exactly ``commit_log_min_offset`` to
``commit_log_end_offset``, a queue loads from its bounds without reading its files
(:meth:`QueueManifest.trusted_bounds`): with 50,000 queues that is most of what a restart's
first put to each queue costs. Any other manifest (a crash, a failed write at close, a log
that moved since) is only checked against, never trusted.

A missing, unreadable or foreign manifest reads as None: no queue is checked (stores from
before the manifest recover as they did), and an empty index counts as lost when the
checkpoint says keys were indexed, which costs a log with no keys one walk, at the first
open only, since that open writes a manifest.
"""

from __future__ import annotations

import errno
import gc
import logging
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TypeGuard

import orjson

from orbitmq.store._fs import parse_segment_name, write_file_durably
from orbitmq.store.commit_log import CommitLog
from orbitmq.store.consume_queue import ENTRY_BYTES, ConsumeQueueTable
from orbitmq.store.index_service import IndexService

_log = logging.getLogger(__name__)

MANIFEST_FILE_NAME = "queue_manifest.json"
_VERSION = 1

QueueKey = tuple[str, int]


class QueueBounds(NamedTuple):
    """A queue's readable range when the manifest was written."""

    min_queue_offset: int
    max_queue_offset: int  # the queue's next queue offset when the manifest was written

    @property
    def holds_entries(self) -> bool:
        return self.min_queue_offset < self.max_queue_offset


@dataclass(slots=True)
class QueueManifest:
    """The decoded manifest (see the module docstring); None bounds are unknown."""

    queues: dict[QueueKey, QueueBounds | None] = field(default_factory=dict)
    index_has_entries: bool = False
    commit_log_end_offset: int = 0
    exact: bool = False
    commit_log_min_offset: int = 0

    def trusted_bounds(
        self, clean_shutdown: bool, commit_log_min: int, commit_log_end: int
    ) -> dict[QueueKey, tuple[int, int]]:
        """The bounds a queue may load from without reading its files (see the module docstring)."""
        if not (
            self.exact
            and clean_shutdown
            and self.commit_log_min_offset == commit_log_min
            and self.commit_log_end_offset == commit_log_end
        ):
            return {}
        trusted: dict[QueueKey, tuple[int, int]] = {
            key: bounds for key, bounds in self.queues.items() if bounds is not None
        }
        return trusted

    def encode(self) -> bytes:
        # In the dict's order, which is sorted: save() builds it from the sorted queue names,
        # decode() from a file save() wrote. One tuple per item: 50,000 queues are written
        # at every close.
        unknown = (None, None)
        items = [key + (unknown if bounds is None else bounds) for key, bounds in self.queues.items()]
        document = {
            "version": _VERSION,
            "commit_log_end_offset": self.commit_log_end_offset,
            "index_has_entries": self.index_has_entries,
            "exact": self.exact,
            "commit_log_min_offset": self.commit_log_min_offset,
            "queues": items,
        }
        return orjson.dumps(document)

    @classmethod
    def decode(cls, data: bytes) -> QueueManifest | None:
        """The manifest in ``data``, or None when it is not a readable manifest of this version."""
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(document, dict) or document.get("version") != _VERSION:
            return None
        end_offset = document.get("commit_log_end_offset")
        index_has_entries = document.get("index_has_entries")
        items = document.get("queues")
        if not _is_int(end_offset) or not isinstance(index_has_entries, bool) or not isinstance(items, list):
            return None
        exact = document.get("exact", False)
        min_offset = document.get("commit_log_min_offset", 0)
        if not isinstance(exact, bool) or not _is_int(min_offset):
            return None
        queues = _decode_queues(items)
        if queues is None:
            return None
        return cls(queues, index_has_entries, end_offset, exact, min_offset)


def _is_int(value: object) -> TypeGuard[int]:
    return type(value) is int and value >= 0  # type(): a bool is an int too


def _decode_queues(items: list[object]) -> dict[QueueKey, QueueBounds | None] | None:
    """The ``[topic, queue_id, min, max]`` items, or None when one is malformed.

    One loop without calls per item: a store with 50,000 queues reads this at every open.
    """
    queues: dict[QueueKey, QueueBounds | None] = {}
    make_bounds = tuple.__new__
    for item in items:
        if type(item) is not list or len(item) != 4:
            return None
        topic, queue_id, low, high = item
        if type(topic) is not str or not topic or type(queue_id) is not int or queue_id < 0:
            return None
        if low is None and high is None:
            queues[(topic, queue_id)] = None
        elif type(low) is int and type(high) is int and 0 <= low <= high:
            queues[(topic, queue_id)] = make_bounds(QueueBounds, (low, high))
        else:
            return None
    return queues


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a bulk step (it is back on after, if it was on).

    Reading or writing the manifest of 50,000 queues allocates a few hundred thousand small
    objects, and each collection they set off walks every object of the store: with the
    collector on, half of a save's time and two thirds of a read's went to it. The objects
    made here form no cycles, so pausing it frees nothing less.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def manifest_path(store_root: Path) -> Path:
    """Where a store keeps its manifest: beside the checkpoint."""
    return Path(store_root) / MANIFEST_FILE_NAME


def read_manifest(path: Path) -> QueueManifest | None:
    """The manifest at ``path``, or None when there is no usable one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        _log.warning("queue manifest %s is unreadable (%s); lost queues cannot be detected", path, exc)
        return None
    with collector_paused():
        manifest = QueueManifest.decode(data)
    if manifest is None:
        _log.warning("queue manifest %s is damaged or of another version; ignoring it", path)
    return manifest


# -- checks at open --------------------------------------------------------------------------


def missing_queues(manifest: QueueManifest, on_disk: Iterable[QueueKey]) -> set[QueueKey]:
    """Queues the manifest lists whose directory is gone."""
    return set(manifest.queues).difference(on_disk)


def short_queues(manifest: QueueManifest, table: ConsumeQueueTable, skip: set[QueueKey]) -> set[QueueKey]:
    """Queues that lost files the manifest's count needs (``skip``: already known lost).

    A loaded queue is judged by its max queue offset. Any other is judged by its file names
    alone (loading or reading every queue would make each open cost a read per queue): its
    files must run without a hole up to the one that holds the last counted entry. A missing
    prefix is not a loss, since retention deletes files from the front.
    """
    loaded = {(queue.topic, queue.queue_id): queue for queue in table.loaded()}
    root_text = str(table.root)
    short = set()
    for key, bounds in manifest.queues.items():
        if bounds is None or not bounds.holds_entries or key in skip:
            continue
        queue = loaded.get(key)
        if queue is not None:
            holds = queue.max_queue_offset >= bounds.max_queue_offset
        else:
            directory = f"{root_text}/{key[0]}/{key[1]}"
            holds = files_reach(directory, table.entries_per_file, bounds.max_queue_offset - 1)
        if not holds:
            short.add(key)
    return short


def files_reach(directory: str, entries_per_file: int, queue_offset: int) -> bool:
    """Whether a queue's files run without a hole up to the one holding ``queue_offset``."""
    file_bytes = entries_per_file * ENTRY_BYTES
    last_start_bytes = (queue_offset - queue_offset % entries_per_file) * ENTRY_BYTES
    try:
        names = os.listdir(directory)  # plain names: this runs once per queue at every open
    except FileNotFoundError:
        return False
    starts = sorted(
        start
        for name in names
        if (start := parse_segment_name(name)) is not None and start <= last_start_bytes
    )
    if not starts or starts[-1] != last_start_bytes:
        return False
    return starts[-1] - starts[0] == (len(starts) - 1) * file_bytes


# -- keeping it current ----------------------------------------------------------------------


class ManifestKeeper:
    """Reads the manifest at open and rewrites it when the store's shape changes.

    :meth:`save` runs with the table's ``flush_lock`` held, after the checkpoint. It counts
    entries still buffered in memory too: those whose records lie below the checkpoint on
    disk at the next open are in the files, and recovery re-dispatches the others, so at
    open a queue holds every entry the manifest counts unless its files were lost (or the
    log lost its tail, which :meth:`recovered` handles).

    Cost. The periodic check holds the store lock only to copy the list of loaded queues,
    then compares on the flush thread; the full list of queue names (which sorts every
    queue) is taken only to write, or when ``final``. Loaded queues are never unloaded, so
    one that leaves the loaded list was dropped or deleted.
    """

    def __init__(self, store_root: Path) -> None:
        self.path = manifest_path(store_root)
        self._written: QueueManifest | None = None  # what the file holds
        self._loaded_keys: set[QueueKey] = set()  # queues loaded at the last save
        self._stale = False  # the file no longer holds: rewrite at the next save

    def load(self) -> QueueManifest | None:
        """Read the manifest (at open, before recovery)."""
        self._written = read_manifest(self.path)
        self._loaded_keys = set()
        self._stale = False
        return self._written

    def recovered(self, end_offset: int) -> None:
        """Recovery cut the log at ``end_offset``: forget counts that may point past it.

        A manifest written before a crash can count entries whose records the crash lost;
        those queues were cut with the log, so their old counts would later look like lost
        entries. Queues that are not loaded get unknown bounds, loaded ones are recounted.
        """
        written = self._written
        if written is None or written.commit_log_end_offset <= end_offset:
            return
        written.queues = dict.fromkeys(written.queues)
        written.commit_log_end_offset = end_offset
        self._stale = True

    def forget_topic(self, topic: str) -> None:
        """A topic's queues were deleted: rewrite without them at the next save.

        Without this, queues of the topic that were never loaded would stay listed until the
        next write, and a crash before it would bring them back from the log.
        """
        written = self._written
        if written is not None and any(key[0] == topic for key in written.queues):
            written.queues = {key: bounds for key, bounds in written.queues.items() if key[0] != topic}
            self._stale = True

    @collector_paused()
    def save(
        self,
        table: ConsumeQueueTable,
        index: IndexService | None,
        commit_log: CommitLog,
        store_lock: threading.Lock,
        final: bool,
        exact: bool = False,
    ) -> bool:
        """Rewrite the manifest if the store's shape changed; ``final`` also writes moved bounds.

        ``final`` (open and close) compares the full list of queue names too; ``exact``
        (close only, puts refused) marks the bounds exact, and rewrites a manifest that was
        not. Returns whether the manifest was written. A failed write is logged and retried
        at the next save.
        """
        with store_lock:
            loaded = table.loaded()
        # Read after the snapshot: every counted entry's record ends below it.
        end_offset = commit_log.max_offset
        min_offset = commit_log.min_offset
        index_has_entries = index is not None and index.max_commit_log_offset >= 0
        written = self._written
        previous = written.queues if written is not None else {}
        # Read without the store lock: a racing put can show min above max for a moment.
        loaded_bounds = {
            (queue.topic, queue.queue_id): (
                low if (low := queue.min_queue_offset) <= (high := queue.max_queue_offset) else high,
                high,
            )
            for queue in loaded
        }
        shape_changed = (
            written is None
            or self._stale
            or written.index_has_entries != index_has_entries
            or not self._loaded_keys.issubset(loaded_bounds)
            or _shape_differs(previous, loaded_bounds)
        )
        bounds_changed = any(previous.get(key) != bounds for key, bounds in loaded_bounds.items())
        if not final and not shape_changed:
            self._loaded_keys = set(loaded_bounds)
            return False
        with store_lock:
            name_set = table.name_set()
        names = sorted(name_set)  # after the lock: sorting 50,000 names held every request
        if (
            not shape_changed
            and not bounds_changed
            and written is not None
            and (written.exact or not exact)
            and written.commit_log_end_offset == end_offset
            and written.commit_log_min_offset == min_offset
            and len(names) == len(previous)
            and all(key in previous for key in names)
        ):
            self._loaded_keys = set(loaded_bounds)
            return False
        # Plain tuples are QueueBounds' layout; building 50,000 named ones would cost more.
        make_bounds = tuple.__new__
        queues: dict[QueueKey, QueueBounds | None] = {}
        for key in names:
            bounds = loaded_bounds.get(key)
            queues[key] = make_bounds(QueueBounds, bounds) if bounds is not None else previous.get(key)
        # Exact only from close (``final`` with the store closed to puts): a save at open or
        # from the flush thread races with puts.
        manifest = QueueManifest(queues, index_has_entries, end_offset, exact, min_offset)
        try:
            write_file_durably(self.path, manifest.encode())
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                _log.error("writing queue manifest %s failed (%s); retrying at the next save", self.path, exc)
            else:
                _log.exception("writing queue manifest %s failed; retrying at the next save", self.path)
            self._stale = True
            return False
        self._written = manifest
        self._loaded_keys = set(loaded_bounds)
        self._stale = False
        return True


def _shape_differs(
    previous: dict[QueueKey, QueueBounds | None], loaded_bounds: dict[QueueKey, tuple[int, int]]
) -> bool:
    """Whether a loaded queue is new to the manifest, or started or stopped holding entries."""
    for key, (low, high) in loaded_bounds.items():
        if key not in previous:
            return True
        old = previous[key]
        if old is not None and (old[0] < old[1]) != (low < high):
            return True
    return False
