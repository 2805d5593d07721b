"""``python -m orbitmq.bench store``: MessageStore throughput, next to the raw disk's.

What is measured, each on a fresh store in a temporary directory (deleted at the end):

=====================  =====================================================================
append (ASYNC_FLUSH)   put_message one at a time, and put_messages in batches of 32 (what the
                       broker does for a batch send), 100 B and 1 KiB bodies with a tag and a
                       unique key (indexed, as every client message is), one queue. Timed
                       twice: the puts alone, and the puts plus close() (which flushes
                       everything to disk), so the figure compares with "writes + one fsync".
disk baseline          the same number of bytes written with plain buffered 1 MiB writes to one
                       file, then one fsync: the machine's sequential write bandwidth.
                       Appends and baseline are repeated (``--rounds``, 3 by default), the
                       baseline first in each round, and the best of each is compared: on a
                       virtual machine the first touch of fresh page-cache memory is several
                       times slower than later ones, so a single run mostly measures who went
                       first. Every round's MiB/s is printed beside the best.
SYNC_FLUSH writers     1, 16 and 64 threads, each calling put_message and waiting for its flush
                       future; group commit lets concurrent puts share one fsync. Also 64 puts
                       kept in flight by one thread (the broker puts from its event loop and
                       awaits the futures), which avoids 64 threads contending for the GIL.
record loop            the 1 KiB run's records, encoded beforehand, written by the store's own
                       pack loop (pack the fixed fields, crc32 the body, copy body and tail)
                       into a segment faulted in beforehand, then one flush: no lock,
                       ConsumeQueue, index or result. The ceiling of a store that packs records
                       one by one in Python, printed with its ratio to the disk baseline.
read                   get_messages in batches of 32 through the ConsumeQueue, over the 1 KiB
                       messages written above (page cache warm).
queues                 put_message of 100 B bodies spread round-robin over 8 queues, and over
                       50,000 queues, 50,000 puts per pass (one per queue in the 50,000
                       case). The first pass meets every queue for the first time and ends
                       with a thorough consume-queue flush, which creates each queue's
                       directory and file; the second pass appends to existing files (steady
                       state). A sustained run then puts for ``--sustain-seconds`` (10) while
                       the housekeeping thread writes buffered entries out on its own
                       schedule, as in a running broker: the append throughput of a store in
                       service, two write-out cycles of slow queues included. close(), which
                       writes and syncs every queue's entries, is timed with the second pass;
                       last, a restart: open (timed apart), then one pass, which loads each
                       queue at its first put.
=====================  =====================================================================

Targets (printed next to the figures, each marked met or MISSED): 1 KiB ASYNC append + flush
>= 0.7 x the disk baseline; SYNC_FLUSH with 64 writers >= 10 x one writer (64 threads, and 64
puts in flight from one thread); 50,000 queues >= 0.8 x 8 queues, printed for the sustained
run (background write-out included), for the steady-state pass alone and with the close that
writes every queue's entries, and including first-time file creation.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from orbitmq.protocol.message_codec import stored_message_size
from orbitmq.protocol.properties import encode_properties
from orbitmq.store.config import FlushDiskType, StoreConfig
from orbitmq.store.mapped_file import MappedFile
from orbitmq.store.message_store import MessageStore, PutMessageRequest, PutResult, PutStatus
from orbitmq.store.put_path import RecordBuilder, pack

BATCH_SIZE = 32
READ_BATCH = 32
SMALL_BODY_BYTES = 100
LARGE_BODY_BYTES = 1024
BASELINE_CHUNK_BYTES = 1 << 20
SYNC_WRITER_COUNTS = (1, 16, 64)
FEW_QUEUES = 8
MEBIBYTE = 1 << 20

TARGET_DISK_RATIO = 0.7
TARGET_SYNC_SCALING = 10.0
TARGET_QUEUE_RATIO = 0.8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m orbitmq.bench store``."""
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temporary store directory")
    parser.add_argument("--volume-mb", type=int, default=64, help="1 KiB bodies written per append run (MiB)")
    parser.add_argument("--sync-seconds", type=float, default=2.0, help="duration of each SYNC_FLUSH run")
    parser.add_argument("--queues", type=int, default=50_000, help="queue count of the many-queues run")
    parser.add_argument(
        "--sustain-seconds", type=float, default=10.0, help="duration of each sustained many-queues run"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="repetitions of each append run and of the disk baseline"
    )
    parser.add_argument("--quick", action="store_true", help="small volumes (about 15 s), for smoke tests")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")


