"""Consumer-group requests to brokers: member list, orderly queue locks and message send-back."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from orbitmq.errors import error_for_code
from orbitmq.model.heartbeat import SubscriptionData
from orbitmq.model.message import MessageExt, MessageQueue
from orbitmq.protocol.admin_bodies import CheckClientRequestBody, encode_check_client_body
from orbitmq.protocol.bodies import (
    LockBatchRequestBody,
    UnlockBatchRequestBody,
    decode_consumer_id_list,
    decode_lock_batch_response,
    encode_lock_batch_request,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import ConsumerSendMsgBackRequestHeader, GetConsumerListByGroupRequestHeader

logger = logging.getLogger(__name__)

DELAY_LEVEL_DEAD_LETTER = -1
"""A send-back with a negative delay level goes straight to %DLQ%<group>."""


class BrokerInvoker(Protocol):
    async def invoke_broker(
        self,
        broker_name: str,
        request: RemotingCommand,
        timeout_ms: int | None = None,
        broker_id: int = 0,
        *,
        only_this: bool = False,
    ) -> RemotingCommand: ...


async def consumer_ids(invoker: BrokerInvoker, broker_name: str, group: str) -> list[str]:
    """GET_CONSUMER_LIST_BY_GROUP: the client ids of the group's members that ``broker_name`` knows.

    Raises:
        BrokerResponseError: the broker knows no member (it answers SYSTEM_ERROR then).
        RemotingError: the broker cannot be reached.
    """
    header = GetConsumerListByGroupRequestHeader(group)
    request = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_ext())
    response = await invoker.invoke_broker(broker_name, request)
    if response.code != ResponseCode.SUCCESS:
        raise error_for_code(
            response.code, f"members of group {group} on {broker_name}: {response.remark or ''}"
        )
    return decode_consumer_id_list(response.body)


async def check_client_config(
    invoker: BrokerInvoker, broker_name: str, group: str, client_id: str, subscription: SubscriptionData
) -> None:
    """CHECK_CLIENT_CONFIG: can ``broker_name`` serve this (SQL92) subscription?

    Raises:
        BrokerResponseError: SUBSCRIPTION_PARSE_FAILED (the expression does not compile there)
            or SYSTEM_ERROR (the broker does not filter by properties); names the broker.
        RemotingError: the broker cannot be reached.
    """
    body = encode_check_client_body(CheckClientRequestBody(client_id, group, subscription))
    request = RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, body)
    response = await invoker.invoke_broker(broker_name, request)
    if response.code != ResponseCode.SUCCESS:
        raise error_for_code(
            response.code,
            f"subscription of group {group} to {subscription.topic} refused by broker {broker_name}: "
            f"{response.remark or ''}",
        )


async def lock_queues(
    invoker: BrokerInvoker, broker_name: str, group: str, client_id: str, queues: Iterable[MessageQueue]
) -> set[MessageQueue]:
    """LOCK_BATCH_MQ: lock (or renew) ``queues`` of one broker; returns the ones now held."""
    body = LockBatchRequestBody(group, client_id, set(queues))
    request = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, encode_lock_batch_request(body))
    # Only a master locks queues for orderly consumption, as in RocketMQ.
    response = await invoker.invoke_broker(broker_name, request, only_this=True)
    if response.code != ResponseCode.SUCCESS:
        raise error_for_code(
            response.code, f"lock queues of group {group} on {broker_name}: {response.remark or ''}"
        )
    return decode_lock_batch_response(response.body)


async def unlock_queues(
    invoker: BrokerInvoker, broker_name: str, group: str, client_id: str, queues: Iterable[MessageQueue]
) -> None:
    """UNLOCK_BATCH_MQ (failures logged: an unrenewed lock expires on the broker anyway)."""
    body = UnlockBatchRequestBody(group, client_id, set(queues))
    request = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, {}, encode_lock_batch_request(body))
    try:
        await invoker.invoke_broker(broker_name, request)
    except Exception as exc:  # the lock expires after 60 s without renewal
        logger.info(
            "unlock of %d queues of group %s on %s failed: %s", len(body.mq_set), group, broker_name, exc
        )


async def send_back(
    invoker: BrokerInvoker,
    broker_name: str,
    group: str,
    message: MessageExt,
    *,
    delay_level: int = 0,
    max_reconsume_times: int = 16,
) -> bool:
    """CONSUMER_SEND_MSG_BACK for a failed message; False (logged) when the broker did not take it.

    ``delay_level`` 0 lets the broker pick 3 + reconsume times; the broker moves the message
    to %DLQ%<group> once it has been reconsumed ``max_reconsume_times`` times.
    """
    header = ConsumerSendMsgBackRequestHeader(
        commit_log_offset=message.commit_log_offset,
        group=group,
        delay_level=delay_level,
        origin_msg_id=message.msg_id,
        origin_topic=message.topic,
        max_reconsume_times=max_reconsume_times,
    )
    request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext())
    try:
        response = await invoker.invoke_broker(broker_name, request)
    except Exception as exc:  # the caller keeps the message and retries locally
        logger.warning("send-back of %s (group %s) to %s failed: %s", message.msg_id, group, broker_name, exc)
        return False
    if response.code != ResponseCode.SUCCESS:
        logger.warning(
            "send-back of %s (group %s) to %s refused: %d %s",
            message.msg_id,
            group,
            broker_name,
            response.code,
            response.remark,
        )
        return False
    return True
