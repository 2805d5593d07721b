"""TransactionProducer: send a half message, run a local transaction, then commit or roll back.

Flow (RocketMQ's TransactionMQProducer, remoting-protocol §2.15):

1. :meth:`TransactionProducer.send_message_in_transaction` marks the message ``TRAN_MSG=true``
   and ``PGROUP=<group>`` and sends it like any message; the broker keeps it as an invisible
   half message.
2. Once the half message is stored, ``execute_local_transaction(message, arg)`` runs and
   returns a :class:`LocalTransactionState`; an exception counts as UNKNOWN (logged). A failed
   send is not executed and counts as ROLLBACK.
3. END_TRANSACTION (oneway) tells the broker that stored the half message the decision; the
   commit-log offset comes from the send result's offsetMsgId. UNKNOWN leaves the decision to
   the broker's check-back.
4. When the broker checks back (CHECK_TRANSACTION_STATE, routed here by the client instance),
   ``check_local_transaction(message)`` answers and the producer sends END_TRANSACTION with
   ``fromTransactionCheck=true`` to the checking broker.

Callbacks may be plain functions or coroutine functions; plain ones run on the event loop, so
they should be quick.
"""

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from orbitmq.client._send import SendResult, SendStatus
from orbitmq.client._trace import now_ms
from orbitmq.client.config import ProducerConfig
from orbitmq.client.producer import Producer
from orbitmq.errors import MessageValidationError, OrbitError, RemoteProtocolError
from orbitmq.model.message import Message, MessageConst, MessageExt, SysFlag
from orbitmq.protocol.codes import RequestCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.protocol.trace_data import MSG_TYPE_TRANS_COMMIT, TRACE_TYPE_END_TRANSACTION, TraceRecord

__all__ = ["LocalTransactionState", "TransactionProducer", "TransactionSendResult"]

logger = logging.getLogger(__name__)


class LocalTransactionState(enum.Enum):
    """What the local transaction decided."""

    COMMIT = "COMMIT_MESSAGE"
    ROLLBACK = "ROLLBACK_MESSAGE"
    UNKNOWN = "UNKNOW"


_WIRE_DECISION = {
    LocalTransactionState.COMMIT: SysFlag.TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK: SysFlag.TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOWN: SysFlag.TRANSACTION_NOT_TYPE,
}

_TRACE_STATE = {
    LocalTransactionState.COMMIT: "COMMIT_MESSAGE",
    LocalTransactionState.ROLLBACK: "ROLLBACK_MESSAGE",
    LocalTransactionState.UNKNOWN: "UNKNOW",
}

ExecuteLocalTransaction = Callable[[Message, Any], LocalTransactionState | Awaitable[LocalTransactionState]]
"""``execute_local_transaction(message, arg) -> state`` (may be async)."""

CheckLocalTransaction = Callable[[MessageExt], LocalTransactionState | Awaitable[LocalTransactionState]]
"""``check_local_transaction(message) -> state`` (may be async); ``message.topic`` is the real topic."""


@dataclass(slots=True)
class TransactionSendResult:
    """The half message's :class:`SendResult` and what the local transaction decided."""

    send_result: SendResult
    local_transaction_state: LocalTransactionState

    @property
    def msg_id(self) -> str:
        return self.send_result.msg_id