@dataclass(slots=True)
class Row:
    """One measured figure."""

    label: str
    messages: int
    seconds: float
    payload_bytes: int  # bytes that reached the commit log (or the file, for the baseline)
    note: str = ""

    @property
    def messages_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mib_per_s(self) -> float:
        return self.payload_bytes / MEBIBYTE / self.seconds if self.seconds > 0 else 0.0

    def render(self) -> str:
        rate = f"{self.messages_per_s:>12,.0f} msg/s" if self.messages else " " * 18
        line = f"  {self.label:<76} {rate} {self.mib_per_s:>9.1f} MiB/s  ({self.messages:,} in {self.seconds:.2f} s)"
        return f"{line}  {self.note}" if self.note else line


class StoreBench:
    """Runs every measurement under one temporary directory."""

    def __init__(
        self,
        work_dir: Path,
        volume_bytes: int,
        sync_seconds: float,
        queue_count: int,
        sustain_seconds: float = 10.0,
    ) -> None:
        self.work_dir = work_dir
        self.volume_bytes = volume_bytes
        self.sync_seconds = sync_seconds
        self.queue_count = queue_count
        self.sustain_seconds = sustain_seconds
        self.large_count = max(volume_bytes // LARGE_BODY_BYTES, BATCH_SIZE)
        self._run = 0

    def _store(self, flush: FlushDiskType = FlushDiskType.ASYNC_FLUSH) -> MessageStore:
        self._run += 1
        store = MessageStore(
            StoreConfig(store_path_root_dir=self.work_dir / f"run-{self._run}", flush_disk_type=flush)
        )
        store.open()
        return store

    def discard(self, store: MessageStore) -> None:
        """Close ``store`` if open and delete its directory."""
        if store.is_open:
            store.close()
        shutil.rmtree(store.store_path, ignore_errors=True)

    # -- append ------------------------------------------------------------------------------

    def append_volume_bytes(self, body_bytes: int) -> int:
        """The commit-log bytes one append run of ``body_bytes`` bodies writes (the baseline's volume)."""
        request = _append_request(bytes(body_bytes), 0)
        properties_len = len(encode_properties(request.properties).encode("utf-8"))
        record_bytes = stored_message_size(body_bytes, len(request.topic.encode("utf-8")), properties_len)
        return self.large_count * record_bytes

    def append(
        self, body_bytes: int, batched: bool, keep_open: bool = False
    ) -> tuple[Row, Row, MessageStore]:
        """Append ``large_count`` messages to one queue; rows for the puts and puts + close."""
        count = self.large_count
        body = os.urandom(body_bytes)
        requests = [_append_request(body, slot) for slot in range(BATCH_SIZE)]
        store = self._store()
        wrote = 0
        started = time.perf_counter()
        if batched:
            for _ in range(count // BATCH_SIZE):
                wrote += _checked(store.put_messages(requests)).wrote_bytes
        else:
            put = store.put_message
            for index in range(count):
                wrote += _checked(put(requests[index % BATCH_SIZE])).wrote_bytes
        appended = time.perf_counter()
        count = count // BATCH_SIZE * BATCH_SIZE if batched else count
        how = f"put_messages x{BATCH_SIZE}" if batched else "put_message"
        label = f"append {body_bytes} B, {how}"
        put_row = Row(f"{label}: puts only", count, appended - started, wrote)
        store.close()
        flush_row = Row(f"{label}: puts + close (flush)", count, time.perf_counter() - started, wrote)
        if keep_open:
            store = MessageStore(store.config)
            store.open()
        else:
            self.discard(store)
        return put_row, flush_row, store

    def disk_baseline(self, total_bytes: int) -> Row:
        """Plain buffered 1 MiB writes of ``total_bytes`` to one file, then one fsync."""
        path = self.work_dir / "baseline.bin"
        chunk = os.urandom(BASELINE_CHUNK_BYTES)
        started = time.perf_counter()
        with open(path, "wb") as handle:
            remaining = total_bytes
            while remaining > 0:
                remaining -= handle.write(chunk[: min(remaining, BASELINE_CHUNK_BYTES)])
            handle.flush()
            os.fsync(handle.fileno())
        row = Row(
            "disk baseline: buffered 1 MiB writes + one fsync", 0, time.perf_counter() - started, total_bytes
        )
        path.unlink()
        return row

    def record_loop(self, body_bytes: int) -> Row:
        """The ceiling of packing records one by one in Python: the store's pack loop, alone.

        The records of an append run of ``body_bytes`` bodies, validated and encoded up to
        their offsets beforehand (untimed), then written by the store's own batch loop
        (:func:`~orbitmq.store.put_path.pack`: per record one ``pack_into`` of the fixed
        fields, one ``crc32`` of the body and two slice copies) into a segment faulted in
        beforehand, then one flush: no lock, no ConsumeQueue, no index, no result. A put
        cannot append faster than this loop.
        """
        request = _append_request(os.urandom(body_bytes), 0)
        prepared = RecordBuilder(body_bytes).prepare([request] * self.large_count)
        if isinstance(prepared, PutResult):
            raise RuntimeError(f"record loop: {prepared.status.name} {prepared.remark}")
        volume = sum(record[1] for record in prepared)
        path = self.work_dir / f"record-loop-{self._run}"
        self._run += 1
        segment = MappedFile(path, 0, volume + MEBIBYTE)
        try:
            segment.populate(0, volume)
            started = time.perf_counter()
            segment.wrote_position, _ = pack(segment.buffer, 0, 0, prepared, 0, time.time_ns() // 1_000_000)
            segment.flush()
            elapsed = time.perf_counter() - started
        finally:
            segment.delete()
        return Row(
            f"record loop {body_bytes} B: the store's pack loop alone, + flush",
            len(prepared),
            elapsed,
            volume,
        )

    # -- read --------------------------------------------------------------------------------

    def read(self, store: MessageStore) -> Row:
        """Read the whole queue back in batches of READ_BATCH through the ConsumeQueue."""
        queue_offset, messages, read_bytes = 0, 0, 0
        end = store.get_max_queue_offset("BenchTopic", 0)
        started = time.perf_counter()
        while queue_offset < end:
            result = store.get_messages("BenchTopic", 0, queue_offset, READ_BATCH, max_total_bytes=1 << 30)
            if not result.message_count:
                raise RuntimeError(
                    f"read stalled at BenchTopic queue 0 queue offset {queue_offset}: {result.status}"
                )
            messages += result.message_count
            read_bytes += result.total_bytes
            queue_offset = result.next_begin_offset
        return Row(
            f"read 1 KiB, get_messages x{READ_BATCH}", messages, time.perf_counter() - started, read_bytes
        )

    # -- SYNC_FLUSH --------------------------------------------------------------------------

    def sync_writers(self, writer_count: int) -> Row:
        """``writer_count`` threads put and wait for the flush future, for sync_seconds."""
        store = self._store(FlushDiskType.SYNC_FLUSH)
        counts = [0] * writer_count
        wrote = [0] * writer_count
        timeouts = [0]
        stop = threading.Event()
        body = os.urandom(LARGE_BODY_BYTES)

        def writer(slot: int) -> None:
            request = PutMessageRequest(topic="BenchSync", queue_id=slot % 8, body=body)
            while not stop.is_set():
                result = _checked(store.put_message(request))
                if result.flush_future is None or not result.flush_future.result(timeout=30):
                    timeouts[0] += 1
                counts[slot] += 1
                wrote[slot] += result.wrote_bytes

        threads = [threading.Thread(target=writer, args=(slot,), daemon=True) for slot in range(writer_count)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(self.sync_seconds)
        stop.set()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        self.discard(store)
        label = f"SYNC_FLUSH 1 KiB, {writer_count} writer{'s' if writer_count > 1 else ''} (put + wait flush)"
        if timeouts[0]:
            label += f" [{timeouts[0]} flush timeouts]"
        return Row(label, sum(counts), elapsed, sum(wrote))

    def sync_in_flight(self, in_flight: int) -> Row:
        """One thread keeps ``in_flight`` puts waiting for their flush, as the broker's event loop does.

        Like the broker's send handler, the puts of one flush group share one wake-up: the
        group's future gets one callback, and the thread answers every put of the group when
        it fires.
        """
        store = self._store(FlushDiskType.SYNC_FLUSH)
        done: queue.SimpleQueue[Future[bool]] = queue.SimpleQueue()
        waiting: dict[Future[bool], int] = {}  # group future -> puts waiting on it (this thread only)
        request = PutMessageRequest(topic="BenchSync", queue_id=0, body=os.urandom(LARGE_BODY_BYTES))
        messages = wrote = timeouts = 0

        def put() -> None:
            nonlocal wrote
            result = _checked(store.put_message(request))
            wrote += result.wrote_bytes
            future = result.flush_future
            if future is None:
                raise RuntimeError("a SYNC_FLUSH put returned no flush future")
            count = waiting.get(future)
            if count is None:
                waiting[future] = 1
                future.add_done_callback(done.put)
            else:
                waiting[future] = count + 1

        started = time.perf_counter()
        deadline = started + self.sync_seconds
        for _ in range(in_flight):
            put()
        while waiting:
            future = done.get(timeout=30)
            count = waiting.pop(future)
            messages += count
            timeouts += 0 if future.result() else count
            if time.perf_counter() < deadline:
                for _ in range(count):
                    put()
        elapsed = time.perf_counter() - started
        self.discard(store)
        label = f"SYNC_FLUSH 1 KiB, {in_flight} in flight from one thread (broker-like)"
        if timeouts:
            label += f" [{timeouts} flush timeouts]"
        return Row(label, messages, elapsed, wrote)

    # -- many queues -------------------------------------------------------------------------

    def queues(self, queue_count: int, per_pass: int) -> QueueRows:
        """100 B put_message round-robin over ``queue_count`` queues: two passes, a sustained run, close.

        The first pass meets every queue for the first time and ends with a thorough
        consume-queue flush, which creates (and syncs) each queue's directory and file. The
        second pass appends to queues whose files exist, the steady state. The sustained run
        then puts for ``sustain_seconds`` while the housekeeping thread writes buffered
        entries out on its own schedule (flushIntervalConsumeQueue), as in a running broker.
        close() then writes and syncs every queue's entries (timed with the second pass), and
        a restart (open, then one pass, which loads each queue at its first put) ends it.
        """
        store = self._store()
        body = os.urandom(SMALL_BODY_BYTES)
        requests = [
            PutMessageRequest(topic=f"BenchQ{queue_id // 1000}", queue_id=queue_id % 1000, body=body)
            for queue_id in range(queue_count)
        ]
        label = f"100 B over {queue_count:,} queues"
        put = store.put_message

        def put_pass_on(target: MessageStore) -> tuple[int, float]:
            target_put = target.put_message
            wrote = 0
            started = time.perf_counter()
            for index in range(per_pass):
                wrote += _checked(target_put(requests[index % queue_count])).wrote_bytes
            return wrote, time.perf_counter() - started

        def put_pass() -> tuple[int, float]:
            return put_pass_on(store)

        wrote, first_puts = put_pass()
        started = time.perf_counter()
        store.flush_consume_queues(thorough=True)
        first_flush = time.perf_counter() - started
        first = (
            Row(f"{label}, 1st pass, new queues: puts", per_pass, first_puts, wrote),
            Row(
                f"{label}, 1st pass: puts + flush (creates files)", per_pass, first_puts + first_flush, wrote
            ),
        )
        wrote, steady_puts = put_pass()
        steady = Row(f"{label}, steady state, files exist: puts", per_pass, steady_puts, wrote)

        sustained_count = sustained_wrote = 0
        started = time.perf_counter()
        deadline = started + self.sustain_seconds
        index = 0
        while time.perf_counter() < deadline:
            for _ in range(1000):
                sustained_wrote += _checked(put(requests[index])).wrote_bytes
                index = index + 1 if index + 1 < queue_count else 0
            sustained_count += 1000
        sustained = Row(
            f"{label}, sustained {self.sustain_seconds:g} s with background write-out: puts",
            sustained_count,
            time.perf_counter() - started,
            sustained_wrote,
        )

        started = time.perf_counter()
        store.close()
        steady_close = Row(
            f"{label}, steady state pass + close (writes, syncs all)",
            per_pass,
            steady_puts + time.perf_counter() - started,
            wrote,
        )

        # A restart: queues load lazily, each at its first put. The open itself (which walks
        # the newest segment's records, the longer the more the sustained run wrote) is
        # noted, not counted.
        started = time.perf_counter()
        store = MessageStore(store.config)
        store.open()
        opening = time.perf_counter() - started
        wrote, restart_puts = put_pass_on(store)
        restart = Row(
            f"{label}, after a restart: first puts (load queues)",
            per_pass,
            restart_puts,
            wrote,
            f"(open took {opening:.2f} s)",
        )
        self.discard(store)
        return QueueRows(first[0], first[1], steady, steady_close, sustained, restart)


@dataclass(slots=True)
class QueueRows:
    """The rows of one queue-count run (see :meth:`StoreBench.queues`)."""

    first_puts: Row
    first_flush: Row
    steady_puts: Row
    steady_close: Row
    sustained: Row
    restart: Row

    def all(self) -> tuple[Row, ...]:
        return (
            self.first_puts,
            self.first_flush,
            self.steady_puts,
            self.sustained,
            self.steady_close,
            self.restart,
        )


def _append_request(body: bytes, slot: int) -> PutMessageRequest:
    """Like a client's message: a tag and a unique key (indexed); one pooled request per batch slot."""
    return PutMessageRequest(
        topic="BenchTopic",
        queue_id=0,
        body=body,
        properties={"TAGS": "bench", "UNIQ_KEY": f"7F0000010000{slot:020X}"},
    )


def _checked(result: PutResult) -> PutResult:
    if result.status is not PutStatus.PUT_OK:
        raise RuntimeError(f"put failed: {result.status.name} {result.remark}")
    return result


def _ratio_line(what: str, value: float, target: float) -> str:
    verdict = "met" if value >= target else "MISSED"
    return f"  {what:<76} {value:>8.2f}x  (target >= {target:g}x: {verdict})"


def _reference_line(what: str, value: float) -> str:
    return f"  {what:<76} {value:>8.2f}x  (measured ceiling, for comparison)"


def _filesystem(path: Path) -> str:
    """The mount point and type of the filesystem holding ``path`` (Linux; '?' elsewhere)."""
    best = ("?", "?")
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) >= 3 and str(path).startswith(fields[1]) and len(fields[1]) >= len(best[0]):
                    best = (fields[1], fields[2])
    except OSError:
        pass
    return f"{best[1]} mounted at {best[0]}"


def _section(title: str, emit: Callable[[str], None]) -> None:
    emit("")
    emit(title)


def run(args: argparse.Namespace) -> int:
    """Run every measurement and print the table; returns 0."""
    volume_mb = 4 if args.quick else args.volume_mb
    sync_seconds = 0.5 if args.quick else args.sync_seconds
    queue_count = min(args.queues, 2_000) if args.quick else args.queues
    work_dir = Path(tempfile.mkdtemp(prefix="orbitmq-bench-", dir=args.dir))
    emit = _printer()
    try:
        sustain_seconds = 1.0 if args.quick else args.sustain_seconds
        bench = StoreBench(work_dir, volume_mb * MEBIBYTE, sync_seconds, queue_count, sustain_seconds)
        emit(f"OrbitMQ store benchmark in {work_dir} ({_filesystem(work_dir)}), {os.cpu_count()} CPUs")
        emit(f"{bench.large_count:,} messages per append run; rates are messages/s and commit-log MiB/s")
        _report(bench, queue_count, 1 if args.quick else args.rounds, emit)
    finally:
        if args.keep:
            emit(f"kept {work_dir}")
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    return 0


def _printer() -> Callable[[str], None]:
    def emit(line: str) -> None:
        print(line, flush=True)

    return emit


def _best(rows: list[Row]) -> Row:
    """The fastest of repeated runs, labelled with every run's rate."""
    best = max(rows, key=lambda row: row.mib_per_s)
    rates = ", ".join(f"{row.mib_per_s:.0f}" for row in rows)
    note = f"best of {len(rows)}: {rates} MiB/s" if len(rows) > 1 else ""
    return Row(best.label, best.messages, best.seconds, best.payload_bytes, note)


def _report(bench: StoreBench, queue_count: int, rounds: int, emit: Callable[[str], None]) -> None:
    _section(f"append, ASYNC_FLUSH, one queue; each run repeated {rounds}x, interleaved with the disk", emit)
    configs = [(body, batched) for body in (SMALL_BODY_BYTES, LARGE_BODY_BYTES) for batched in (False, True)]
    put_rows: dict[tuple[int, bool], list[Row]] = {config: [] for config in configs}
    flush_rows: dict[tuple[int, bool], list[Row]] = {config: [] for config in configs}
    baselines: list[Row] = []
    record_loops: list[Row] = []
    read_store: MessageStore | None = None
    for round_number in range(rounds):
        # The disk first, then each append: page-cache memory is as warm for one as for the others.
        baselines.append(bench.disk_baseline(bench.append_volume_bytes(LARGE_BODY_BYTES)))
        record_loops.append(bench.record_loop(LARGE_BODY_BYTES))
        for body_bytes, batched in configs:
            keep = body_bytes == LARGE_BODY_BYTES and not batched and round_number == rounds - 1
            put_row, flush_row, store = bench.append(body_bytes, batched, keep_open=keep)
            put_rows[(body_bytes, batched)].append(put_row)
            flush_rows[(body_bytes, batched)].append(flush_row)
            if keep:
                read_store = store
    for config in configs:
        emit(_best(put_rows[config]).render())
        emit(_best(flush_rows[config]).render())
    baseline = _best(baselines)
    emit(baseline.render())
    record_loop = _best(record_loops)
    emit(record_loop.render())
    flushed = {batched: _best(flush_rows[(LARGE_BODY_BYTES, batched)]) for batched in (False, True)}
    if read_store is None:
        raise RuntimeError("the 1 KiB append run kept no store to read from")

    _section("read through the ConsumeQueue", emit)
    emit(bench.read(read_store).render())
    bench.discard(read_store)

    _section("SYNC_FLUSH, group commit", emit)
    sync_rows = [bench.sync_writers(count) for count in SYNC_WRITER_COUNTS]
    for row in sync_rows:
        emit(row.render())
    in_flight = bench.sync_in_flight(SYNC_WRITER_COUNTS[-1])
    emit(in_flight.render())

    _section("queue count, ASYNC_FLUSH, put_message", emit)
    per_pass = max(queue_count, bench.large_count // 2)
    few = bench.queues(FEW_QUEUES, per_pass)
    many = bench.queues(queue_count, per_pass)
    for row in few.all() + many.all():
        emit(row.render())

    _section("targets", emit)
    for batched, what in ((False, "put_message"), (True, f"put_messages x{BATCH_SIZE}")):
        ratio = flushed[batched].mib_per_s / baseline.mib_per_s
        emit(_ratio_line(f"1 KiB {what} + flush / disk baseline (MiB/s)", ratio, TARGET_DISK_RATIO))
    emit(
        _reference_line(
            "  ceiling: 1 KiB record loop + flush / disk baseline (MiB/s)",
            record_loop.mib_per_s / baseline.mib_per_s,
        )
    )
    writers = SYNC_WRITER_COUNTS[-1]
    for row, what in ((sync_rows[-1], f"{writers} writer threads"), (in_flight, f"{writers} in flight")):
        scaling = row.messages_per_s / sync_rows[0].messages_per_s
        emit(_ratio_line(f"SYNC_FLUSH {what} / 1 writer (msg/s)", scaling, TARGET_SYNC_SCALING))
    queue_runs = (
        ("sustained, background write-out included", few.sustained, many.sustained),
        ("steady state pass (files exist), puts only", few.steady_puts, many.steady_puts),
        ("steady state pass + close", few.steady_close, many.steady_close),
        ("incl. first-time file creation, puts + flush", few.first_flush, many.first_flush),
        ("after a restart, first puts (load queues)", few.restart, many.restart),
    )
    for what, few_row, many_row in queue_runs:
        spread = many_row.messages_per_s / few_row.messages_per_s
        emit(
            _ratio_line(f"{queue_count:,} / {FEW_QUEUES} queues, {what} (msg/s)", spread, TARGET_QUEUE_RATIO)
        )
