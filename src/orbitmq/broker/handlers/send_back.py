"""CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it failed to consume.

Send-back (remoting-protocol §2.11) stores a copy of the failed message in ``%RETRY%<group>``
with ``reconsumeTimes + 1``, or in ``%DLQ%<group>`` once the group's maximum is reached (or the
consumer asks with a negative delay level); the retry waits in ``SCHEDULE_TOPIC_XXXX`` for its
delay level (3 + reconsumeTimes unless the consumer names one). A slave refuses it as it
refuses sends (:meth:`SendHandlers.check_broker_writable`).
"""

from __future__ import annotations

import random

from orbitmq.broker.handlers import BrokerState
from orbitmq.broker.handlers.send import SendHandlers
from orbitmq.broker.schedule import to_schedule
from orbitmq.broker.status_map import put_response_code
from orbitmq.broker.validation import dlq_topic, retry_topic
from orbitmq.model.message import MessageConst
from orbitmq.model.route import PERM_READ_WRITE, PERM_WRITE
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import INT32_MAX, ConsumerSendMsgBackRequestHeader
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.store.message_store import PutMessageRequest, PutStatus
from orbitmq.transport.server import RequestContext


class SendBackHandlers:
    """Consumer send-backs, through the send handlers' broker and topic checks."""

    def __init__(self, state: BrokerState, send: SendHandlers) -> None:
        self._state = state
        self._send = send

    async def consumer_send_msg_back(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """CONSUMER_SEND_MSG_BACK: re-store a failed message for retry (or dead-letter it)."""
        header = ConsumerSendMsgBackRequestHeader.from_ext(request.ext_fields)
        state = self._state
        group_config = state.groups.find_or_create(header.group, state.config.auto_create_subscription_group)
        if group_config is None:
            return request.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{header.group}] not exist"
            )
        rejection = self._send.check_broker_writable()
        if rejection is not None:
            return rejection.response(request)
        if group_config.retry_queue_nums <= 0:
            return request.response(ResponseCode.SUCCESS, None, {})
        raw = state.store.read_message(header.commit_log_offset)
        if raw is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"look message by offset failed, commit-log offset {header.commit_log_offset}",
            )
        original, _ = decode_stored_message(raw)
        properties = dict(original.properties)
        properties.setdefault(MessageConst.RETRY_TOPIC, original.topic)
        limit = (
            header.max_reconsume_times
            if header.max_reconsume_times is not None
            else group_config.retry_max_times
        )
        delay_level = 0
        if original.reconsume_times >= limit or header.delay_level < 0:
            target, queue_id = dlq_topic(header.group), 0
            topic_config = self._send.ensure_topic(target, 1, PERM_WRITE)
        else:
            target = retry_topic(header.group)
            topic_config = self._send.ensure_topic(target, group_config.retry_queue_nums, PERM_READ_WRITE)
            queue_id = random.randrange(max(topic_config.write_queue_nums, 1))
            delay_level = header.delay_level or 3 + original.reconsume_times
        rejection = self._send.targets.check("send-back", original.msg_id, target, queue_id)
        if rejection is not None:
            return rejection.response(request)
        properties.setdefault(MessageConst.ORIGIN_MESSAGE_ID, header.origin_msg_id or original.offset_msg_id)
        put = PutMessageRequest(
            topic=target,
            queue_id=queue_id,
            body=original.body,
            flag=original.flag,
            properties=properties,
            sys_flag=original.sys_flag,
            born_timestamp=original.born_timestamp,
            born_host=original.born_host,
            store_host=state.store_host,
            # Saturates: a record's count is a 32-bit int, and past the group's maximum it is DLQ'd.
            reconsume_times=min(original.reconsume_times + 1, INT32_MAX),
        )
        if delay_level > 0 and state.schedule is not None:
            to_schedule(put, delay_level, state.schedule.level_count)
        result = state.store.put_message(put)
        if (
            state.recorder is not None
            and result.status is PutStatus.PUT_OK
            and target != retry_topic(header.group)
        ):
            state.recorder.count_dlq(header.group, original.topic)
        code, remark = put_response_code(result.status, result.remark)
        if code == ResponseCode.SUCCESS:
            state.stats.on_send_back(header.group, original.topic)
        return request.response(code, remark, {})
