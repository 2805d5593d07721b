"""Staged writes: batches of messages committed once per ``(write id, batch id)``.

The exactly-once Spark sink writes through this service (protocol in ``protocol/staging.py``,
handlers in ``broker/handlers/staging.py``). A writer that may run more than once for the same
data stages, then commits:

* **Stage.** A batch of messages for one topic and queue is stored as one *staged record* in
  ``RMQ_SYS_STAGE_HALF_TOPIC`` queue 0 (body: the batch body as received; properties:
  ``REAL_TOPIC``, ``REAL_QID``, ``PGROUP``, ``ORBIT_STAGED_WRITE=<write id>:<batch id>``). Like a
  transactional half message, nobody consumes it. A staged record that is never committed (a
  failed task attempt, an aborted batch) needs no rollback: it is never read again and goes
  with its commit-log segment at retention.
* **Commit.** The first COMMIT_STAGED for a key appends a *ledger record* to
  ``RMQ_SYS_STAGE_LEDGER_TOPIC`` (the key, the staged records, the opaque ``remote`` part and
  each target queue's max offset at that moment), then restores every staged record's messages
  into their real queue (one ``put_messages`` per record, so each record's messages stay
  consecutive and in order), then appends a *done* record. A later COMMIT_STAGED for the same
  key commits nothing and answers with what was recorded.

Crash safety. The ledger record is written before any message, so a crash leaves either no
trace of the commit (the writer retries, or Spark replays the batch: a new commit) or a ledger
record. At start, :meth:`StagingService.load` rebuilds the ledger and finishes every record
without a done mark (as does a later COMMIT_STAGED of a key whose commit stopped on a failed
put): it reads each target queue from the recorded max offset, collects the
``UNIQ_KEY`` of what is there, and writes the staged messages whose key is missing. Staged
messages therefore must carry a ``UNIQ_KEY`` (the stage request refuses them otherwise).

Controller mode. Every broker of the group holds the ledger topic (a slave copies it with the
rest of the log), but only the master's ledger in memory is current. A broker in controller
mode therefore loads nothing at start: :meth:`StagingService.promote` (the broker became
master) waits until the store reads up to the log's end, then rebuilds the ledger from the
store and finishes half-done commits exactly as a start does; :meth:`StagingService.suspend`
(the broker lost the master role) stops serving. Until a promotion's load is over,
:attr:`StagingService.serving` is false and the handlers answer a retriable code.

The ledger in memory is bounded (:data:`LEDGER_MAX_ENTRIES`, oldest dropped first): only a
batch that is still in doubt (the newest of its write) can be replayed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import orjson

from orbitmq.broker.reput import ReputTargets
from orbitmq.broker.topics import TopicConfigTable
from orbitmq.broker.validation import STAGE_HALF_TOPIC, STAGE_LEDGER_TOPIC, Rejection
from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageConst, SysFlag
from orbitmq.protocol.batch import BatchItem, decode_batch
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.protocol.staging import STAGED_COUNT_PROPERTY, STAGED_WRITE_PROPERTY, CommitBody
from orbitmq.store.message_store import GetStatus, MessageStore, PutMessageRequest, PutResult, PutStatus

logger = logging.getLogger(__name__)

LEDGER_MAX_ENTRIES = 100_000
"""Ledger keys kept in memory; a replay older than this many commits is committed again."""

Key = tuple[str, int]


@dataclass(slots=True)
class LedgerEntry:
    """One committed key: what was committed here, what elsewhere, where recovery looks."""

    body: CommitBody
    starts: dict[str, int]
    """``"<topic>/<queue id>"`` -> the queue's max offset when the ledger record was written."""
    done: bool = False
    applying: bool = False
    """A COMMIT_STAGED is writing this key's messages right now (between two chunks)."""


@dataclass(slots=True)
class StagedChunk:
    """A staged record read back for its commit."""

    topic: str
    queue_id: int
    items: list[BatchItem]
    born_timestamp: int
    born_host: tuple[str, int]


@dataclass(slots=True)
class CommitOutcome:
    """What COMMIT_STAGED did: committed now (``already`` false) or earlier, and the record."""

    already: bool
    body: CommitBody
    messages: int = 0


