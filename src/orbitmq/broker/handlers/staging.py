"""STAGE_MESSAGES (40001) and COMMIT_STAGED (40002): staged writes, committed once per key.

OrbitMQ's own requests (``protocol/staging.py``); the work is in
:class:`orbitmq.broker.staging.StagingService`. STAGE_MESSAGES is checked like a batch send
(broker writable, topic name and permission, queue id, auto-creation from the template topic)
before its body is stored as one staged record; the answer names the record's commit-log
offset. COMMIT_STAGED answers ``alreadyCommitted`` and, when the key was committed before, the
recorded commit as its body. Under SYNC_FLUSH both answer once their records are on disk, and
on a SYNC_MASTER COMMIT_STAGED answers once a slave holds every byte of the commit
(``handlers.replicated``), the staged records it names included; without one it answers
FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE as a send does, and a commit sent again finds the
key already committed and waits the same way.
A slave answers both with SERVICE_NOT_AVAILABLE: it stores no message of its own. So does a
broker in controller mode that is not master (a demoted master included); one just promoted
answers SYSTEM_BUSY until it has loaded the ledger it copied as a slave.
"""

from __future__ import annotations

import asyncio
import logging
import re

from orbitmq.broker.config import BrokerRole
from orbitmq.broker.handlers import BrokerState
from orbitmq.broker.handlers.replicated import replicated_status
from orbitmq.broker.staging import CommitOutcome
from orbitmq.broker.status_map import put_response_code
from orbitmq.broker.validation import Rejection, check_group_name, check_queue_id, check_send_topic
from orbitmq.errors import RemoteProtocolError
from orbitmq.model.route import PERM_WRITE, TopicConfig
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.staging import CommitBody, CommitStagedRequestHeader, StageMessagesRequestHeader
from orbitmq.store.config import FlushDiskType
from orbitmq.store.message_store import PutStatus
from orbitmq.transport.server import RequestContext

logger = logging.getLogger(__name__)

_WRITE_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


class StagingHandlers:
    """STAGE_MESSAGES and COMMIT_STAGED."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    def _unavailable(self, request: RemotingCommand) -> RemotingCommand:
        config = self._state.config
        replicas = self._state.replicas
        if config.broker_role is BrokerRole.SLAVE or (replicas is not None and not replicas.is_master):
            return request.response(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                f"service not available now: the broker[{config.broker_name}] is not master "
                f"(brokerId {config.broker_id}); staged writes go to its master",
            )
        if self._state.staging is not None:
            return request.response(
                ResponseCode.SYSTEM_BUSY,
                f"[STAGING]broker busy: the broker[{config.broker_name}] is loading its staged-writes "
                "ledger after becoming master; try again",
            )
        return request.response(ResponseCode.SYSTEM_ERROR, "staged writes are not available on this broker")

    async def stage_messages(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = StageMessagesRequestHeader.from_ext(request.ext_fields)
        state = self._state
        service = state.staging
        if service is None or not service.serving:
            return self._unavailable(request)
        if not state.config.broker_permission & PERM_WRITE:
            return request.response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{state.config.broker_name}] sending message is forbidden",
            )
        rejection = (
            check_send_topic(header.topic)
            or check_group_name(header.producer_group)
            or _check_key(header.write_id, header.batch_id)
        )
        if rejection is not None:
            return request.response(rejection.code, rejection.remark)
        topic_config = self._find_or_create_topic(header)
        if topic_config is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!"
            )
        if not topic_config.perm & PERM_WRITE:
            return request.response(
                ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] sending message is forbidden"
            )
        queue_count = max(topic_config.read_queue_nums, topic_config.write_queue_nums)
        rejection = check_queue_id(header.topic, header.queue_id, queue_count, header.producer_group)
        if rejection is None and header.queue_id < 0:
            rejection = _illegal(f"staged messages need a queue id, got {header.queue_id}")
        if rejection is not None:
            return request.response(rejection.code, rejection.remark)
        result = service.stage(
            header.topic,
            header.queue_id,
            header.producer_group,
            (header.write_id, header.batch_id),
            request.body,
            (header.born_timestamp, (ctx.peer_host, ctx.peer_port)),
        )
        if isinstance(result, Rejection):
            return request.response(result.code, result.remark, {})
        status = result.status
        wait = status is PutStatus.PUT_OK and result.flush_future is not None and self._sync_flush()
        if wait and result.flush_future is not None and not await asyncio.wrap_future(result.flush_future):
            status = PutStatus.FLUSH_DISK_TIMEOUT
        code, remark = put_response_code(status, result.remark)
        if code != ResponseCode.SUCCESS:
            return request.response(code, remark, {})
        ext = {"commitLogOffset": str(result.commit_log_offsets[0]), "queueOffset": str(result.queue_offset)}
        return request.response(ResponseCode.SUCCESS, None, ext)

    async def commit_staged(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = CommitStagedRequestHeader.from_ext(request.ext_fields)
        service = self._state.staging
        if service is None or not service.serving:
            return self._unavailable(request)
        rejection = _check_key(header.write_id, header.batch_id)
        if rejection is not None:
            return request.response(rejection.code, rejection.remark)
        try:
            body = CommitBody.decode(request.body)
        except RemoteProtocolError as exc:
            return request.response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
        outcome = await service.commit((header.write_id, header.batch_id), body)
        if not isinstance(outcome, CommitOutcome):
            logger.warning(
                "COMMIT_STAGED from %s for write %s batch %d failed: %s",
                ctx.peer_address, header.write_id, header.batch_id, outcome.remark,
            )  # fmt: skip
            return request.response(outcome.code, outcome.remark, {})
        # Every record of the commit (and the staged records it names, written before it) lies
        # below the store's end now: a SYNC_MASTER answers once a slave holds them all.
        status = await replicated_status(self._state, self._state.store.max_commit_log_offset)
        if status is not PutStatus.PUT_OK:
            code, remark = put_response_code(status)
            key = f"{header.write_id}/{header.batch_id}"
            return request.response(code, f"commit {key} is stored but not acknowledged: {remark}", {})
        ext = {"alreadyCommitted": "true" if outcome.already else "false", "messages": str(outcome.messages)}
        return request.response(
            ResponseCode.SUCCESS, None, ext, outcome.body.encode() if outcome.already else b""
        )

    def _sync_flush(self) -> bool:
        return self._state.store_config.flush_disk_type is FlushDiskType.SYNC_FLUSH

    def _find_or_create_topic(self, header: StageMessagesRequestHeader) -> TopicConfig | None:
        topics = self._state.topics
        existing = topics.get(header.topic)
        if existing is not None or not self._state.config.auto_create_topic_enable:
            return existing
        created = topics.create_from_template(
            header.topic, header.default_topic, header.default_topic_queue_nums
        )
        if created is not None:
            self._state.on_topics_changed()
        return created


def _illegal(remark: str) -> Rejection:
    return Rejection(ResponseCode.MESSAGE_ILLEGAL, remark)


def _check_key(write_id: str, batch_id: int) -> Rejection | None:
    if not _WRITE_ID.match(write_id):
        return _illegal(f"writeId {write_id[:40]!r} must be 1..128 of [A-Za-z0-9_.-]")
    if batch_id < 0:
        return _illegal(f"batchId {batch_id} must be >= 0")
    return None
