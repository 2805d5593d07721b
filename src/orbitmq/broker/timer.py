"""Timed messages: deliver at any millisecond up to ``timerMaxDelaySec`` ahead (RocketMQ 5 style).

A send carrying ``TIMER_DELIVER_MS`` (absolute epoch ms), ``TIMER_DELAY_SEC``,
``TIMER_DELAY_MS`` or Aliyun's ``__STARTDELIVERTIME`` (absolute ms) and due in the future is
stored in the system topic ``rmq_sys_wheel_timer`` (queue 0) with ``REAL_TOPIC``/``REAL_QID``
and ``TIMER_OUT_MS`` = its due time. One already due is stored in its topic at once.

Theory of operation. Two tasks share one :class:`~orbitmq.store.timer_wheel.TimerStore`:

- *enqueue* reads the timer topic from ``enqueue_queue_offset`` (woken by the store's arrival
  listener) and adds one TimerLog record per message to the wheel slot of its due time. A
  timer whose slot was already loaded also goes straight onto the in-memory heap.
- *dequeue* loads whole slots into a heap one slot ahead of time (``next_load_ms`` is the start
  of the next slot to load), pops every timer whose due time has come, reads its message from
  the CommitLog and stores it to its real topic and queue (``TIMER_OUT_MS`` removed; same
  ``UNIQ_KEY``, body, flag and born info), once its destination passed the checks a send
  would get (broker.reput; a message failing them is logged and dropped). It sleeps until the earlier of the heap's first due
  time and the next slot load, or until an enqueue wakes it. A timer is never delivered before
  its due time; memory holds only the timers of the slots loaded so far.

Recall. RECALL_MESSAGE stores a *marker* in the timer topic: a timer due at the same
millisecond as the message it cancels, carrying ``TIMER_DEL_UNIQKEY`` = ``topic+UNIQ_KEY``.
Timers due at one millisecond always leave the heap in one batch, so a message and its marker
are delivered together; the marker is not delivered and cancels the message.

Progress. ``dequeue_ms`` = min(first due time on the heap, ``next_load_ms``): every timer due
before it has been delivered. The checkpoint (every ``timerFlushIntervalMs`` and at stop)
stores it with ``enqueue_queue_offset``; at start, slot loading resumes at the slot of
``dequeue_ms`` and skips timers due before it, so a clean restart redelivers only timers due
exactly at ``dequeue_ms``, and a crash restart (see TimerStore) at most what followed the last
checkpoint. Timers due in the past are clamped to "now" when enqueued, so their slot is always
inside the wheel's window.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from orbitmq.broker._tasks import cancel_and_wait
from orbitmq.broker.reput import ReputTargets
from orbitmq.broker.schedule import restore_request
from orbitmq.errors import CorruptRecordError, RemoteProtocolError
from orbitmq.model.message import MessageConst
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.protocol.names import shorten
from orbitmq.protocol.properties import decimal_value
from orbitmq.store.message_store import GetStatus, MessageStore, PutMessageRequest, PutStatus
from orbitmq.store.timer_wheel import TimerStore

logger = logging.getLogger(__name__)

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_OUT_MS = "TIMER_OUT_MS"
_READ_BATCH = 256
_DELIVER_BATCH = 64
_RETRY_AFTER_FAILURE_MS = 1_000
TIMER_LOG_SEGMENT_BYTES = 32 * 1024 * 1024  # one million records


def timer_due_ms(properties: dict[str, str], now_ms: int) -> int | None:
    """The due time a message asks for, or None when it carries no timer property.

    Raises:
        ValueError: a timer property is not a non-negative integer (the text names it).
    """
    for key, relative_ms in (
        (MessageConst.TIMER_DELIVER_MS, None),
        (MessageConst.START_DELIVER_TIME, None),
        (MessageConst.TIMER_DELAY_MS, 1),
        (MessageConst.TIMER_DELAY_SEC, 1000),
    ):
        text = properties.get(key)
        if text is None:
            continue
        value = decimal_value(text.strip())
        if value is None:
            raise ValueError(f"timer property {key}={shorten(text)!r} is not a non-negative integer")
        return value if relative_ms is None else now_ms + value * relative_ms
    return None


def recall_key(topic: str, uniq_key: str | None) -> str:
    """What a recall marker's ``TIMER_DEL_UNIQKEY`` says: the topic and the message's UNIQ_KEY."""
    return f"{topic}+{uniq_key or ''}"


def recall_marker(
    topic: str, uniq_key: str, due_ms: int, store_host: tuple[str, int], now_ms: int
) -> PutMessageRequest:
    """The timer-topic message that cancels ``uniq_key`` of ``topic`` due at ``due_ms``."""
    put = PutMessageRequest(
        topic=topic,
        queue_id=0,
        body=b"0",
        properties={
            MessageConst.TIMER_DEL_UNIQKEY: recall_key(topic, uniq_key),
            MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key,
            MessageConst.TAGS: "_RECALL_TAG_",
        },
        born_timestamp=now_ms,
        store_host=store_host,
    )
    to_timer(put, due_ms)
    return put


def to_timer(put: PutMessageRequest, due_ms: int) -> None:
    """Rewrite ``put`` in place so that it waits in the timer topic until ``due_ms``."""
    put.properties[MessageConst.REAL_TOPIC] = put.topic
    put.properties[MessageConst.REAL_QUEUE_ID] = str(put.queue_id)
    put.properties[TIMER_OUT_MS] = str(due_ms)
    put.encoded_properties = None  # the properties changed
    put.topic = TIMER_TOPIC
    put.queue_id = 0


class TimerService:
    """Enqueue and dequeue tasks over one TimerStore (see the module docstring)."""

    def __init__(
        self,
        store: MessageStore,
        directory: Path,
        precision_ms: int,
        max_delay_ms: int,
        flush_interval_ms: int,
        store_host: Callable[[], tuple[str, int]],
        now_ms: Callable[[], int],
        *,
        targets: ReputTargets | None = None,
    ) -> None:
        self._store = store
        self._targets = targets
        slot_count = -(-2 * max_delay_ms // precision_ms) + 2
        self.timers = TimerStore(directory, precision_ms, slot_count, TIMER_LOG_SEGMENT_BYTES)
        self._precision_ms = precision_ms
        self._flush_interval_s = flush_interval_ms / 1000
        self._store_host = store_host
        self._now_ms = now_ms
        self._heap: list[tuple[int, int, int]] = []  # (due ms, commit-log offset, size)
        self.enqueue_queue_offset = 0
        self._next_load_ms = 0
        self._skip_before_ms = 0
        self._enqueue_wake = asyncio.Event()
        self._dequeue_wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.delivered_count = 0
        self.recalled_count = 0
        self.on_delivered: Callable[[PutMessageRequest, int], None] | None = None

    @property
    def dequeue_ms(self) -> int:
        """Every timer due before this has been delivered."""
        return min(self._heap[0][0], self._next_load_ms) if self._heap else self._next_load_ms

    @property
    def pending_in_memory(self) -> int:
        return len(self._heap)

    def open(self) -> None:
        """Load or rebuild the timer files (blocking; run it on a thread)."""
        checkpoint = self.timers.open()
        self.enqueue_queue_offset = checkpoint.enqueue_queue_offset
        start_ms = checkpoint.dequeue_ms or self._now_ms()
        self._skip_before_ms = checkpoint.dequeue_ms
        self._next_load_ms = start_ms - start_ms % self._precision_ms

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._tasks = [
            asyncio.create_task(self._enqueue_loop(), name="timer-enqueue"),
            asyncio.create_task(self._dequeue_loop(), name="timer-dequeue"),
            asyncio.create_task(self._checkpoint_loop(), name="timer-checkpoint"),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []
        self.timers.close(self.enqueue_queue_offset, self.dequeue_ms)

    def on_arrival(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        """Store arrival listener: a put into the timer topic wakes the enqueue task."""
        if topic != TIMER_TOPIC or self._loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._enqueue_wake.set()
        else:
            self._loop.call_soon_threadsafe(self._enqueue_wake.set)

    # -- enqueue ------------------------------------------------------------------------------

    async def _enqueue_loop(self) -> None:
        while True:
            self._enqueue_wake.clear()
            try:
                while await self.enqueue_available():
                    await asyncio.sleep(0)  # let requests run between batches
            except Exception:
                logger.exception("timer enqueue round failed at queue offset %d", self.enqueue_queue_offset)
                await asyncio.sleep(_RETRY_AFTER_FAILURE_MS / 1000)
                continue
            await self._enqueue_wake.wait()

    async def enqueue_available(self) -> bool:
        """Enqueue one batch from the timer topic; True when there may be more."""
        result = self._store.get_messages(TIMER_TOPIC, 0, self.enqueue_queue_offset, _READ_BATCH, 1 << 30)
        if result.status is not GetStatus.FOUND:
            if result.next_begin_offset > self.enqueue_queue_offset and result.status in (
                GetStatus.OFFSET_TOO_SMALL,
                GetStatus.MESSAGE_WAS_REMOVING,
                GetStatus.OFFSET_FOUND_NULL,
            ):
                self.enqueue_queue_offset = result.next_begin_offset
                return True
            return False
        now = self._now_ms()
        woke = False
        for buffer, queue_offset, commit_log_offset in zip(
            result.buffers, result.queue_offsets, result.commit_log_offsets, strict=True
        ):
            # Never filtered by dequeue_ms: a message read here has not been delivered yet
            # (or, after a crash, maybe was: at-least-once).
            due_ms = self._due_of(buffer, queue_offset)
            if due_ms is not None:
                woke |= self._add(commit_log_offset, len(buffer), max(due_ms, now))
            self.enqueue_queue_offset = queue_offset + 1
        if woke:
            self._dequeue_wake.set()
        return True

    def _due_of(self, buffer: bytes | memoryview, queue_offset: int) -> int | None:
        try:
            message, _ = decode_stored_message(buffer, decode_body=False)
        except RemoteProtocolError:
            logger.error("timer topic queue offset %d: undecodable record; skipped", queue_offset)
            return None
        text = message.properties.get(TIMER_OUT_MS, "")
        due_ms = decimal_value(text)
        if due_ms is None:
            logger.error(
                "timer topic queue offset %d: %s=%r is not a time; skipped",
                queue_offset,
                TIMER_OUT_MS,
                shorten(text),
            )
        return due_ms

    def _add(self, commit_log_offset: int, size: int, due_ms: int) -> bool:
        """Record a timer; True when it also went onto the heap (its slot is already loaded)."""
        self.timers.add(commit_log_offset, size, due_ms)
        if due_ms - due_ms % self._precision_ms < self._next_load_ms:
            heapq.heappush(self._heap, (due_ms, commit_log_offset, size))
            return True
        return False

    # -- dequeue ------------------------------------------------------------------------------

    async def _dequeue_loop(self) -> None:
        while True:
            self._dequeue_wake.clear()
            try:
                wake_at_ms = await self.dequeue_due()
            except Exception:
                logger.exception("timer dequeue round failed")
                wake_at_ms = self._now_ms() + _RETRY_AFTER_FAILURE_MS
            timeout_s = max(0, wake_at_ms - self._now_ms()) / 1000
            try:
                await asyncio.wait_for(self._dequeue_wake.wait(), timeout_s)
            except TimeoutError:
                pass

    async def dequeue_due(self) -> int:
        """Load the slots whose time is near, deliver what is due; return when to look again."""
        while True:
            now = self._now_ms()
            # Load a slot one slot ahead of its start, so its timers are on the heap in time.
            while self._next_load_ms <= now + self._precision_ms:
                self._load_slot(self._next_load_ms)
                self._next_load_ms += self._precision_ms
            due: list[tuple[int, int, int]] = []
            while self._heap and self._heap[0][0] <= now and len(due) < _DELIVER_BATCH * 8:
                due.append(heapq.heappop(self._heap))
            # Never split one millisecond across batches: a recall marker must meet its message.
            while due and self._heap and self._heap[0][0] == due[-1][0]:
                due.append(heapq.heappop(self._heap))
            if not due:
                next_load_at = self._next_load_ms - self._precision_ms
                return min(self._heap[0][0], next_load_at) if self._heap else next_load_at
            self._deliver(due)
            await asyncio.sleep(0)

    def _load_slot(self, slot_start_ms: int) -> None:
        for record in self.timers.slot_records(slot_start_ms):
            if record.due_ms >= self._skip_before_ms:
                heapq.heappush(self._heap, (record.due_ms, record.commit_log_offset, record.size))

    def _deliver(self, due: list[tuple[int, int, int]]) -> None:
        """Store each due message to its real queue, grouped into per-queue batches."""
        groups: dict[tuple[str, int], list[tuple[PutMessageRequest, tuple[int, int, int]]]] = {}
        store_host = self._store_host()
        restored: list[tuple[PutMessageRequest, tuple[int, int, int]]] = []
        recalled: set[str] = set()
        for timer in due:
            due_ms, commit_log_offset, size = timer
            request = self._restore(commit_log_offset, size, store_host)
            if request is None:
                continue
            marker = request.properties.get(MessageConst.TIMER_DEL_UNIQKEY)
            if marker is not None:
                recalled.add(marker)
            elif self._targets is None or self._targets.admit(
                "timer", request.properties.get("UNIQ_KEY", ""), request.topic, request.queue_id
            ):
                restored.append((request, timer))
        for request, timer in restored:
            if (
                recall_key(request.topic, request.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
                in recalled
            ):
                logger.info(
                    "timed message %s to %s was recalled", request.properties.get("UNIQ_KEY"), request.topic
                )
                self.recalled_count += 1
                continue
            groups.setdefault((request.topic, request.queue_id), []).append((request, timer))
        for (topic, queue_id), members in groups.items():
            for start in range(0, len(members), _DELIVER_BATCH):
                chunk = members[start : start + _DELIVER_BATCH]
                put = self._store.put_messages([request for request, _ in chunk])
                if put.status is PutStatus.PUT_OK:
                    self.delivered_count += len(chunk)
                    if self.on_delivered is not None:
                        for request, timer in chunk:
                            self.on_delivered(request, timer[0])
                    continue
                if put.status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
                    # The store will never take the batch: deliver its members one by one and
                    # skip only those refused (a retry would refuse them again, forever).
                    for request, timer in chunk:
                        alone = self._store.put_message(request)
                        if alone.status is PutStatus.PUT_OK:
                            self.delivered_count += 1
                            if self.on_delivered is not None:
                                self.on_delivered(request, timer[0])
                        elif alone.status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
                            logger.error(
                                "timed message to %s/%d refused by the store (%s %s); skipped",
                                topic, queue_id, alone.status.value, alone.remark,
                            )  # fmt: skip
                        else:
                            retry_ms = self._now_ms() + _RETRY_AFTER_FAILURE_MS
                            heapq.heappush(self._heap, (retry_ms, timer[1], timer[2]))
                    continue
                logger.error(
                    "delivering %d timed messages to %s/%d failed: %s %s; retrying in %d ms",
                    len(chunk), topic, queue_id, put.status.value, put.remark, _RETRY_AFTER_FAILURE_MS,
                )  # fmt: skip
                for _, timer in chunk:
                    heapq.heappush(self._heap, (self._now_ms() + _RETRY_AFTER_FAILURE_MS, timer[1], timer[2]))

    def _restore(
        self, commit_log_offset: int, size: int, store_host: tuple[str, int]
    ) -> PutMessageRequest | None:
        raw = self._store.read_message(commit_log_offset, size)
        if raw is None:
            logger.error("timed message at commit-log offset %d is gone; skipped", commit_log_offset)
            return None
        try:
            message, _ = decode_stored_message(raw)
        except RemoteProtocolError:
            logger.error("timed message at commit-log offset %d is undecodable; skipped", commit_log_offset)
            return None
        request = restore_request(message, (TIMER_OUT_MS,), store_host)
        if request is None:
            logger.error("timed message %s has no REAL_TOPIC/REAL_QID; skipped", message.msg_id)
        return request

    # -- checkpoint ---------------------------------------------------------------------------

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(self._flush_interval_s)
            try:
                await self.checkpoint()
            except (OSError, CorruptRecordError):
                logger.exception("timer checkpoint failed")

    async def checkpoint(self) -> None:
        """Make the current progress durable (fsyncs run on a thread)."""
        prepared = self.timers.prepare_checkpoint(self.enqueue_queue_offset, self.dequeue_ms)
        await asyncio.to_thread(self.timers.write_checkpoint, prepared)