class TransactionProducer(Producer):
    """A :class:`Producer` that also sends transactional messages and answers check-backs.

    Args:
        group: the producer group; check-backs go to any live producer of it.
        namesrv_addr: name servers as ``"host:port;host:port"``.
        execute_local_transaction: runs the local transaction of one half message.
        check_local_transaction: answers the broker's question about an undecided one.
        config, **options: as for :class:`Producer`.
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        execute_local_transaction: ExecuteLocalTransaction,
        check_local_transaction: CheckLocalTransaction,
        config: ProducerConfig | None = None,
        **options: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, config=config, **options)
        self._execute = execute_local_transaction
        self._check = check_local_transaction
        self._introduced_to: set[str] = set()  # brokers that know this producer's connection

    async def send_message_in_transaction(self, message: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``message`` as a half message, run the local transaction, report its decision.

        Raises:
            MessageValidationError: the message is delayed or timed (not allowed), or breaks a
                send rule.
            ClientStateError, NoRouteError, OrbitError: as :meth:`Producer.send`.
        """
        if message.delay_level > 0 or any(
            key in message.properties
            for key in (
                MessageConst.TIMER_DELIVER_MS,
                MessageConst.TIMER_DELAY_MS,
                MessageConst.TIMER_DELAY_SEC,
                MessageConst.START_DELIVER_TIME,
            )
        ):
            raise MessageValidationError(f"transactional message to topic {message.topic} cannot be delayed")
        message.properties[MessageConst.TRANSACTION_PREPARED] = "true"
        message.properties[MessageConst.PRODUCER_GROUP] = self.group
        result = await self.send(message)
        await self._introduce_to(result.message_queue.broker_name)
        if result.status is SendStatus.OK:
            state = await self._run_local(message, arg)
        else:
            state = LocalTransactionState.ROLLBACK
        try:
            await self._end_transaction(result, state)
            self._trace_end(message, result.msg_id, result.transaction_id, state, from_check=False)
        except OrbitError as exc:
            # The broker's check-back settles the transaction when this report is lost.
            logger.warning("reporting %s for transaction %s failed: %s", state.name, result.msg_id, exc)
        return TransactionSendResult(result, state)

    async def _introduce_to(self, broker_name: str) -> None:
        """Heartbeat at once the first time a broker holds our half message.

        A broker checks back only over connections of producers it has heard from; without this
        it would wait for the periodic heartbeat, and a check due before it would find nobody.
        """
        if broker_name in self._introduced_to:
            return
        self._introduced_to.add(broker_name)
        await self._running_instance().send_heartbeat_to_all_brokers()

    async def _run_local(self, message: Message, arg: Any) -> LocalTransactionState:
        try:
            outcome = self._execute(message, arg)
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except Exception:
            logger.exception("local transaction of message %s raised; state UNKNOWN", message.uniq_key)
            return LocalTransactionState.UNKNOWN
        return _as_state(outcome, message.uniq_key)

    async def _end_transaction(self, result: SendResult, state: LocalTransactionState) -> None:
        try:
            offset_id = decode_offset_msg_id(result.offset_msg_id)
        except RemoteProtocolError as exc:
            logger.warning("transaction %s: %s; leaving it to the check-back", result.msg_id, exc)
            return
        instance = self._running_instance()
        addr = instance.find_broker_addr(result.message_queue.broker_name, only_this=True) or offset_id.addr
        header = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=offset_id.commit_log_offset,
            commit_or_rollback=_WIRE_DECISION[state],
            msg_id=result.msg_id,
            from_transaction_check=False,
            transaction_id=result.transaction_id or result.msg_id,
        )
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext(), oneway=True)
        request.remark = f"local state {state.name}"
        await instance.remoting.invoke_oneway(addr, request)

    async def check_transaction_state(
        self, broker_addr: str, header: CheckTransactionStateRequestHeader, message: MessageExt
    ) -> None:
        """Answer a broker's CHECK_TRANSACTION_STATE (called by the client instance)."""
        try:
            outcome = self._check(message)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            state = _as_state(outcome, message.uniq_key)
        except Exception:
            logger.exception("check of transaction %s raised; state UNKNOWN", message.uniq_key)
            state = LocalTransactionState.UNKNOWN
        end = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=_WIRE_DECISION[state],
            msg_id=header.msg_id or message.uniq_key or "",
            from_transaction_check=True,
            transaction_id=header.transaction_id,
        )
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, end.to_ext(), oneway=True)
        request.remark = f"checked state {state.name}"
        await self._running_instance().remoting.invoke_oneway(broker_addr, request)
        self._trace_end(message, message.uniq_key or "", header.transaction_id, state, from_check=True)

    def _trace_end(
        self,
        message: Message,
        msg_id: str,
        transaction_id: str | None,
        state: LocalTransactionState,
        *,
        from_check: bool,
    ) -> None:
        """An EndTransaction trace record (when tracing)."""
        trace = self._trace
        if trace is None:
            return
        trace.append(
            [
                TraceRecord(
                    TRACE_TYPE_END_TRANSACTION,
                    timestamp=now_ms(),
                    region_id="DefaultRegion",
                    group=self.group,
                    topic=message.topic,
                    msg_id=msg_id,
                    tags=message.tags,
                    keys=message.properties.get(MessageConst.KEYS),
                    msg_type=MSG_TYPE_TRANS_COMMIT,
                    transaction_id=transaction_id or msg_id,
                    transaction_state=_TRACE_STATE[state],
                    from_transaction_check=from_check,
                )
            ]
        )


def _as_state(outcome: object, uniq_key: str | None) -> LocalTransactionState:
    if isinstance(outcome, LocalTransactionState):
        return outcome
    logger.warning(
        "transaction %s: callback returned %r, not a LocalTransactionState; UNKNOWN", uniq_key, outcome
    )
    return LocalTransactionState.UNKNOWN
