"""END_TRANSACTION (37): a producer's commit or rollback of a half message (remoting-protocol §2.15).

The work is in :class:`orbitmq.broker.transaction.TransactionService`; this handler reads the
header, ignores "unknown" (0) decisions (no response, as RocketMQ), and answers with the
service's outcome. Producers usually send it oneway, and then the transport drops the answer.
A slave answers SLAVE_NOT_AVAILABLE, as RocketMQ does: only the master decides.
"""

from __future__ import annotations

import logging

from orbitmq.broker.config import BrokerRole
from orbitmq.broker.handlers import BrokerState
from orbitmq.model.message import SysFlag
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import EndTransactionRequestHeader
from orbitmq.transport.log_limit import LogLimiter
from orbitmq.transport.server import RequestContext

logger = logging.getLogger(__name__)
# A producer (or anyone) can send failing decisions at any rate: one line per interval.
_log_limit = LogLimiter(logger)

_DECISIONS = (SysFlag.TRANSACTION_COMMIT_TYPE, SysFlag.TRANSACTION_ROLLBACK_TYPE)


class TransactionHandlers:
    """END_TRANSACTION."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    async def end_transaction(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = EndTransactionRequestHeader.from_ext(request.ext_fields)
        if header.commit_or_rollback not in _DECISIONS:
            logger.debug(
                "producer %s left transaction %s unknown (check=%s)",
                ctx.peer_address, header.msg_id, header.from_transaction_check,
            )  # fmt: skip
            return None
        if self._state.config.broker_role is BrokerRole.SLAVE:
            return request.response(
                ResponseCode.SLAVE_NOT_AVAILABLE,
                f"the broker[{self._state.config.broker_name}] is a slave: end the transaction on its master",
                {},
            )
        service = self._state.transactions
        if service is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, "transactions are not available on this broker"
            )
        outcome = service.end_transaction(header)
        if outcome.code != ResponseCode.SUCCESS:
            _log_limit.warning(
                "end-transaction-failed",
                "END_TRANSACTION from %s for %s (commit-log offset %d) failed: %s",
                ctx.peer_address, header.msg_id, header.commit_log_offset, outcome.remark,
            )  # fmt: skip
        return request.response(outcome.code, outcome.remark, {})
