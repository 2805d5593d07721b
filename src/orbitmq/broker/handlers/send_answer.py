"""The answer to a stored send: at once, or after the flush and the slaves it must wait for.

A send's answer carries the message's msgId, queue id and queue offset once the store took it.
Under ASYNC_FLUSH, on any master but a SYNC_MASTER, nothing is waited for, so the answer is
built at once and the server writes it in the loop turn that read the request (``ReadyAnswer``).
Under SYNC_FLUSH (a producer that did not set ``WAIT=false``) the answer waits for the flush
(``sync_flush``: many senders share one), and with replication for the slaves
(``replicated``); a flush past its timeout answers FLUSH_DISK_TIMEOUT, and a slave's status
overrides PUT_OK only (RocketMQ's order). A put the store refused answers its code with no
ext fields.
"""

from __future__ import annotations

from collections.abc import Awaitable

from orbitmq.broker.handlers import BrokerState
from orbitmq.broker.handlers.replicated import replicated_status, unreplicated_status, waits_for_slave
from orbitmq.broker.status_map import put_response_code
from orbitmq.broker.sync_flush import SyncFlushWaits
from orbitmq.model.message import MessageConst
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_id import join_offset_msg_ids
from orbitmq.store.config import FlushDiskType
from orbitmq.store.message_store import PutResult, PutStatus

__all__ = ["PutAnswers"]

# Answers to a message that was stored: they carry its msgId, queue id and queue offset.
_STORED_CODES = frozenset(
    (
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    )
)


class PutAnswers:
    """Builds the answers to a broker's stored sends."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state
        self._flush_waits = SyncFlushWaits()

    def answer(
        self,
        request: RemotingCommand,
        result: PutResult,
        queue_id: int,
        wait_store_ok: bool,
        topic: str,
        transaction_id: str | None = None,
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """The answer now, or the awaitable of the answer when a flush or the slaves must be waited for."""
        state = self._state
        status = result.status
        future = result.flush_future
        must_wait = (
            status is PutStatus.PUT_OK
            and future is not None
            and wait_store_ok
            and state.store_config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        )
        replicated = status is PutStatus.PUT_OK and (
            state.replication is not None or state.replicas is not None
        )
        if must_wait or (replicated and waits_for_slave(state, wait=wait_store_ok)):
            return self._answer_later(
                request, result, queue_id, wait_store_ok, topic, transaction_id, must_wait
            )
        if future is not None:
            # The put did not wake the store's flush thread (sync_flush.py): a put not waiting wakes it.
            state.store.wake_flusher()
        if replicated:
            status = unreplicated_status(state)
        return self._response(request, result, status, queue_id, topic, transaction_id)

    async def _answer_later(
        self,
        request: RemotingCommand,
        result: PutResult,
        queue_id: int,
        wait_store_ok: bool,
        topic: str,
        transaction_id: str | None,
        must_wait: bool,
    ) -> RemotingCommand:
        state = self._state
        status = result.status
        future = result.flush_future
        # The put did not wake the store's flush thread: a lone put is flushed on the loop,
        # others by the thread (sync_flush.py); a put not waiting just wakes it.
        if must_wait and future is not None:
            end_offset = result.commit_log_offsets[0] + result.wrote_bytes
            if not await self._flush_waits.wait(state.store, future, end_offset):
                status = PutStatus.FLUSH_DISK_TIMEOUT
        elif future is not None:
            state.store.wake_flusher()
        if status is PutStatus.PUT_OK and (state.replication is not None or state.replicas is not None):
            # A slave's status overrides PUT_OK, not a flush timeout (RocketMQ's order).
            end_offset = result.commit_log_offsets[0] + result.wrote_bytes
            status = await replicated_status(state, end_offset, wait=wait_store_ok)
        return self._response(request, result, status, queue_id, topic, transaction_id)

    def _response(
        self,
        request: RemotingCommand,
        result: PutResult,
        status: PutStatus,
        queue_id: int,
        topic: str,
        transaction_id: str | None,
    ) -> RemotingCommand:
        state = self._state
        code, remark = put_response_code(status, result.remark)
        if code not in _STORED_CODES:
            state.stats.on_put_failed()
            return request.response(code, remark, {})
        state.stats.on_put(topic, len(result.commit_log_offsets), result.wrote_bytes)
        config = state.config
        ext = {
            "msgId": join_offset_msg_ids(*state.store_host, result.commit_log_offsets),
            "queueId": str(queue_id),
            "queueOffset": str(result.queue_offset),
            MessageConst.MSG_REGION: config.region_id,
            MessageConst.TRACE_SWITCH: "true" if config.trace_on else "false",
        }
        if transaction_id is not None:
            # A single message's UNIQ_KEY, as RocketMQ answers it (SendResult.transactionId).
            ext["transactionId"] = transaction_id
        return request.response(code, remark, ext)
