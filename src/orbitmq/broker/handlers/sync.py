"""What a slave asks its master for (SlaveSynchronize, ha-replication §3) and the HA status.

GET_ALL_TOPIC_CONFIG (21) lives in ``admin.py`` and GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) in
``group_admin.py`` (RocketMQ's tools ask for it too); here: GET_ALL_CONSUMER_OFFSET (43) with the
transaction check progress as RocketMQ keeps it (the half topic's offset of group
``CID_RMQ_SYS_TRANS``), GET_ALL_DELAY_OFFSET (45), GET_TIMER_CHECK_POINT (60, RocketMQ's binary TimerCheckpoint) and GET_BROKER_HA_STATUS (907: RocketMQ's
HARuntimeInfo JSON, read by ``orbitmq admin cluster list``). Every broker answers them, a
slave too (a slave of a slave copies from it). Reading never clears a table's dirty flag.

And the other way: MERGE_CONSUMER_OFFSET (40003, OrbitMQ's own) brings a slave's consumer
offsets that moved ahead while this master was away; each is taken when it is ahead of this
broker's (the larger offset wins; a pending admin reset is kept). Admin-only under ACL.
"""

from __future__ import annotations

import logging

import orjson

from orbitmq.broker.handlers import BrokerState
from orbitmq.broker.offsets import ConsumerOffsetTable
from orbitmq.broker.replication.metadata import TRANSACTION_CHECK_GROUP
from orbitmq.broker.validation import TRANS_HALF_TOPIC
from orbitmq.errors import ConfigError
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.timer_checkpoint import TimerCheckpointBody, encode_timer_checkpoint
from orbitmq.transport.log_limit import LogLimiter
from orbitmq.transport.server import RequestContext

logger = logging.getLogger(__name__)
_log_limit = LogLimiter(logger)  # merges come from any peer: one line per interval


class SyncHandlers:
    """The tables a slave copies, and the replication status."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    async def get_all_consumer_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        extra = {}
        transactions = self._state.transactions
        if transactions is not None:
            extra[(TRANS_HALF_TOPIC, TRANSACTION_CHECK_GROUP)] = {0: transactions.check_offset}
        return request.response(ResponseCode.SUCCESS, None, {}, self._state.offsets.snapshot(extra))

    async def merge_consumer_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            offsets = ConsumerOffsetTable.decode(request.body, "the merged offsets", log_skipped=False)
        except ConfigError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc), {})
        changed = self._state.offsets.merge_max(offsets)
        if changed:
            _log_limit.log(
                logging.INFO,
                "merge-consumer-offset",
                "%d consumer offsets merged from %s (ahead of this broker's)",
                changed,
                ctx.peer_address,
            )
        return request.response(ResponseCode.SUCCESS, f"{changed} offsets moved", {})

    async def get_all_delay_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        schedule = self._state.schedule
        if schedule is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "no delay-level service on this broker", {})
        return request.response(ResponseCode.SUCCESS, None, {}, schedule.offsets.encode())

    async def get_timer_check_point(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        timer = self._state.timer
        if timer is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, "timed messages are not served by this broker", {}
            )
        # RocketMQ's TimerCheckpoint encoding, which Java slaves (and OrbitMQ's) read.
        body = encode_timer_checkpoint(
            TimerCheckpointBody(
                last_read_time_ms=timer.dequeue_ms,
                last_timer_log_flush_pos=0,
                last_timer_queue_offset=timer.enqueue_queue_offset,
                master_timer_queue_offset=timer.enqueue_queue_offset,
            )
        )
        return request.response(ResponseCode.SUCCESS, None, {}, body)

    async def get_broker_ha_status(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        replication = self._state.replication
        if replication is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "replication is not started", {})
        info = replication.runtime_info()
        if self._state.replicas is not None:
            info["controllerMode"] = self._state.replicas.status()
        return request.response(ResponseCode.SUCCESS, None, {}, orjson.dumps(info))

    async def get_broker_epoch_cache(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE (1007): epoch entries and max offset (controller mode)."""
        replicas = self._state.replicas
        if replicas is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "this broker is not in controller mode", {})
        return request.response(ResponseCode.SUCCESS, None, {}, orjson.dumps(replicas.epoch_cache()))
