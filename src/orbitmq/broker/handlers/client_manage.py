"""HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, LOCK_BATCH_MQ, UNLOCK_BATCH_MQ, CHECK_CLIENT_CONFIG.

A heartbeat registers the client's connection in every producer and consumer group it names.
For each consumer group it also creates the group's config and its ``%RETRY%<group>`` topic
(1 queue, perm 6) when ``autoCreateSubscriptionGroup`` is on, and stores the group's
subscriptions (tag filters recomputed from the expressions). When a group's members or
subscriptions change, every member gets NOTIFY_CONSUMER_IDS_CHANGED (oneway) and rebalances.
The same notification follows an unregister, a closed connection and an expiry
(:meth:`ClientManageHandlers.on_connection_closed`, :meth:`ClientManageHandlers.scan_expired`).

CHECK_CLIENT_CONFIG is what a consumer asks before it subscribes with SQL92: does this broker
filter by properties (``enablePropertyFilter``), and does the expression compile? A failure
answers SUBSCRIPTION_PARSE_FAILED naming the position, so the consumer fails at start.
"""

from __future__ import annotations

import logging

from orbitmq.broker.clients import ClientChannel, GroupSubscription
from orbitmq.broker.handlers import BrokerState, now_ms
from orbitmq.broker.validation import retry_topic
from orbitmq.errors import (
    BadRequestError,
    BrokerResponseError,
    FilterExpressionError,
    RemoteProtocolError,
    RemotingError,
)
from orbitmq.filter import EXPRESSION_TYPE_TAG, compiled_filter
from orbitmq.model.heartbeat import ConsumerData, HeartbeatData
from orbitmq.model.message import MessageQueue
from orbitmq.model.route import PERM_READ_WRITE
from orbitmq.protocol.admin_bodies import decode_check_client_body
from orbitmq.protocol.bodies import (
    decode_heartbeat,
    decode_lock_batch_request,
    decode_unlock_batch_request,
    encode_consumer_id_list,
    encode_lock_batch_response,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    INT32_MAX,
    TEXT_MAX_CHARS,
    GetConsumerListByGroupRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
)
from orbitmq.protocol.names import group_name_problem, shorten, topic_name_problem
from orbitmq.transport.log_limit import LogLimiter
from orbitmq.transport.server import RequestContext, ServerConnection

logger = logging.getLogger(__name__)
# Membership lines follow client requests; a burst of them is summarised, not repeated.
_membership_log = LogLimiter(logger, 1.0)

LOCK_BATCH_MAX = 10_000
"""Most queues one LOCK_BATCH_MQ / UNLOCK_BATCH_MQ may name."""
SUBSCRIPTION_MAX_CHARS = 65535


def _check_heartbeat(heartbeat: HeartbeatData) -> None:
    """Every name and length of a heartbeat body, before anything is registered.

    Raises:
        BadRequestError: the remark names the field (the body is JSON, not a header).
    """
    if not 0 < len(heartbeat.client_id) <= TEXT_MAX_CHARS:
        raise BadRequestError(
            f"heartbeat: clientID has {len(heartbeat.client_id)} characters, not 1..{TEXT_MAX_CHARS}",
            field="clientID",
        )
    groups = [c.group_name for c in heartbeat.consumer_data_set] + [
        p.group_name for p in heartbeat.producer_data_set
    ]
    for group_name in groups:
        problem = group_name_problem(group_name)
        if problem is not None:
            raise BadRequestError(f"heartbeat: groupName: {problem}", field="groupName")
    for consumer in heartbeat.consumer_data_set:
        for sub in consumer.subscription_data_set:
            problem = topic_name_problem(sub.topic)
            if problem is None and len(sub.sub_string) > SUBSCRIPTION_MAX_CHARS:
                problem = (
                    f"subString has {len(sub.sub_string)} characters, more than {SUBSCRIPTION_MAX_CHARS}"
                )
            if problem is None and len(sub.expression_type) > TEXT_MAX_CHARS:
                problem = f"expressionType has {len(sub.expression_type)} characters"
            if problem is not None:
                raise BadRequestError(
                    f"heartbeat: subscription of group {consumer.group_name}: {problem}",
                    field="subscriptionDataSet",
                )


