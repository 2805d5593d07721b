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
from orbitmq.broker.validation import check_group_name, retry_topic
from orbitmq.errors import FilterExpressionError, RemoteProtocolError, RemotingError
from orbitmq.filter import EXPRESSION_TYPE_TAG, compiled_filter
from orbitmq.model.heartbeat import ConsumerData
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
    GetConsumerListByGroupRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
)
from orbitmq.transport.server import RequestContext, ServerConnection

logger = logging.getLogger(__name__)


class ClientManageHandlers:
    """Client registration, consumer lists and orderly-consumer queue locks."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    async def heart_beat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        heartbeat = decode_heartbeat(request.body)
        for group_name in [c.group_name for c in heartbeat.consumer_data_set] + [
            p.group_name for p in heartbeat.producer_data_set
        ]:
            illegal_group = check_group_name(group_name)
            if illegal_group is not None:
                return illegal_group.response(request)
        connection = ctx.connection
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
            logger.info("consumer group %s changed: members %s", group, state.consumers.client_ids(group))
            self.notify_consumer_ids_changed(group)

    async def unregister_client(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = UnregisterClientRequestHeader.from_ext(request.ext_fields)
        connection_id = ctx.connection.id
        if header.producer_group:
            self._state.producers.unregister(header.producer_group, connection_id)
        if header.consumer_group and self._state.consumers.unregister(header.consumer_group, connection_id):
            logger.info("consumer %s left group %s", header.client_id, header.consumer_group)
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
        locked = self._state.locks.try_lock(body.consumer_group, body.client_id, body.mq_set, now_ms())
        return request.response(ResponseCode.SUCCESS, None, {}, encode_lock_batch_response(locked))

    async def unlock_batch_mq(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        body = decode_unlock_batch_request(request.body)
        self._state.locks.unlock(body.consumer_group, body.client_id, body.mq_set)
        return request.response(ResponseCode.SUCCESS, None, {})

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
            logger.info("connection %s closed: its consumer left group %s", connection.peer_address, group)
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
