"""PopService: the POP engine's I/O shell around the pure state (``broker.pop.state``).

It owns the :class:`~orbitmq.broker.pop.state.PopStateTable`, reads messages from the store,
lets :func:`~orbitmq.broker.pop.selection.select` decide, writes the resulting events to the
journal (``broker.pop.journal``), applies them, and answers. Both protocols use it: the
remoting handlers (``broker.handlers.pop``) and, through them, the gRPC proxy.

A pop, one request (no await between reading the state and applying the events, so two pops
on one event loop never hand out the same message):

1. For each queue asked for (``queue_id`` -1: every readable queue, a different one first
   each time), a group new to the queue starts at its committed consumer offset, else as the
   init mode says. A concurrent (not FIFO) pop also reads the queue of the group's pop retry
   topic ``%RETRY%<group>_<topic>`` when it exists, as RocketMQ's PopMessageProcessor does:
   first in :data:`POP_FROM_RETRY_PERCENT` of the pops, else after the topic's queues when
   they left room in the batch. A retry topic starts at its first message.
2. Deliveries past their deadline are expired: those whose deliveries reached the group's
   maximum (``retryMaxTimes + 1``) are stored in ``%DLQ%<group>`` and finished; an orderly
   one is offered again from its queue; any other is revived into the group's pop retry topic
   (``broker.pop.revive``) and finished (offered again from its queue only when that store
   failed).
3. Visible-again deliveries and fresh messages from the cursor (tags code, then the full
   filter) are offered to ``select``.
4. The events go to the journal as one message, then into the state; the group's consumer
   offset becomes each queue's done-below offset. Under SYNC_FLUSH the answer waits for the
   journal message's flush.

With nothing to deliver, a pop with a poll time waits until a message arrives on the topic or
its retry topic (the store's arrival listener, ``broker.pop.waiting``), a delivery of the group
on the topic becomes visible again, or the poll time ends, and tries once more each time. A pop that repeats an ``attempt_id``
(a push consumer retrying a receive that failed on the way back) gets the same messages again
while those deliveries are still in flight, rather than a second batch.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from orbitmq.broker._tasks import cancel_and_wait
from orbitmq.broker.offsets import ConsumerOffsetTable
from orbitmq.broker.pop.journal import JOURNAL_TOPIC, encode_events
from orbitmq.broker.pop.messages import DeadLetters, message_group_of, read_fresh, read_one
from orbitmq.broker.pop.persistence import load_state, snapshot_bytes
from orbitmq.broker.pop.results import PopJournalError, PoppedMessage, PopRequest, PopResult, PopStatus
from orbitmq.broker.pop.revive import RetryTopics, reconsume_times_of
from orbitmq.broker.pop.selection import Candidate, select
from orbitmq.broker.pop.state import (
    AckEvent,
    ChangeEvent,
    DoneEvent,
    Event,
    HandleStatus,
    InitEvent,
    PopEvent,
    PopStateTable,
    QueueKey,
    QueuePopState,
)
from orbitmq.broker.pop.waiting import PopWaiters
from orbitmq.broker.reput import ReputTargets
from orbitmq.broker.subscriptions import SubscriptionGroupTable
from orbitmq.broker.topics import TopicConfigTable
from orbitmq.protocol.message_codec import with_reconsume_times
from orbitmq.protocol.pop import INIT_MODE_MIN, pop_retry_topic
from orbitmq.store.message_store import MessageStore, PutMessageRequest, PutStatus

__all__ = ["PopJournalError", "PopRequest", "PopResult", "PopService", "PopStatus", "PoppedMessage"]

logger = logging.getLogger(__name__)

FIFO_SCAN_MAX = 256
"""Fresh entries one FIFO pop examines per queue (messages of busy groups are held back)."""
POP_FROM_RETRY_PERCENT = 20
"""Share of concurrent pops that read the retry topic first (RocketMQ's popFromRetryProbability)."""
_ATTEMPT_CACHE_MAX = 4096


@dataclass(slots=True)
class _Plan:
    """What one pass over the queues decided, before it is journaled."""

    events: list[Event] = field(default_factory=list)
    messages: list[PoppedMessage] = field(default_factory=list)
    rest_num: int = 0
    next_visible_ms: int | None = None


class PopService:
    """The POP engine of one broker (see the module docstring)."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigTable,
        groups: SubscriptionGroupTable,
        offsets: ConsumerOffsetTable,
        snapshot_path: Path,
        settings: tuple[bool, int, int],
        store_host: Callable[[], tuple[str, int]],
        write_file: Callable[[Path, bytes], None],
        now_ms: Callable[[], int],
    ) -> None:
        self._store = store
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._snapshot_path = snapshot_path
        self._auto_create_group, self._default_retry_max, self._snapshot_interval_ms = settings
        self._store_host = store_host
        self._write_file = write_file
        self._now_ms = now_ms
        self.table = PopStateTable()
        self._journal_next = 0  # the journal queue offset after the last message applied
        self._snapshot_journal_offset = -1
        self._rotation = 0
        self._attempts: OrderedDict[tuple[str, str], list[tuple[QueueKey, int, int]]] = OrderedDict()
        self._waiters = PopWaiters()
        self._task: asyncio.Task[None] | None = None
        self._dead_letters = DeadLetters(store, topics, store_host, ReputTargets(topics))
        self._retry_topics = RetryTopics(store, topics, store_host, ReputTargets(topics))
        self._random = random.Random()
        self._stopping = False

    # -- lifecycle ----------------------------------------------------------------------------

    def load(self) -> None:
        """Load the snapshot and replay the journal after it (blocking; before the server starts)."""
        self.table, self._journal_next = load_state(self._store, self._snapshot_path)
        self._snapshot_journal_offset = self._journal_next
        for (group, topic, queue_id), state in self.table.items():
            self._offsets.commit(group, topic, queue_id, state.done_below())

    def on_topics_changed(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the engine creates a topic (a DLQ or a pop retry topic)."""
        self._dead_letters.on_topics_changed = callback
        self._retry_topics.on_topics_changed = callback

    async def start(self) -> None:
        self._waiters.bind(asyncio.get_running_loop())
        self._task = asyncio.create_task(self._run(), name="pop-snapshot")

    def release_waiters(self) -> None:
        """Shutdown begins: every waiting pop answers now with what it has (nothing)."""
        self._stopping = True
        self._waiters.wake_all()

    async def stop(self) -> None:
        self.release_waiters()
        await cancel_and_wait([self._task])
        self._task = None
        await self.write_snapshot()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._snapshot_interval_ms / 1000)
            try:
                await self.write_snapshot()
            except Exception:
                logger.exception("writing the POP snapshot failed")

    async def write_snapshot(self) -> None:
        """Write ``popState.json`` when journal messages were applied since the last one."""
        if self._journal_next == self._snapshot_journal_offset:
            return
        journal_offset = self._journal_next
        data = snapshot_bytes(self.table, journal_offset)  # on the loop: a consistent cut
        await asyncio.to_thread(self._write_file, self._snapshot_path, data)
        self._snapshot_journal_offset = journal_offset

    def on_arrival(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        """The store's arrival listener; safe to call from any thread."""
        self._waiters.on_arrival(topic, queue_id, max_queue_offset)

    # -- pop ----------------------------------------------------------------------------------

    def max_attempts(self, group: str) -> int:
        """Deliveries of one message before it goes to the DLQ (``retryMaxTimes + 1``)."""
        config = self._groups.find_or_create(group, self._auto_create_group)
        return (config.retry_max_times if config is not None else self._default_retry_max) + 1

    async def pop(self, request: PopRequest) -> PopResult:
        """Pop for ``request``; with nothing to deliver, wait up to its poll time (see the module doc).

        Raises:
            PopJournalError: the journal could not be written (nothing was handed out).
        """
        deadline_ms = self._now_ms() + max(request.poll_ms, 0)
        topics = (
            (request.topic,)
            if request.fifo
            else (request.topic, pop_retry_topic(request.group, request.topic))
        )
        if request.poll_ms > 0:
            self._waiters.watch(topics)
        while True:
            result, next_visible_ms, flush = self._pop_once(request)
            if result.messages:
                if flush is not None:
                    await asyncio.wrap_future(flush)
                return result
            now_ms = self._now_ms()
            if now_ms >= deadline_ms or self._stopping:
                return result
            wake_ms = deadline_ms if next_visible_ms is None else min(deadline_ms, next_visible_ms)
            await self._waiters.wait(topics, max(wake_ms - now_ms, 1))

    def _pop_once(self, request: PopRequest) -> tuple[PopResult, int | None, Future[bool] | None]:
        now_ms = self._now_ms()
        pop_time_ms = self.table.next_pop_time(now_ms)
        result = PopResult(PopStatus.NO_NEW_MSG, pop_time_ms, request.invisible_ms)
        repeated = self._repeat_attempt(request, now_ms)
        if repeated is not None:
            return repeated, None, None
        topic_config = self._topics.get(request.topic)
        if topic_config is None:
            return result, None, None
        if request.queue_id >= 0:
            queue_ids = [request.queue_id]
        else:
            count = max(topic_config.read_queue_nums, 1)
            self._rotation = (self._rotation + 1) % count
            queue_ids = [(self._rotation + index) % count for index in range(count)]
        plan = _Plan()
        max_attempts = self.max_attempts(request.group)
        retry_first = not request.fifo and self._random.randrange(100) < POP_FROM_RETRY_PERCENT
        if retry_first:
            self._plan_retry(request, now_ms, pop_time_ms, max_attempts, plan)
        for queue_id in queue_ids:
            if len(plan.messages) >= request.batch_max:
                break
            self._plan_queue(request, request.topic, queue_id, now_ms, pop_time_ms, max_attempts, plan)
        if not request.fifo and not retry_first:
            # After the topic's queues: what their expired deliveries were revived into is read now.
            self._plan_retry(request, now_ms, pop_time_ms, max_attempts, plan)
        if not plan.events:
            return result, plan.next_visible_ms, None
        flush = self._journal(plan.events)
        self._apply(plan.events)
        result.messages = plan.messages
        result.rest_num = plan.rest_num
        if plan.messages:
            result.status = PopStatus.FOUND
            self._remember_attempt(request, pop_time_ms, plan.messages)
        return result, plan.next_visible_ms, flush

    def _plan_retry(
        self, request: PopRequest, now_ms: int, pop_time_ms: int, max_attempts: int, plan: _Plan
    ) -> None:
        """Plan the queues of the group's pop retry topic, when it exists and the batch has room."""
        retry_topic = pop_retry_topic(request.group, request.topic)
        retry_config = self._topics.get(retry_topic)
        if retry_config is None:
            return
        for queue_id in range(retry_config.read_queue_nums):
            if len(plan.messages) >= request.batch_max:
                break
            self._plan_queue(request, retry_topic, queue_id, now_ms, pop_time_ms, max_attempts, plan)

    def _plan_queue(
        self,
        request: PopRequest,
        topic: str,
        queue_id: int,
        now_ms: int,
        pop_time_ms: int,
        max_attempts: int,
        plan: _Plan,
    ) -> None:
        key: QueueKey = (request.group, topic, queue_id)
        state = self.table.get(key)
        min_offset = self._store.get_min_queue_offset(topic, queue_id)
        max_offset = self._store.get_max_queue_offset(topic, queue_id)
        if state is None:
            cursor = self._initial_cursor(request, topic, queue_id, min_offset, max_offset)
            plan.events.append(InitEvent(key, cursor))
            state = QueuePopState(cursor)  # planning copy; the table gets it from the event
        records: dict[int, bytes] = {}
        finished = self._expire(request, key, state, now_ms, max_attempts, records)
        again: list[Candidate] = []
        # A held-back FIFO message whose group is still busy cannot go out in this pop: its group
        # is known from ``held``, so its record is not read (an orderly consumer's every ack wakes
        # the pops waiting on the topic, and a deep backlog holds hundreds of messages per queue).
        busy = state.busy_groups(now_ms) if request.fifo and state.held else set()
        for offset in sorted([*state.visible_inflight(now_ms), *state.held]):
            if offset in finished:
                continue
            held_group = state.held.get(offset)
            if held_group is not None and held_group in busy:
                again.append(Candidate(offset, held_group, fresh=False))
                continue
            record = records.get(offset) or read_one(self._store, topic, queue_id, offset)
            if record is None:
                finished.append(offset)  # gone from the store (retention): nothing to deliver
                continue
            records[offset] = record
            again.append(Candidate(offset, message_group_of(record, request.fifo), fresh=False))
        if finished:
            plan.events.append(DoneEvent(key, tuple(finished)))
        room = request.batch_max - len(plan.messages)
        wanted = FIFO_SCAN_MAX if request.fifo else room
        fresh, scan_end = read_fresh(
            self._store, topic, queue_id, max(state.cursor, min_offset), wanted, request.message_filter,
            request.fifo, records,
        )  # fmt: skip
        selection = select(state, again, fresh, scan_end, room, now_ms, request.fifo)
        visible_at_ms = pop_time_ms + request.invisible_ms
        if selection.delivered or selection.held or selection.scan_to > state.cursor:
            plan.events.append(
                PopEvent(
                    key,
                    pop_time_ms,
                    visible_at_ms,
                    tuple(selection.delivered),
                    selection.scan_to,
                    tuple(selection.held),
                    selection.groups,
                )
            )
        for offset in selection.delivered:
            previous = state.inflight.get(offset)
            attempt = previous.attempt + 1 if previous is not None else 1
            plan.messages.append(
                PoppedMessage(topic, queue_id, offset, attempt, _delivered(records[offset], attempt))
            )
        plan.rest_num += max(max_offset - selection.scan_to, 0)
        waiting = [d.visible_at_ms for d in state.inflight.values() if d.visible_at_ms > now_ms]
        if selection.delivered:
            waiting.append(visible_at_ms)
        if waiting:
            earliest = min(waiting)
            if plan.next_visible_ms is None or earliest < plan.next_visible_ms:
                plan.next_visible_ms = earliest

    def _initial_cursor(
        self, request: PopRequest, topic: str, queue_id: int, min_offset: int, max_offset: int
    ) -> int:
        committed = self._offsets.query(request.group, topic, queue_id)
        if committed is not None:
            return max(committed, min_offset)
        if request.init_mode == INIT_MODE_MIN or min_offset == 0 or topic != request.topic:
            # A retry topic is read from its first message, whatever the init mode says.
            # RocketMQ starts a new group at 0 while the queue still holds its first message.
            return min_offset
        return max_offset

    def _expire(
        self,
        request: PopRequest,
        key: QueueKey,
        state: QueuePopState,
        now_ms: int,
        max_attempts: int,
        records: dict[int, bytes],
    ) -> list[int]:
        """Dead-letter the exhausted visible-again deliveries and revive the concurrent ones
        through the pop retry topic; return the offsets finished. The records of the rest, to be
        offered again from their queue, are left in ``records``."""
        group, topic, queue_id = key
        finished: list[int] = []
        for offset in state.visible_inflight(now_ms):
            delivery = state.inflight[offset]
            if delivery.orderly and delivery.attempt < max_attempts:
                continue  # read again by the caller, unless its group is still busy
            record = read_one(self._store, topic, queue_id, offset)
            if record is None:
                continue  # the caller finds it gone too
            deliveries = reconsume_times_of(record) + delivery.attempt
            if deliveries >= max_attempts:
                if self._dead_letters.store(group, record, deliveries, request.topic):
                    finished.append(offset)
                continue
            records[offset] = record
            if self._retry_topics.revive(group, request.topic, record, deliveries, delivery.pop_time_ms):
                finished.append(offset)
        return finished

    # -- attempt ids --------------------------------------------------------------------------

    def _remember_attempt(self, request: PopRequest, pop_time_ms: int, messages: list[PoppedMessage]) -> None:
        if not request.attempt_id:
            return
        cache_key = (request.group, request.attempt_id)
        self._attempts[cache_key] = [
            ((request.group, m.topic, m.queue_id), m.queue_offset, pop_time_ms) for m in messages
        ]
        self._attempts.move_to_end(cache_key)
        while len(self._attempts) > _ATTEMPT_CACHE_MAX:
            self._attempts.popitem(last=False)

    def _repeat_attempt(self, request: PopRequest, now_ms: int) -> PopResult | None:
        """The earlier answer to the same attempt id, while all of it is still in flight."""
        if not request.attempt_id:
            return None
        remembered = self._attempts.get((request.group, request.attempt_id))
        if not remembered:
            return None
        messages: list[PoppedMessage] = []
        for key, offset, pop_time_ms in remembered:
            state = self.table.get(key)
            if state is None or state.check(offset, pop_time_ms, now_ms) is not HandleStatus.VALID:
                return None
            record = read_one(self._store, key[1], key[2], offset)
            if record is None:
                return None
            attempt = state.inflight[offset].attempt
            messages.append(PoppedMessage(key[1], key[2], offset, attempt, _delivered(record, attempt)))
        first = self.table.get(remembered[0][0])
        assert first is not None
        delivery = first.inflight[remembered[0][1]]
        result = PopResult(
            PopStatus.FOUND, delivery.pop_time_ms, delivery.visible_at_ms - delivery.pop_time_ms
        )
        result.messages = messages
        result.repeated = True
        return result

    # -- ack and change -----------------------------------------------------------------------

    async def ack(self, key: QueueKey, acks: list[tuple[int, int]]) -> list[HandleStatus]:
        """Finish deliveries named by (offset, pop time); one status per entry, in order.

        Raises:
            PopJournalError: the journal could not be written (nothing was acknowledged).
        """
        now_ms = self._now_ms()
        state = self.table.get(key)
        statuses = [
            state.check(offset, pop_time_ms, now_ms) if state is not None else HandleStatus.UNKNOWN
            for offset, pop_time_ms in acks
        ]
        valid = tuple(
            pair for pair, status in zip(acks, statuses, strict=True) if status is HandleStatus.VALID
        )
        if valid:
            assert state is not None
            acked_groups = {state.inflight[offset].message_group for offset, _ in valid}
            events: list[Event] = [AckEvent(key, valid)]
            flush = self._journal(events)
            self._apply(events)
            after = self.table.get(key)
            if after is not None and after.held:
                # A FIFO message group this ack freed (its last message in flight) with messages
                # held back behind it: the pops waiting for them are woken now, as RocketMQ's ack
                # of an orderly pop notifies its long polling, not at their poll deadline.
                freed = acked_groups - after.busy_groups(now_ms)
                if freed and not freed.isdisjoint(after.held.values()):
                    self._waiters.wake(key[1])
            if flush is not None:
                await asyncio.wrap_future(flush)
        return statuses

    async def change_invisible(
        self, key: QueueKey, offset: int, pop_time_ms: int, invisible_ms: int
    ) -> tuple[HandleStatus, int]:
        """Move a delivery's deadline to ``invisible_ms`` from now; return the status and deadline.

        Raises:
            PopJournalError: the journal could not be written (nothing changed).
        """
        now_ms = self._now_ms()
        state = self.table.get(key)
        status = state.check(offset, pop_time_ms, now_ms) if state is not None else HandleStatus.UNKNOWN
        if status is not HandleStatus.VALID:
            return status, 0
        visible_at_ms = now_ms + max(invisible_ms, 0)
        events: list[Event] = [ChangeEvent(key, offset, pop_time_ms, visible_at_ms)]
        flush = self._journal(events)
        self._apply(events)
        self._waiters.wake(key[1])
        if flush is not None:
            await asyncio.wrap_future(flush)
        return status, visible_at_ms

    # -- journal ------------------------------------------------------------------------------

    def _journal(self, events: list[Event]) -> Future[bool] | None:
        put = self._store.put_message(
            PutMessageRequest(
                topic=JOURNAL_TOPIC,
                queue_id=0,
                body=encode_events(events),
                born_timestamp=self._now_ms(),
                store_host=self._store_host(),
            )
        )
        if put.status is not PutStatus.PUT_OK:
            raise PopJournalError(f"writing the POP journal failed: {put.status.value} {put.remark}")
        self._journal_next = put.queue_offset + 1
        return put.flush_future

    def _apply(self, events: list[Event]) -> None:
        touched: set[QueueKey] = set()
        for event in events:
            self.table.apply(event)
            touched.add(event.key)
        for key in touched:
            state = self.table.get(key)
            if state is not None:
                self._offsets.commit(key[0], key[1], key[2], state.done_below())


def _delivered(record: bytes, attempt: int) -> bytes:
    """The record as delivery ``attempt`` of it goes out: RECONSUMETIMES raised by the
    deliveries it had from this queue before (``attempt - 1``)."""
    if attempt <= 1:
        return record
    return with_reconsume_times(record, reconsume_times_of(record) + attempt - 1)
