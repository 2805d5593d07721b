"""Delay levels: hold messages in ``SCHEDULE_TOPIC_XXXX`` until their level's delay has passed.

A send (or a consumer send-back) with ``DELAY=L > 0`` is stored in ``SCHEDULE_TOPIC_XXXX``,
queue ``L - 1`` (levels above the configured count are clamped to the last), with
``REAL_TOPIC``/``REAL_QID`` naming its destination (remoting-protocol §6.4). Every message of
one level queue waits the same delay, so each level queue is ordered by due time and only its
head needs looking at.

Theory of operation. One task serves every level. Each round it walks each level queue from
that level's progress offset, re-storing every message whose due time (store time + delay of
the level; the consume queue's tags code holds the same value) has come, and notes the earliest
due time still ahead. It then sleeps until that time or until a put into
``SCHEDULE_TOPIC_XXXX`` wakes it (the store's arrival listener), so a message is moved within
a few milliseconds of its due time and nothing busy-polls.

Re-storing writes a new message to the real topic and queue: same body, flag, sysFlag, born
time and host, reconsume count and properties (``UNIQ_KEY`` included) minus ``DELAY``; it gets
new offsets. The level's progress offset advances only after that put succeeded. The
destination is checked first as a send would be (broker.reput): a message naming a topic
that does not exist, is not writable, lacks the queue or is one only the broker writes is
logged and skipped, never written.

Durability. Progress is ``{"offsetTable": {"<level>": <next queue offset>}}`` in
``<storePathRootDir>/config/delayOffset.json`` (RocketMQ's file and shape), replaced
atomically every ``flushDelayOffsetInterval`` and at stop. A crash therefore redelivers at
most the messages moved since the last write; nothing is lost because the scheduled copies
stay in the commit log until retention.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import orjson

from orbitmq.broker._tasks import cancel_and_wait
from orbitmq.broker.reput import ReputTargets
from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageConst, MessageExt, SysFlag
from orbitmq.protocol import fastjson
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.protocol.properties import decimal_value
from orbitmq.store.message_store import GetStatus, MessageStore, PutMessageRequest, PutStatus

logger = logging.getLogger(__name__)

# Put statuses no retry can change.
_REFUSED = (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DELAY_OFFSET_FILE = "delayOffset.json"
_READ_BATCH = 64
_RETRY_AFTER_FAILURE_MS = 1_000
_HOST_V6_FLAGS = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6
# Read outcomes that mean "these entries are gone or unreadable": move past them.
_SKIP_STATUSES = frozenset(
    {
        GetStatus.OFFSET_TOO_SMALL,
        GetStatus.OFFSET_OVERFLOW_BADLY,
        GetStatus.NO_MATCHED_MESSAGE,
        GetStatus.MESSAGE_WAS_REMOVING,
        GetStatus.OFFSET_FOUND_NULL,
    }
)


def clamp_delay_level(level: int, level_count: int) -> int:
    """The level actually used: levels above the configured count wait as long as the last."""
    return min(level, level_count)


def to_schedule(put: PutMessageRequest, level: int, level_count: int) -> None:
    """Rewrite ``put`` in place so that it waits in SCHEDULE_TOPIC_XXXX for ``level``."""
    level = clamp_delay_level(level, level_count)
    put.properties[MessageConst.DELAY_TIME_LEVEL] = str(level)
    put.properties[MessageConst.REAL_TOPIC] = put.topic
    put.properties[MessageConst.REAL_QUEUE_ID] = str(put.queue_id)
    put.topic = SCHEDULE_TOPIC
    put.encoded_properties = None  # the properties changed
    put.queue_id = level - 1
    put.tags_code = None  # the dispatcher computes store time + delay(level)


_LEVEL_DIGITS_MAX = 9
"""Digits read of a DELAY level; a longer (larger) level is :data:`LEVEL_ABOVE_ANY`."""
LEVEL_ABOVE_ANY = 1_000_000_000  # 10 digits
"""A level above every configured one: :func:`clamp_delay_level` makes it the highest."""


def delay_level_of(properties: dict[str, str]) -> int:
    """The DELAY property as a level (0 when absent or not a non-negative decimal number).

    Any run of digits is a level, however long: ``DELAY=2147483647`` asks for more than the
    highest level, and RocketMQ clamps it to that level (:func:`clamp_delay_level`), never
    to "no delay". Leading zeros do not count.
    """
    text = properties.get(MessageConst.DELAY_TIME_LEVEL, "")
    if not (text.isascii() and text.isdigit()):
        return 0
    significant = text.lstrip("0")
    if len(significant) > _LEVEL_DIGITS_MAX:
        return LEVEL_ABOVE_ANY
    return int(significant) if significant else 0


def restore_request(
    message: MessageExt, drop: tuple[str, ...], store_host: tuple[str, int]
) -> PutMessageRequest | None:
    """The put that delivers a held message to its ``REAL_TOPIC``/``REAL_QID``.

    Returns None when the message does not name a valid destination (it is then skipped).
    """
    properties = dict(message.properties)
    real_topic = properties.get(MessageConst.REAL_TOPIC)
    real_queue = properties.get(MessageConst.REAL_QUEUE_ID, "")
    queue_id = decimal_value(real_queue, 10)
    if not real_topic or queue_id is None:
        return None
    for key in drop:
        properties.pop(key, None)
    return PutMessageRequest(
        topic=real_topic,
        queue_id=queue_id,
        body=message.body,
        flag=message.flag,
        properties=properties,
        sys_flag=message.sys_flag & ~_HOST_V6_FLAGS,
        born_timestamp=message.born_timestamp,
        born_host=message.born_host,
        store_host=store_host,
        reconsume_times=message.reconsume_times,
        prepared_transaction_offset=message.prepared_transaction_offset,
    )


class DelayOffsetTable:
    """Next queue offset to deliver, per delay level (pure state)."""

    def __init__(self, offsets: dict[int, int] | None = None) -> None:
        self._offsets: dict[int, int] = dict(offsets or {})
        self.dirty = False

    def get(self, level: int) -> int:
        return self._offsets.get(level, 0)

    def advance(self, level: int, queue_offset: int) -> None:
        if self._offsets.get(level) != queue_offset:
            self._offsets[level] = queue_offset
            self.dirty = True

    def encode(self) -> bytes:
        table = {str(level): offset for level, offset in sorted(self._offsets.items())}
        return orjson.dumps({"offsetTable": table}, option=orjson.OPT_INDENT_2)

    @classmethod
    def decode(cls, data: bytes, where: str) -> DelayOffsetTable:
        """Parse delayOffset.json.

        Raises:
            RemoteProtocolError: the file is not that JSON shape (names ``where``).
        """
        try:
            # RocketMQ's broker writes the levels unquoted (fastjson: ``{1:5}``).
            document = fastjson.loads(data, where)
            table = document["offsetTable"]
            items = list(table.items())
        except (RemoteProtocolError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RemoteProtocolError(f"{where}: not a delay offset table: {exc}") from exc
        offsets: dict[int, int] = {}
        for level_text, offset in items:
            # A damaged entry costs that level's progress (its messages are delivered again),
            # never the start of the broker.
            level = int(level_text) if str(level_text).isdigit() and len(str(level_text)) < 4 else 0
            if (
                level < 1
                or isinstance(offset, bool)
                or not isinstance(offset, int)
                or not 0 <= offset < 1 << 63
            ):
                logger.warning("%s: entry %r: %r skipped", where, str(level_text)[:20], str(offset)[:40])
                continue
            offsets[level] = offset
        return cls(offsets)


class ScheduleService:
    """Moves due messages from the level queues of SCHEDULE_TOPIC_XXXX to their real topics."""

    def __init__(
        self,
        store: MessageStore,
        delay_levels_ms: list[int],
        offsets_path: Path,
        store_host: Callable[[], tuple[str, int]],
        persist_interval_ms: int,
        write_file: Callable[[Path, bytes], None],
        now_ms: Callable[[], int],
        *,
        targets: ReputTargets | None = None,
    ) -> None:
        self._store = store
        self._targets = targets
        self._delays_ms = delay_levels_ms
        self._offsets_path = offsets_path
        self._store_host = store_host
        self._persist_interval_s = persist_interval_ms / 1000
        self._write_file = write_file
        self._now_ms = now_ms
        self.offsets = DelayOffsetTable()
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.delivered_count = 0

    @property
    def level_count(self) -> int:
        return len(self._delays_ms)

    def load(self) -> None:
        """Read delayOffset.json (absent = start every level at 0).

        Raises:
            RemoteProtocolError: the file exists but is not a delay offset table.
        """
        try:
            data = self._offsets_path.read_bytes()
        except FileNotFoundError:
            return
        self.offsets = DelayOffsetTable.decode(data, str(self._offsets_path))

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._tasks = [
            asyncio.create_task(self._run(), name="schedule-delivery"),
            asyncio.create_task(self._persist_loop(), name="schedule-persist"),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []
        await self.persist(force=True)

    async def persist(self, force: bool = False) -> None:
        """Write delayOffset.json when it changed (always with ``force``)."""
        if not (force or self.offsets.dirty):
            return
        self.offsets.dirty = False
        data = self.offsets.encode()
        await asyncio.to_thread(self._write_file, self._offsets_path, data)

    def on_arrival(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        """Store arrival listener: a put into SCHEDULE_TOPIC_XXXX wakes the delivery task."""
        if topic != SCHEDULE_TOPIC or self._loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._wake.set()
        else:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self._persist_interval_s)
            try:
                await self.persist()
            except OSError:
                logger.exception("writing %s failed", self._offsets_path)

    async def _run(self) -> None:
        while True:
            # Cleared before the scan: a put during the scan leaves it set, so nothing is missed.
            self._wake.clear()
            try:
                next_due_ms = await self.deliver_due()
            except Exception:
                logger.exception("delay-level delivery round failed")
                next_due_ms = self._now_ms() + _RETRY_AFTER_FAILURE_MS
            timeout_s = None if next_due_ms is None else max(0, next_due_ms - self._now_ms()) / 1000
            try:
                await asyncio.wait_for(self._wake.wait(), timeout_s)
            except TimeoutError:
                pass

    async def deliver_due(self) -> int | None:
        """Deliver every due message of every level; return the earliest due time still ahead."""
        earliest: int | None = None
        for level in range(1, self.level_count + 1):
            next_due_ms = await self._deliver_level(level)
            if next_due_ms is not None and (earliest is None or next_due_ms < earliest):
                earliest = next_due_ms
        return earliest

    async def _deliver_level(self, level: int) -> int | None:
        queue_id = level - 1
        delay_ms = self._delays_ms[level - 1]
        while True:
            queue_offset = self.offsets.get(level)
            result = self._store.get_messages(SCHEDULE_TOPIC, queue_id, queue_offset, _READ_BATCH)
            status = result.status
            if status in _SKIP_STATUSES:
                logger.warning(
                    "delay level %d: queue offset %d of %s/%d is %s; moving to %d",
                    level, queue_offset, SCHEDULE_TOPIC, queue_id, status.value, result.next_begin_offset,
                )  # fmt: skip
                self.offsets.advance(level, result.next_begin_offset)
                continue
            if status is not GetStatus.FOUND:
                return None
            for buffer, message_queue_offset in zip(result.buffers, result.queue_offsets, strict=True):
                outcome = self._deliver_one(level, buffer, message_queue_offset, delay_ms)
                if outcome is not None:
                    return outcome
                self.offsets.advance(level, message_queue_offset + 1)
            # Let requests run between batches when a backlog is being delivered.
            await asyncio.sleep(0)

    def _deliver_one(
        self, level: int, buffer: bytes | memoryview, queue_offset: int, delay_ms: int
    ) -> int | None:
        """Deliver one record if due; return its due time if not, None once it is handled."""
        try:
            message, _ = decode_stored_message(buffer)
        except RemoteProtocolError:
            logger.error(
                "delay level %d: undecodable record at queue offset %d; skipped", level, queue_offset
            )
            return None
        due_ms = message.store_timestamp + delay_ms
        if due_ms > self._now_ms():
            return due_ms
        request = restore_request(message, (MessageConst.DELAY_TIME_LEVEL,), self._store_host())
        if request is None:
            logger.error(
                "delay level %d: message %s at queue offset %d has no REAL_TOPIC/REAL_QID; skipped",
                level, message.msg_id, queue_offset,
            )  # fmt: skip
            return None
        if self._targets is not None and not self._targets.admit(
            "delay", message.msg_id, request.topic, request.queue_id
        ):
            return None
        put = self._store.put_message(request)
        if put.status in _REFUSED:
            # The store will never take this message: retrying would hold up the whole level.
            logger.error(
                "delay level %d: %s to %s/%d refused by the store (%s %s); skipped",
                level, message.msg_id, request.topic, request.queue_id, put.status.value, put.remark,
            )  # fmt: skip
            return None
        if put.status is not PutStatus.PUT_OK:
            logger.error(
                "delay level %d: re-storing %s to %s/%d failed: %s %s",
                level, message.msg_id, request.topic, request.queue_id, put.status.value, put.remark,
            )  # fmt: skip
            return self._now_ms() + _RETRY_AFTER_FAILURE_MS
        self.delivered_count += 1
        return None


def read_delay_offsets(path: Path) -> DelayOffsetTable:
    """The delay offset table in ``path`` (empty when absent); for tools and tests.

    Raises:
        RemoteProtocolError: the file is not a delay offset table.
    """
    try:
        return DelayOffsetTable.decode(path.read_bytes(), str(path))
    except FileNotFoundError:
        return DelayOffsetTable()
