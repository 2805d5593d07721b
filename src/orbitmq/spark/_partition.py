"""One Spark partition of the ``orbitmq`` source and the read task that fetches it.

A :class:`QueueRange` carries everything a task needs (queue, offset range, name server, tag
expression, timeouts): tasks run in executor processes and never consult driver state.

Each pull body becomes one Arrow batch through :func:`~orbitmq.spark._arrow_records.records_batch`
(columns built by NumPy and Arrow kernels); a body it does not take (IPv6 hosts, compressed
bodies) goes through the record-at-a-time :class:`~orbitmq.spark._schema.ColumnBuilder`.

A read task follows its queue's broker group as the client's pull consumer does: each pull
goes to the member the last answer suggested (``suggestWhichBrokerId``), else the master,
else, while the master has left the route, a slave. When the member it reached fails (the
master killed, a connection reset, a timeout) or ends the range early (a slave that has not
caught up yet, a master restarting), the task asks again from the exact offset it reached,
with back-off (0.1 s doubling to 2 s) for up to ``failoverTimeoutMs``, so a row is neither
skipped nor yielded twice. Past that bound it fails with :class:`QueueReadError`, naming
topic, broker, queue, range, the offset reached and what each attempt met.

Pulls are read ahead (:func:`read_ahead`): a thread of the task keeps up to
:data:`READ_AHEAD_PULLS` answered pulls waiting while the task's own thread converts the
previous one and Spark takes the batch, so the broker's round trip overlaps the task's work
instead of adding to it. The thread only waits on the client's event loop (the conversion
releases the GIL), and it stops, closing the pull, when the task stops reading.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import InputPartition

from orbitmq.errors import ClientError, OrbitError
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.tags import TagFilter
from orbitmq.spark._arrow_records import records_batch
from orbitmq.spark._client import ClientFactory
from orbitmq.spark._options import NO_SECURITY, ClientSecurity
from orbitmq.spark._schema import ColumnBuilder

ARROW_BATCH_ROWS = 4096
"""Rows per Arrow batch the record-at-a-time path yields (flushed after the pull that reaches it)."""
CONVERT_BYTES = 1 << 20
"""Pull bodies are converted together once they hold this many bytes (about 1,000 x 1 KiB)."""

READ_AHEAD_PULLS = 2
"""Answered pulls a read task keeps waiting while it converts the previous one."""

_FIRST_DELAY_S = 0.1
_MAX_DELAY_S = 2.0
_ATTEMPTS_NAMED = 3  # the error names the first and the last attempts' failures


class QueueReadError(ClientError):
    """A read task could not fetch its range from any member of the broker group in time."""


@dataclass(frozen=True, slots=True)
class QueueRange(InputPartition):
    """One Spark partition: ``[start_offset, end_offset)`` of one queue, and how to reach it."""

    topic: str
    broker_name: str
    queue_id: int
    start_offset: int
    end_offset: int
    namesrv_addr: str
    expression: str
    pull_batch_size: int
    request_timeout_ms: int
    security: ClientSecurity = NO_SECURITY
    failover_timeout_ms: int = 30_000

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)


def read_range(partition: QueueRange, factory: ClientFactory) -> Iterator[pa.RecordBatch]:
    """Yield the partition's messages as Arrow batches of up to about :data:`ARROW_BATCH_ROWS` rows.

    Raises:
        QueueReadError: the range could not be read within ``failover_timeout_ms``.
        ClientError: messages of the range were removed (below the queue's min offset).
    """
    if partition.end_offset <= partition.start_offset:
        return
    puller = factory.puller(partition.namesrv_addr, partition.request_timeout_ms, partition.security)
    tag_filter = TagFilter.parse(partition.expression)
    builder = ColumnBuilder(partition.broker_name, tag_filter, partition.end_offset)
    position = partition.start_offset
    failures: list[str] = []
    deadline = 0.0
    delay = _FIRST_DELAY_S
    while True:
        # Bodies are converted a few at a time (the column path's cost is mostly per call);
        # ``position`` moves only past converted bodies, so a retry resumes exactly there.
        pending: list[bytes] = []
        pending_bytes, reached = 0, position
        failure: str | None = None
        try:
            pulls = puller.pull_range_raw(
                partition.queue, position, partition.end_offset,
                expression=partition.expression, max_msg_nums=partition.pull_batch_size,
            )  # fmt: skip
            for pulled in read_ahead(pulls, READ_AHEAD_PULLS):
                pending.append(pulled.body)
                pending_bytes += len(pulled.body)
                reached = max(reached, pulled.next_offset)
                if pending_bytes >= CONVERT_BYTES:
                    yield from _convert(pending, builder, partition, tag_filter)
                    pending, pending_bytes, position = [], 0, reached
        except OrbitError as exc:
            if not exc.retriable:
                raise
            failure = f"{type(exc).__name__}: {exc}"
        yield from _convert(pending, builder, partition, tag_filter)
        position = reached
        if failure is None:
            if position >= partition.end_offset:
                break
            failure = f"the broker's queue ended at offset {position}"
        failures.append(failure)
        now = time.monotonic()
        if not deadline:
            deadline = now + partition.failover_timeout_ms / 1000
        if now >= deadline:
            raise QueueReadError(_read_failure(partition, position, failures))
        time.sleep(min(delay, deadline - now))
        delay = min(delay * 2, _MAX_DELAY_S)
    if len(builder):
        yield builder.flush()


_T = TypeVar("_T")
_POLL_S = 0.1


def read_ahead(items: Iterator[_T], depth: int) -> Iterator[_T]:
    """``items`` in order, fetched by a thread up to ``depth`` items ahead of the caller.

    An exception raised by ``items`` is raised to the caller after the items before it.
    Closing this iterator (the caller stops early) stops the thread, which closes ``items``
    once its pull in flight has answered. A ``depth`` of 0 reads on the caller's thread.
    """
    if depth <= 0:
        yield from items
        return
    ready: queue.Queue[tuple[bool, _T | BaseException | None]] = queue.Queue(maxsize=depth)
    stopped = threading.Event()

    def offer(entry: tuple[bool, _T | BaseException | None]) -> bool:
        while not stopped.is_set():
            try:
                ready.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def fetch() -> None:
        try:
            for item in items:
                if not offer((False, item)):
                    return
            offer((True, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            offer((True, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    fetcher = threading.Thread(target=fetch, name="orbitmq-spark-read-ahead", daemon=True)
    fetcher.start()
    try:
        while True:
            done, entry = ready.get()
            if done:
                if entry is not None:
                    raise entry  # type: ignore[misc]
                return
            yield entry  # type: ignore[misc]
    finally:
        stopped.set()


def _convert(
    bodies: list[bytes], builder: ColumnBuilder, partition: QueueRange, tag_filter: TagFilter
) -> Iterator[pa.RecordBatch]:
    """Batches of the records in ``bodies`` (the column path, else one record at a time)."""
    if not bodies:
        return
    joined = bodies[0] if len(bodies) == 1 else b"".join(bodies)
    fast = records_batch(joined, partition.broker_name, tag_filter, partition.end_offset)
    if fast is None:  # a record the column path does not take
        for body in bodies:
            builder.add_pull_body(body)
            if len(builder) >= ARROW_BATCH_ROWS:
                yield builder.flush()
        return
    if len(builder):
        yield builder.flush()  # keep queue order
    if fast.num_rows:
        yield fast


def _read_failure(partition: QueueRange, position: int, failures: list[str]) -> str:
    shown = (
        failures[:1]
        + (["..."] if len(failures) > _ATTEMPTS_NAMED else [])
        + failures[1:][-(_ATTEMPTS_NAMED - 1) :]
    )
    return (
        f"cannot read topic {partition.topic} broker {partition.broker_name} queue {partition.queue_id} "
        f"offsets [{partition.start_offset}, {partition.end_offset}): stopped at {position} after "
        f"{len(failures)} attempts over {partition.failover_timeout_ms / 1000:g} s (the master, then its "
        f"slave while the master is out of the route): {' | '.join(shown)}"
    )
