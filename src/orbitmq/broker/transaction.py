"""Transactional messages: half messages, END_TRANSACTION decisions and the check service.

A send with ``TRAN_MSG=true`` is stored as a *half message* in ``RMQ_SYS_TRANS_HALF_TOPIC``
queue 0 (transaction bits cleared, ``REAL_TOPIC``/``REAL_QID`` set, and ``__transactionId__``
= its ``UNIQ_KEY``), where no consumer subscribes (remoting-protocol §2.15). Its producer later
sends END_TRANSACTION: *commit* writes the real message (properties minus the half queue's
bookkeeping, sysFlag COMMIT, ``preparedTransactionOffset`` = the half message's commit-log
offset); as RocketMQ's broker does, the committed copy keeps ``TRAN_MSG=true`` and
``__transactionId__``, which consumers read (the Java client takes the transaction id of a
pulled message whose ``TRAN_MSG`` is true from its ``UNIQ_KEY``); *rollback* writes
nothing; either way an *op* record is appended to ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (tag ``d``,
body = the half queue offset as decimal text), so the decision survives restarts.

Copies. To count checks durably the check service re-appends a half message before each
check, with ``TRANSACTION_CHECK_TIMES`` incremented (RocketMQ does the same). Every copy names
the queue offset of the first one in ``TRAN_PREPARED_QUEUE_OFFSET``: that *origin* offset
identifies the transaction, op bodies carry it, and a decision for any copy settles them all
(a late or repeated END_TRANSACTION answers SUCCESS without committing twice).

Check service. Every ``transactionCheckInterval`` it scans the half queue from its check
offset, keeps the newest copy of each undecided transaction, and for each one older than
``transactionTimeOut``: after ``transactionCheckMax`` checks it rolls the transaction back
and logs a warning; otherwise it re-appends the copy and sends CHECK_TRANSACTION_STATE
(oneway) to one live producer connection of the group in ``PGROUP``. The check offset then
moves to the oldest copy that is still live and is persisted in
``config/transactionCheckOffset.json``; at start the decided set is rebuilt from the op queue.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from orbitmq.broker._tasks import cancel_and_wait
from orbitmq.broker.clients import ProducerTable
from orbitmq.broker.reput import ReputTargets
from orbitmq.broker.schedule import restore_request
from orbitmq.broker.validation import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from orbitmq.errors import ConnectionClosedError, RemoteProtocolError
from orbitmq.model.message import MessageConst, MessageExt, SysFlag
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from orbitmq.protocol.message_codec import decode_stored_message, encode_stored_message
from orbitmq.protocol.message_id import encode_offset_msg_id
from orbitmq.protocol.names import shorten
from orbitmq.protocol.properties import decimal_value
from orbitmq.store.message_store import GetStatus, MessageStore, PutMessageRequest, PutStatus
from orbitmq.transport.server import ServerConnection

logger = logging.getLogger(__name__)

CHECK_OFFSET_FILE = "transactionCheckOffset.json"
OP_TAG = "d"
_READ_BATCH = 64
# RocketMQ's TransactionalMessageUtil.TRANSACTION_ID: a half message's UNIQ_KEY, kept on commit.
TRANSACTION_ID = "__transactionId__"
# What a commit leaves out of the half message's properties. TRAN_MSG stays, as in RocketMQ.
_COMMIT_DROPPED = (
    MessageConst.REAL_TOPIC,
    MessageConst.REAL_QUEUE_ID,
    MessageConst.TRANSACTION_CHECK_TIMES,
    MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET,
)


def is_transactional(properties: dict[str, str]) -> bool:
    return properties.get(MessageConst.TRANSACTION_PREPARED, "").lower() == "true"


def to_half(put: PutMessageRequest) -> None:
    """Rewrite ``put`` in place into a half message (visible to no consumer)."""
    uniq_key = put.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq_key:
        put.properties[TRANSACTION_ID] = uniq_key
    put.properties[MessageConst.REAL_TOPIC] = put.topic
    put.properties[MessageConst.REAL_QUEUE_ID] = str(put.queue_id)
    put.sys_flag &= ~SysFlag.TRANSACTION_MASK
    put.encoded_properties = None  # the properties changed
    put.topic = TRANS_HALF_TOPIC
    put.queue_id = 0


def origin_of(message: MessageExt) -> int:
    """The half queue offset that identifies the transaction a copy belongs to."""
    text = message.properties.get(MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET, "")
    value = decimal_value(text)
    return message.queue_offset if value is None else value


@dataclass(slots=True)
class EndOutcome:
    """What END_TRANSACTION did: the response code and remark."""

    code: ResponseCode
    remark: str | None = None


class TransactionService:
    """Decisions, op records and check-backs (see the module docstring)."""

    def __init__(
        self,
        store: MessageStore,
        producers: ProducerTable[ServerConnection],
        config_dir: Path,
        settings: tuple[int, int, int],
        store_host: Callable[[], tuple[str, int]],
        write_file: Callable[[Path, bytes], None],
        now_ms: Callable[[], int],
        *,
        targets: ReputTargets | None = None,
    ) -> None:
        self._store = store
        self._targets = targets
        self._producers = producers
        self._check_offset_path = config_dir / CHECK_OFFSET_FILE
        self._timeout_ms, self._check_max, self._interval_ms = settings
        self._store_host = store_host
        self._write_file = write_file
        self._now_ms = now_ms
        self.decided: set[int] = set()
        self.check_offset = 0
        self._persisted_check_offset = -1
        self._task: asyncio.Task[None] | None = None
        self.checks_sent = 0
        self.rolled_back_by_limit = 0

    # -- lifecycle ----------------------------------------------------------------------------

    def load(self) -> None:
        """Read the check offset and rebuild the decided set from the op queue (blocking)."""
        try:
            document = orjson.loads(self._check_offset_path.read_bytes())
            self.check_offset = int(document["halfQueueOffset"])
        except FileNotFoundError:
            self.check_offset = 0
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            logger.warning(
                "%s unreadable (%s); checking the half queue from its start", self._check_offset_path, exc
            )
            self.check_offset = 0
        self._persisted_check_offset = self.check_offset
        queue_offset = self._store.get_min_queue_offset(TRANS_OP_HALF_TOPIC, 0)
        while True:
            result = self._store.get_messages(TRANS_OP_HALF_TOPIC, 0, queue_offset, 256, 1 << 24)
            if result.status is not GetStatus.FOUND:
                if result.next_begin_offset > queue_offset:
                    queue_offset = result.next_begin_offset
                    continue
                break
            for buffer in result.buffers:
                self._note_op(buffer)
            queue_offset = result.next_begin_offset
        logger.info(
            "transactions: %d decided, checking from half queue offset %d",
            len(self.decided),
            self.check_offset,
        )

    def _note_op(self, buffer: bytes | memoryview) -> None:
        try:
            message, _ = decode_stored_message(buffer)
            self.decided.add(int(message.body.decode("ascii")))
        except (RemoteProtocolError, UnicodeDecodeError, ValueError):
            logger.error("undecodable op record in %s; ignored", TRANS_OP_HALF_TOPIC)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="transaction-check")

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None
        await self._persist_check_offset()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_ms / 1000)
            try:
                await self.check_round()
            except Exception:
                logger.exception("transaction check round failed")

    # -- decisions ----------------------------------------------------------------------------

    def end_transaction(self, header: EndTransactionRequestHeader) -> EndOutcome:
        """Apply a commit (8) or rollback (12) to the half message the header names."""
        half = self._find_half(header)
        if isinstance(half, EndOutcome):
            return half
        origin = origin_of(half)
        if origin in self.decided:
            return EndOutcome(ResponseCode.SUCCESS)
        if header.commit_or_rollback == SysFlag.TRANSACTION_COMMIT_TYPE:
            failure = self._commit(half)
            if failure is not None:
                return failure
        return self._decide(origin, half)

    def _find_half(self, header: EndTransactionRequestHeader) -> MessageExt | EndOutcome:
        """The half message the header names, or why the request does not name one.

        The commit-log offset alone proves nothing: any bytes there (a record embedded in
        another message's body, say) could look like a half message. So the offset must be
        the one the half queue holds at ``tranStateTableOffset`` (an entry only the broker
        writes, always at a record boundary), and the record must belong to the header's
        producer group and carry the transaction id the header names.
        """
        offset = header.commit_log_offset
        entry = self._store.get_messages(TRANS_HALF_TOPIC, 0, header.tran_state_table_offset, 1, 1 << 24)
        if entry.status is not GetStatus.FOUND or entry.commit_log_offsets[:1] != [offset]:
            return EndOutcome(
                ResponseCode.SYSTEM_ERROR,
                f"no half message at commit-log offset {offset} with tranStateTableOffset "
                f"{header.tran_state_table_offset}",
            )
        try:
            half, _ = decode_stored_message(entry.buffers[0])
        except RemoteProtocolError as exc:
            return EndOutcome(ResponseCode.SYSTEM_ERROR, f"commit-log offset {offset}: {exc}")
        group = half.properties.get(MessageConst.PRODUCER_GROUP)
        if group != header.producer_group:
            return EndOutcome(
                ResponseCode.SYSTEM_ERROR,
                f"half message at commit-log offset {offset} belongs to producer group {shorten(group or '')}, "
                f"not {header.producer_group}",
            )
        # Clients name the transaction by its UNIQ_KEY (some by the half's offsetMsgId); an id
        # given must be this record's. The offsets above already pin the record itself.
        named = [text for text in (header.transaction_id, header.msg_id) if text]
        known = {half.uniq_key, half.offset_msg_id} - {None, ""}
        if any(text not in known for text in named):
            return EndOutcome(
                ResponseCode.SYSTEM_ERROR,
                f"half message at commit-log offset {offset} is not transaction "
                f"{shorten(header.transaction_id or header.msg_id or '(none given)')}",
            )
        return half

    def _commit(self, half: MessageExt) -> EndOutcome | None:
        request = restore_request(half, _COMMIT_DROPPED, self._store_host())
        if request is None:
            return EndOutcome(
                ResponseCode.SYSTEM_ERROR, f"half message {half.msg_id} has no REAL_TOPIC/REAL_QID"
            )
        # The destination is checked again as a send would be: the topic may have changed (or
        # been deleted) since the half message was stored.
        problem = self._destination_problem(half, request.topic, request.queue_id)
        if problem is not None:
            return EndOutcome(ResponseCode.SYSTEM_ERROR, f"cannot commit {half.msg_id}: {problem}")
        request.sys_flag = (request.sys_flag & ~SysFlag.TRANSACTION_MASK) | SysFlag.TRANSACTION_COMMIT_TYPE
        request.prepared_transaction_offset = half.commit_log_offset
        put = self._store.put_message(request)
        if put.status is not PutStatus.PUT_OK:
            return EndOutcome(
                ResponseCode.SYSTEM_ERROR,
                f"committing {half.msg_id} to {request.topic}/{request.queue_id} failed: {put.status.value}",
            )
        return None

    def _destination_problem(self, half: MessageExt, topic: str, queue_id: int) -> str | None:
        """Why a commit may not go to ``topic``/``queue_id`` (None when it may)."""
        if self._targets is None:
            return None
        rejection = self._targets.check("transaction", half.msg_id, topic, queue_id)
        return None if rejection is None else rejection.remark

    def _decide(self, origin: int, half: MessageExt) -> EndOutcome:
        op = PutMessageRequest(
            topic=TRANS_OP_HALF_TOPIC,
            queue_id=0,
            body=str(origin).encode("ascii"),
            properties={MessageConst.TAGS: OP_TAG},
            born_timestamp=self._now_ms(),
            store_host=self._store_host(),
        )
        put = self._store.put_message(op)
        if put.status is not PutStatus.PUT_OK:
            return EndOutcome(ResponseCode.SYSTEM_ERROR, f"recording the decision on {half.msg_id} failed")
        self.decided.add(origin)
        return EndOutcome(ResponseCode.SUCCESS)

    # -- checks -------------------------------------------------------------------------------

    async def check_round(self) -> None:
        """One pass of the check service over the undecided half messages."""
        latest = self._scan_half_queue()
        live = {origin: copy for origin, copy in latest.items() if origin not in self.decided}
        new_check_offset = min((copy.queue_offset for copy in live.values()), default=None)
        if new_check_offset is None:
            new_check_offset = self._store.get_max_queue_offset(TRANS_HALF_TOPIC, 0)
        self.decided = {origin for origin in self.decided if origin >= new_check_offset or origin in latest}
        self.check_offset = new_check_offset
        now = self._now_ms()
        for origin, copy in sorted(live.items()):
            if now - copy.store_timestamp < self._timeout_ms:
                continue
            self._check_one(origin, copy)
            await asyncio.sleep(0)
        await self._persist_check_offset()

    def _scan_half_queue(self) -> dict[int, MessageExt]:
        """The newest copy of every transaction from the check offset on (bodies not read)."""
        latest: dict[int, MessageExt] = {}
        queue_offset = self.check_offset
        while True:
            result = self._store.get_messages(TRANS_HALF_TOPIC, 0, queue_offset, _READ_BATCH, 1 << 24)
            if result.status is not GetStatus.FOUND:
                if result.next_begin_offset > queue_offset:
                    queue_offset = result.next_begin_offset
                    continue
                return latest
            for buffer in result.buffers:
                try:
                    copy, _ = decode_stored_message(buffer, decode_body=False)
                except RemoteProtocolError:
                    logger.error("undecodable half message near queue offset %d; ignored", queue_offset)
                    continue
                latest[origin_of(copy)] = copy
            queue_offset = result.next_begin_offset

    def _check_one(self, origin: int, copy: MessageExt) -> None:
        times = copy.properties.get(MessageConst.TRANSACTION_CHECK_TIMES, "0")
        check_times = decimal_value(times, 9) or 0
        if check_times >= self._check_max:
            logger.warning(
                "transaction %s to topic %s (half queue offset %d) still unknown after %d checks; rolled back",
                copy.msg_id, copy.properties.get(MessageConst.REAL_TOPIC), origin, check_times,
            )  # fmt: skip
            self._decide(origin, copy)
            self.rolled_back_by_limit += 1
            return
        renewed = self._reappend(origin, copy, check_times + 1)
        if renewed is not None:
            self._send_check(renewed)

    def _reappend(self, origin: int, copy: MessageExt, check_times: int) -> MessageExt | None:
        raw = self._store.read_message(copy.commit_log_offset)
        if raw is None:
            logger.error(
                "half message %s at commit-log offset %d is gone", copy.msg_id, copy.commit_log_offset
            )
            return None
        full, _ = decode_stored_message(raw)
        full.properties[MessageConst.TRANSACTION_CHECK_TIMES] = str(check_times)
        full.properties[MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET] = str(origin)
        put = self._store.put_message(
            PutMessageRequest(
                topic=TRANS_HALF_TOPIC,
                queue_id=0,
                body=full.body,
                flag=full.flag,
                properties=full.properties,
                sys_flag=full.sys_flag & ~(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6),
                born_timestamp=full.born_timestamp,
                born_host=full.born_host,
                store_host=self._store_host(),
                reconsume_times=full.reconsume_times,
            )
        )
        if put.status is not PutStatus.PUT_OK:
            logger.error("re-appending half message %s failed: %s", copy.msg_id, put.status.value)
            return None
        full.queue_offset = put.queue_offset
        full.commit_log_offset = put.commit_log_offsets[0]
        full.store_timestamp = put.store_timestamp
        full.store_host = self._store_host()
        return full

    def _send_check(self, half: MessageExt) -> None:
        group = half.properties.get(MessageConst.PRODUCER_GROUP, "")
        channels = [entry.channel for entry in self._producers.channels(group) if not entry.channel.closed]
        if not channels:
            logger.info("no live producer of group %s to check transaction %s", group, half.msg_id)
            return
        body_message = MessageExt(
            topic=half.properties.get(MessageConst.REAL_TOPIC, half.topic),
            body=half.body,
            flag=half.flag,
            properties=half.properties,
            queue_id=int(half.properties.get(MessageConst.REAL_QUEUE_ID, "0") or 0),
            queue_offset=half.queue_offset,
            commit_log_offset=half.commit_log_offset,
            sys_flag=half.sys_flag,
            born_timestamp=half.born_timestamp,
            born_host=half.born_host,
            store_timestamp=half.store_timestamp,
            store_host=half.store_host,
            reconsume_times=half.reconsume_times,
        )
        host, port = half.store_host
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=half.queue_offset,
            commit_log_offset=half.commit_log_offset,
            msg_id=half.uniq_key or half.offset_msg_id,
            transaction_id=half.uniq_key or half.offset_msg_id,
            offset_msg_id=encode_offset_msg_id(host, port, half.commit_log_offset),
        )
        request = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext(), encode_stored_message(body_message)
        )
        try:
            random.choice(channels).send_oneway(request)
            self.checks_sent += 1
        except ConnectionClosedError:
            logger.info("producer of group %s went away before the check of %s", group, half.msg_id)

    async def follow_check_offset(self, half_queue_offset: int) -> None:
        """A slave takes its master's check progress (SlaveSynchronize) and persists it."""
        self.check_offset = half_queue_offset
        await self._persist_check_offset()

    async def _persist_check_offset(self) -> None:
        if self.check_offset == self._persisted_check_offset:
            return
        self._persisted_check_offset = self.check_offset
        data = orjson.dumps({"halfQueueOffset": self.check_offset})
        await asyncio.to_thread(self._write_file, self._check_offset_path, data)