class ClientManageHandlers:
    """Client registration, consumer lists and orderly-consumer queue locks."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    async def heart_beat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        heartbeat = decode_heartbeat(request.body)
        _check_heartbeat(heartbeat)
        connection = ctx.connection
        self._check_tracked_clients(heartbeat, connection.id)
        timestamp_ms = now_ms()

        def channel() -> ClientChannel[ServerConnection]:
            return ClientChannel(
                connection.id,
                heartbeat.client_id,
                request.language,
                request.version,
                timestamp_ms,
                connection,
            )

        for consumer in heartbeat.consumer_data_set:
            self._register_consumer(consumer, channel())
        for producer in heartbeat.producer_data_set:
            self._state.producers.register(producer.group_name, channel())
        return request.response(ResponseCode.SUCCESS, None, {})

    def _check_tracked_clients(self, heartbeat: HeartbeatData, connection_id: int) -> None:
        """Refuse a heartbeat whose new memberships would pass maxTrackedClients."""
        state = self._state
        joining = sum(
            not state.consumers.is_member(c.group_name, connection_id) for c in heartbeat.consumer_data_set
        ) + sum(
            not state.producers.is_member(p.group_name, connection_id) for p in heartbeat.producer_data_set
        )
        tracked = state.consumers.member_count + state.producers.member_count
        limit = state.config.tracked_clients_max
        if joining and tracked + joining > limit:
            raise BrokerResponseError(
                ResponseCode.SYSTEM_ERROR,
                f"cannot track {joining} more group members: {tracked} tracked (maxTrackedClients={limit})",
            )

    def _register_consumer(self, consumer: ConsumerData, entry: ClientChannel[ServerConnection]) -> None:
        state = self._state
        group = consumer.group_name
        group_config = state.groups.find_or_create(group, state.config.auto_create_subscription_group)
        if group_config is not None and state.topics.get(retry_topic(group)) is None:
            state.topics.find_or_create(
                retry_topic(group), max(group_config.retry_queue_nums, 1), PERM_READ_WRITE
            )
            state.on_topics_changed()
        subscriptions = [
            GroupSubscription.parse(sub.topic, sub.sub_string, sub.expression_type, sub.sub_version)
            for sub in consumer.subscription_data_set
        ]
        changed = state.consumers.register(
            group,
            entry,
            subscriptions,
            consume_type=consumer.consume_type.name,
            message_model=consumer.message_model.name,
            consume_from_where=consumer.consume_from_where.name,
        )
        if changed:
            _membership_log.log(
                logging.INFO,
                "group-changed",
                "consumer group %s changed: members %s",
                group,
                shorten(str(state.consumers.client_ids(group)), 200),
            )
            self.notify_consumer_ids_changed(group)

    async def unregister_client(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = UnregisterClientRequestHeader.from_ext(request.ext_fields)
        connection_id = ctx.connection.id
        if header.producer_group:
            self._state.producers.unregister(header.producer_group, connection_id)
        if header.consumer_group and self._state.consumers.unregister(header.consumer_group, connection_id):
            _membership_log.log(
                logging.INFO,
                "group-left",
                "consumer %s left group %s",
                header.client_id,
                header.consumer_group,
            )
            self.notify_consumer_ids_changed(header.consumer_group)
        return request.response(ResponseCode.SUCCESS, None, {})

    async def get_consumer_list_by_group(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = GetConsumerListByGroupRequestHeader.from_ext(request.ext_fields)
        client_ids = self._state.consumers.client_ids(header.consumer_group)
        if not client_ids:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}", {}
            )
        return request.response(ResponseCode.SUCCESS, None, {}, encode_consumer_id_list(client_ids))

    async def lock_batch_mq(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        body = decode_lock_batch_request(request.body)
        queues = self._checked_queues(body.consumer_group, body.client_id, body.mq_set)
        locked = self._state.locks.try_lock(body.consumer_group, body.client_id, queues, now_ms())
        return request.response(ResponseCode.SUCCESS, None, {}, encode_lock_batch_response(locked))

    async def unlock_batch_mq(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        body = decode_unlock_batch_request(request.body)
        queues = self._checked_queues(body.consumer_group, body.client_id, body.mq_set)
        self._state.locks.unlock(body.consumer_group, body.client_id, queues)
        return request.response(ResponseCode.SUCCESS, None, {})

    @staticmethod
    def _checked_queues(group: str, client_id: str, mq_set: set[MessageQueue]) -> set[MessageQueue]:
        """The queues of a lock body, once its group, client id and every queue name pass their rules."""
        problem = group_name_problem(group)
        if problem is not None:
            raise BadRequestError(f"lock body: consumerGroup: {problem}", field="consumerGroup")
        if not 0 < len(client_id) <= TEXT_MAX_CHARS:
            raise BadRequestError(
                f"lock body: clientId has {len(client_id)} characters, not 1..{TEXT_MAX_CHARS}",
                field="clientId",
            )
        if len(mq_set) > LOCK_BATCH_MAX:
            raise BadRequestError(f"lock body: mqSet has {len(mq_set)} queues, more than {LOCK_BATCH_MAX}")
        for mq in mq_set:
            problem = topic_name_problem(mq.topic)
            if problem is None and not 0 <= mq.queue_id <= INT32_MAX:
                problem = f"queueId {mq.queue_id} is not 0..{INT32_MAX}"
            if problem is None and len(mq.broker_name) > TEXT_MAX_CHARS:
                problem = f"brokerName has {len(mq.broker_name)} characters"
            if problem is not None:
                raise BadRequestError(f"lock body: mqSet: {problem}", field="mqSet")
        return mq_set

    async def check_client_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            body = decode_check_client_body(request.body)
        except RemoteProtocolError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"bad CHECK_CLIENT_CONFIG body: {exc}")
        subscription = body.subscription_data
        expression_type = subscription.expression_type or EXPRESSION_TYPE_TAG
        if expression_type.upper() != EXPRESSION_TYPE_TAG and not self._state.config.enable_property_filter:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {expression_type} "
                "(enablePropertyFilter=false)",
            )
        try:
            compiled_filter(expression_type, subscription.sub_string)
        except FilterExpressionError as exc:
            return request.response(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"subscription of group [{body.group}] on topic [{subscription.topic}]: {exc}",
            )
        return request.response(ResponseCode.SUCCESS, None, {})

    # -- membership changes outside requests --------------------------------------------------

    def on_connection_closed(self, connection: ServerConnection) -> None:
        """Drop a closed connection from every group and notify the groups it left."""
        self._state.producers.on_connection_closed(connection.id)
        for group in self._state.consumers.on_connection_closed(connection.id):
            _membership_log.log(
                logging.INFO,
                "group-left",
                "connection %s closed: its consumer left group %s",
                connection.peer_address,
                group,
            )
            self.notify_consumer_ids_changed(group)

    def scan_expired(self) -> None:
        """Drop clients silent for longer than channelExpiredTimeout and notify their groups."""
        expiry_ms = self._state.config.channel_expired_timeout_ms
        timestamp_ms = now_ms()
        for group, client_id in self._state.producers.scan_expired(timestamp_ms, expiry_ms):
            logger.info("producer %s of group %s expired", client_id, group)
        for group in self._state.consumers.scan_expired(timestamp_ms, expiry_ms):
            logger.info("consumer group %s lost expired members", group)
            self.notify_consumer_ids_changed(group)

    def notify_consumer_ids_changed(self, group: str) -> None:
        """Send NOTIFY_CONSUMER_IDS_CHANGED (oneway, JSON) to every member of ``group``."""
        ext = NotifyConsumerIdsChangedRequestHeader(group).to_ext()
        for entry in self._state.consumers.channels(group):
            if entry.channel.closed:
                continue
            try:
                entry.channel.send_oneway(
                    RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ext)
                )
            except RemotingError as exc:
                logger.info("cannot notify %s of group %s: %s", entry.client_id, group, exc)