class StagingService:
    """Stage, commit and recover (see the module docstring)."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigTable,
        cluster_name: str,
        store_host: Callable[[], tuple[str, int]],
        now_ms: Callable[[], int],
        max_entries: int = LEDGER_MAX_ENTRIES,
    ) -> None:
        self._store = store
        self._topics = topics
        self._targets = ReputTargets(topics)
        self._cluster = cluster_name
        self._store_host = store_host
        self._now_ms = now_ms
        self._max_entries = max_entries
        self.ledger: OrderedDict[Key, LedgerEntry] = OrderedDict()
        self.recovered = 0
        self.serving = False
        """The ledger is loaded and this broker is master: stage and commit requests are served."""
        self._role_generation = 0  # each suspend/promote moves it on: an older promotion stops
        self._loading = asyncio.Lock()

    # -- start -------------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the ledger and finish commits a crash interrupted (blocking; before serving)."""
        queue_offset = self._store.get_min_queue_offset(STAGE_LEDGER_TOPIC, 0)
        while True:
            result = self._store.get_messages(STAGE_LEDGER_TOPIC, 0, queue_offset, 256, 1 << 24)
            if result.status is not GetStatus.FOUND:
                if result.next_begin_offset > queue_offset:
                    queue_offset = result.next_begin_offset
                    continue
                break
            for buffer in result.buffers:
                self._note_record(buffer)
            queue_offset = result.next_begin_offset
        for key, entry in list(self.ledger.items()):
            if not entry.done:
                self._recover(key, entry)
        logger.info(
            "staged writes: %d ledger keys, %d commits finished at start", len(self.ledger), self.recovered
        )

    # -- controller mode ---------------------------------------------------------------------

    def suspend(self) -> None:
        """The broker is no master (or is not yet): stop serving; a promotion under way stops."""
        self._role_generation += 1
        self.serving = False

    async def promote(self, poll_interval_ms: int = 50) -> None:
        """The broker became master: rebuild the ledger from the store, then serve.

        The ledger records this broker copied as a slave are read back once the store's read
        limit (a confirm offset) reaches the log's end as of now. A later :meth:`suspend` (or
        promotion) overtakes it: it then ends without serving.
        """
        self.suspend()
        generation = self._role_generation
        end_offset = self._store.max_commit_log_offset
        async with self._loading:  # one load at a time: an overtaken one may still be running
            while generation == self._role_generation and not self._reads_reach(end_offset):
                await asyncio.sleep(poll_interval_ms / 1000)
            if generation != self._role_generation:
                return
            try:
                await asyncio.to_thread(self._reload)
            except Exception:
                logger.exception("loading the staged-writes ledger failed: staged writes stay unavailable")
                return
            if generation == self._role_generation:
                self.serving = True

    def _reads_reach(self, commit_log_offset: int) -> bool:
        limit = self._store.read_limit
        return limit is None or limit >= commit_log_offset

    def _reload(self) -> None:
        self.ledger.clear()
        self.recovered = 0
        self.load()

    def _note_record(self, buffer: bytes | memoryview) -> None:
        try:
            message, _ = decode_stored_message(buffer)
            doc = orjson.loads(message.body)
            key = (str(doc["writeId"]), int(doc["batchId"]))
            if doc.get("done"):
                entry = self.ledger.get(key)
                if entry is not None:
                    entry.done = True
                return
            body = CommitBody(list(doc["chunks"]), dict(doc["remote"]))
            self._remember(key, LedgerEntry(body, dict(doc["starts"])))
        except (RemoteProtocolError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            logger.error("undecodable record in %s; ignored", STAGE_LEDGER_TOPIC)

    def _remember(self, key: Key, entry: LedgerEntry) -> None:
        self.ledger[key] = entry
        while len(self.ledger) > self._max_entries:
            self.ledger.popitem(last=False)

    def _recover(self, key: Key, entry: LedgerEntry) -> None:
        present: set[str] = set()
        for target, start in entry.starts.items():
            topic, _, queue_id = target.rpartition("/")
            present |= self._uniq_keys(topic, int(queue_id), start)
        written = 0
        for offset in entry.body.chunks:
            chunk = self._read_staged(offset, key)
            if isinstance(chunk, Rejection):
                logger.error("finishing commit %s: %s; its messages are lost", key, chunk.remark)
                continue
            if not self._targets.admit("staging", f"{key[0]}:{key[1]}", chunk.topic, chunk.queue_id):
                continue
            missing = [item for item in chunk.items if item.properties.get(_UNIQ_KEY) not in present]
            if missing:
                result = self._store.put_messages(self._requests(chunk, missing))
                if result.status is not PutStatus.PUT_OK:
                    logger.error("finishing commit %s failed: %s", key, result.status.value)
                    return
                written += len(missing)
        self._put_ledger({"writeId": key[0], "batchId": key[1], "done": True})
        entry.done = True
        self.recovered += 1
        logger.warning("commit of write %s batch %d was interrupted; %d messages written now", *key, written)

    def _uniq_keys(self, topic: str, queue_id: int, start: int) -> set[str]:
        found: set[str] = set()
        queue_offset = start
        while True:
            result = self._store.get_messages(topic, queue_id, queue_offset, 256, 1 << 24)
            if result.status is not GetStatus.FOUND:
                if result.next_begin_offset > queue_offset:
                    queue_offset = result.next_begin_offset
                    continue
                return found
            for buffer in result.buffers:
                message, _ = decode_stored_message(buffer, decode_body=False)
                uniq = message.properties.get(_UNIQ_KEY)
                if uniq:
                    found.add(uniq)
            queue_offset = result.next_begin_offset

    # -- stage -------------------------------------------------------------------------------

    def stage(
        self,
        topic: str,
        queue_id: int,
        group: str,
        key: Key,
        body: bytes,
        born: tuple[int, tuple[str, int]],
    ) -> PutResult | Rejection:
        """Store one staged record of ``body`` (a batch body) for ``topic``/``queue_id``."""
        try:
            items = decode_batch(body)
        except RemoteProtocolError as exc:
            return Rejection(ResponseCode.MESSAGE_ILLEGAL, f"malformed batch body for topic[{topic}]: {exc}")
        if not items:
            return Rejection(ResponseCode.MESSAGE_ILLEGAL, f"empty batch for topic[{topic}]")
        for index, item in enumerate(items):
            refusal = _refusal(item)
            if refusal:
                return Rejection(
                    ResponseCode.MESSAGE_ILLEGAL, f"staged message {index} to topic[{topic}] {refusal}"
                )
        properties = {
            MessageConst.REAL_TOPIC: topic,
            MessageConst.REAL_QUEUE_ID: str(queue_id),
            MessageConst.PRODUCER_GROUP: group,
            STAGED_WRITE_PROPERTY: f"{key[0]}:{key[1]}",
            STAGED_COUNT_PROPERTY: str(len(items)),
        }
        born_timestamp, born_host = born
        put = PutMessageRequest(
            STAGE_HALF_TOPIC, 0, body, 0, properties, 0, born_timestamp, born_host, self._store_host()
        )
        return self._store.put_message(put)

    # -- commit ------------------------------------------------------------------------------

    async def commit(self, key: Key, body: CommitBody) -> CommitOutcome | Rejection:
        """Commit ``body.chunks`` under ``key`` unless the key is in the ledger (module docstring)."""
        entry = self.ledger.get(key)
        if entry is not None:
            if not entry.done and not entry.applying:
                self._recover(key, entry)  # an earlier commit of the key stopped on a failed put
            return CommitOutcome(True, entry.body)
        if len(set(body.chunks)) != len(body.chunks):
            return Rejection(ResponseCode.MESSAGE_ILLEGAL, f"commit {key} lists a staged record twice")
        chunks = []
        for offset in body.chunks:
            chunk = self._read_staged(offset, key)
            if isinstance(chunk, Rejection):
                return chunk
            # Checked again as a send would be: the topic may have changed since it was staged.
            rejection = self._targets.check("staging", f"{key[0]}:{key[1]}", chunk.topic, chunk.queue_id)
            if rejection is not None:
                return Rejection(rejection.code, f"staged record {offset}: {rejection.remark}")
            chunks.append(chunk)
        starts = {
            f"{chunk.topic}/{chunk.queue_id}": self._store.get_max_queue_offset(chunk.topic, chunk.queue_id)
            for chunk in chunks
        }
        record = {
            "writeId": key[0],
            "batchId": key[1],
            "chunks": body.chunks,
            "remote": body.remote,
            "starts": starts,
        }
        put = self._put_ledger(record)
        if put.status is not PutStatus.PUT_OK:
            return Rejection(ResponseCode.SYSTEM_ERROR, f"recording commit {key} failed: {put.status.value}")
        entry = LedgerEntry(body, starts, applying=True)
        self._remember(key, entry)
        last_flush = put.flush_future
        messages = 0
        try:
            for chunk in chunks:
                result = self._store.put_messages(self._requests(chunk, chunk.items))
                if result.status is not PutStatus.PUT_OK:
                    # Recorded but not finished: the next commit of the key, or the next start,
                    # finishes it by UNIQ_KEY.
                    return Rejection(
                        ResponseCode.SYSTEM_ERROR, f"committing {key} failed: {result.status.value}"
                    )
                messages += len(chunk.items)
                last_flush = result.flush_future or last_flush
                await asyncio.sleep(0)  # a big commit does not hold the event loop in one piece
        finally:
            entry.applying = False
        done = self._put_ledger({"writeId": key[0], "batchId": key[1], "done": True})
        entry.done = done.status is PutStatus.PUT_OK
        if last_flush is not None and not await _flushed(done.flush_future or last_flush):
            return Rejection(ResponseCode.FLUSH_DISK_TIMEOUT, f"commit {key} is stored but not yet flushed")
        return CommitOutcome(False, body, messages)

    def _read_staged(self, offset: int, key: Key) -> StagedChunk | Rejection:
        raw = self._store.read_message(offset)
        if raw is None:
            return Rejection(ResponseCode.SYSTEM_ERROR, f"no staged record at commit-log offset {offset}")
        try:
            record, _ = decode_stored_message(raw)
            items = decode_batch(record.body)
        except RemoteProtocolError as exc:
            return Rejection(ResponseCode.SYSTEM_ERROR, f"staged record at commit-log offset {offset}: {exc}")
        owner = record.properties.get(STAGED_WRITE_PROPERTY)
        if record.topic != STAGE_HALF_TOPIC or owner != f"{key[0]}:{key[1]}":
            return Rejection(
                ResponseCode.SYSTEM_ERROR,
                f"commit-log offset {offset} is not a staged record of write {key[0]} batch {key[1]} "
                f"(topic {record.topic}, write {owner})",
            )
        real_queue = record.properties.get(MessageConst.REAL_QUEUE_ID, "")
        return StagedChunk(
            record.properties.get(MessageConst.REAL_TOPIC, ""),
            int(real_queue) if real_queue.isdigit() else 0,
            items,
            record.born_timestamp,
            record.born_host,
        )

    def _requests(self, chunk: StagedChunk, items: list[BatchItem]) -> list[PutMessageRequest]:
        store_host = self._store_host()
        config = self._topics.get(chunk.topic)
        sys_flag = SysFlag.MULTI_TAGS if config is not None and config.topic_filter_type == "MULTI_TAG" else 0
        requests = []
        for item in items:
            properties = dict(item.properties)
            properties[MessageConst.CLUSTER] = self._cluster
            requests.append(
                PutMessageRequest(
                    chunk.topic,
                    chunk.queue_id,
                    item.body,
                    item.flag,
                    properties,
                    sys_flag,
                    chunk.born_timestamp,
                    chunk.born_host,
                    store_host,
                )
            )
        return requests

    def _put_ledger(self, doc: dict[str, object]) -> PutResult:
        return self._store.put_message(
            PutMessageRequest(
                STAGE_LEDGER_TOPIC,
                0,
                orjson.dumps(doc),
                born_timestamp=self._now_ms(),
                store_host=self._store_host(),
            )
        )


_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_HELD = (
    MessageConst.DELAY_TIME_LEVEL,
    MessageConst.TIMER_DELIVER_MS,
    MessageConst.TIMER_DELAY_MS,
    MessageConst.TIMER_DELAY_SEC,
    MessageConst.START_DELIVER_TIME,
    MessageConst.TRANSACTION_PREPARED,
)


def _refusal(item: BatchItem) -> str:
    """Why a message cannot be staged ("" when it can)."""
    properties = item.properties
    if not properties.get(_UNIQ_KEY):
        return "has no UNIQ_KEY (needed to finish an interrupted commit)"
    held = [name for name in _HELD if properties.get(name, "") not in ("", "0", "false")]
    if held:
        return f"is delayed, timed or transactional ({held[0]}); staged writes deliver at commit"
    return ""


async def _flushed(future: Future[bool]) -> bool:
    return await asyncio.wrap_future(future)
