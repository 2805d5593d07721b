"""RECALL_MESSAGE (370): cancel a timed message before it is due (RocketMQ 5.3's recall).

The request names the message by its recall handle (``protocol.recall``). The broker checks
that the handle is for this broker and topic and that the message is still ahead (and within
``timerMaxDelaySec``), then stores a recall marker in the timer topic (``broker.timer``); the
answer's ``msgId`` is the recalled message's id. A marker for a message that does not exist
(or was already delivered) changes nothing, as in RocketMQ.

Recall is served only with ``recallMessageEnable=true``; it is off by default, as in RocketMQ.
Every answer carries the broker's ``MSG_REGION``, as RocketMQ's does.

| refusal (in the order checked) | code |
| --- | --- |
| ``recallMessageEnable`` off | NO_PERMISSION ``recall failed, operation is forbidden`` |
| a slave broker | SLAVE_NOT_AVAILABLE |
| timer wheel off, or the broker not writable | NO_PERMISSION / SERVICE_NOT_AVAILABLE |
| unknown topic | TOPIC_NOT_EXIST |
| malformed handle, other topic or broker, due time past or too far | ILLEGAL_OPERATION |
"""

from __future__ import annotations

from orbitmq.broker.config import BrokerRole
from orbitmq.broker.handlers import BrokerState, now_ms
from orbitmq.broker.status_map import put_response_code
from orbitmq.broker.timer import recall_marker
from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageConst
from orbitmq.model.route import PERM_WRITE
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import RecallMessageRequestHeader
from orbitmq.protocol.recall import RecallHandle
from orbitmq.transport.server import RequestContext


class RecallHandlers:
    """Recall of timed messages."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    async def recall_message(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        response = self._recall(request)
        response.ext_fields.setdefault(MessageConst.MSG_REGION, self._state.config.region_id)
        return response

    def _recall(self, request: RemotingCommand) -> RemotingCommand:
        state = self._state
        header = RecallMessageRequestHeader.from_ext(request.ext_fields)
        topic = header.topic
        if not state.config.recall_message_enable:
            return request.response(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if state.config.broker_role is BrokerRole.SLAVE:
            # A slave runs no timer of its own; the marker must go to the master's log.
            return request.response(
                ResponseCode.SLAVE_NOT_AVAILABLE,
                f"recall failed, broker {state.config.broker_name} is a slave: recall on its master",
            )
        if state.timer is None:
            return request.response(ResponseCode.NO_PERMISSION, "recall failed, timerWheelEnable is off")
        if not state.config.broker_permission & PERM_WRITE:
            return request.response(ResponseCode.SERVICE_NOT_AVAILABLE, "recall failed, broker not writable")
        if state.topics.get(topic) is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{topic}] not exist"
            )
        try:
            handle = RecallHandle.decode(header.recall_handle)
        except RemoteProtocolError as exc:
            return request.response(ResponseCode.ILLEGAL_OPERATION, str(exc))
        if handle.topic != topic:
            return request.response(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if handle.broker_name != state.config.broker_name:
            return request.response(
                ResponseCode.ILLEGAL_OPERATION, "recall failed, the handle is of another broker"
            )
        current_ms = now_ms()
        left_ms = handle.due_ms - current_ms
        if left_ms <= 0 or left_ms >= state.config.timer_max_delay_sec * 1000:
            return request.response(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        marker = recall_marker(topic, handle.message_id, handle.due_ms, state.store_host, current_ms)
        result = state.store.put_message(marker)
        code, remark = put_response_code(result.status, result.remark)
        if code is not ResponseCode.SUCCESS:
            return request.response(code, remark)
        return request.response(ResponseCode.SUCCESS, None, {"msgId": handle.message_id})
