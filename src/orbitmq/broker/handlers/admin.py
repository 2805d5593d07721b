"""Topic administration: UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
GET_TOPIC_CONFIG (351: one topic, as RocketMQ 5's mqadmin topicStatus and consumerProgress ask).

UPDATE_AND_CREATE_TOPIC's ``attributes`` header changes RocketMQ 5 topic attributes as RocketMQ
does (``+message.type=FIFO``; refusals answer SYSTEM_ERROR with RocketMQ's words, and
``message.type=MIXED`` answers INVALID_PARAMETER unless ``enableMixedMessageType``).
A created or deleted topic is persisted by the persistence service (the table is dirty) and
published at once: the registration service re-registers with every name server. Reserved
names (TBW102 and the system topics) cannot be created or deleted.

Consumer groups: GET_SUBSCRIPTIONGROUP_CONFIG (352; header ``group``). The gRPC proxy reads a
group's ``consumeMessageOrderly`` and ``retryMaxTimes`` this way (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
and the other group codes are in :mod:`orbitmq.broker.handlers.group_admin`). As RocketMQ 5's
broker does, a group the broker does not have is created with the default config when
``autoCreateSubscriptionGroup`` is on (its default), and that config is the answer; with it off
the answer is SUBSCRIPTION_GROUP_NOT_EXIST. So a read that must not create a group (the admin
tools checking a name) reads GET_ALL_SUBSCRIPTIONGROUP_CONFIG instead.

QUERY_CONSUME_QUEUE (321, ``mqadmin queryCq``): ``count`` consume queue entries of one queue
from ``index`` (commit-log offset, size, tags code), the queue's min and max index, and with a
``consumerGroup`` the group's subscription of the topic and whether each entry's tags code
passes it (``eval``), or ``<group>@<topic> is not online!`` in ``filterData``. A queue the broker
does not have answers SYSTEM_ERROR ``<queueId>@<topic> is not exist!``, as RocketMQ's does.
"""

from __future__ import annotations

import orjson

from orbitmq.broker.handlers import BrokerState
from orbitmq.broker.validation import check_admin_topic
from orbitmq.model.route import TopicConfig
from orbitmq.model.topic_attributes import MESSAGE_TYPE, AttributeError_, parse_attribute_changes
from orbitmq.protocol.admin_bodies import (
    ConsumeQueueData,
    QueryConsumeQueueResponseBody,
    encode_query_consume_queue,
)
from orbitmq.protocol.admin_headers import QueryConsumeQueueRequestHeader
from orbitmq.protocol.bodies import encode_topic_config
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicConfigRequestHeader,
)
from orbitmq.transport.server import RequestContext


class AdminHandlers:
    """Topic creation, deletion and listing."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    async def update_and_create_topic(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = CreateTopicRequestHeader.from_ext(request.ext_fields)
        rejection = check_admin_topic(header.topic)
        if rejection is not None:
            return rejection.response(request)
        if header.read_queue_nums < 1 or header.write_queue_nums < 1:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"topic[{header.topic}]: queue counts must be positive, got read {header.read_queue_nums} "
                f"write {header.write_queue_nums}",
            )
        config = TopicConfig(
            header.topic,
            read_queue_nums=header.read_queue_nums,
            write_queue_nums=header.write_queue_nums,
            perm=header.perm,
            topic_filter_type=header.topic_filter_type,
            topic_sys_flag=header.topic_sys_flag,
            order=header.order,
        )
        try:
            changes = parse_attribute_changes(header.attributes)
        except AttributeError_ as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        mixed = changes.get(f"+{MESSAGE_TYPE}") == "MIXED"
        if mixed and not self._state.config.enable_mixed_message_type:
            return request.response(ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported.")
        if self._state.topics.update(config, changes):
            self._state.on_topics_changed()
        return request.response(ResponseCode.SUCCESS, None, {})

    async def delete_topic_in_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = DeleteTopicRequestHeader.from_ext(request.ext_fields)
        rejection = check_admin_topic(header.topic)
        if rejection is not None:
            return rejection.response(request)
        if self._state.topics.remove(header.topic):
            self._state.on_topics_changed()
        self._state.offsets.remove_topic(header.topic)
        self._state.store.delete_topic(header.topic)
        return request.response(ResponseCode.SUCCESS, None, {})

    async def get_all_topic_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        topics = self._state.topics
        # The table's document re-encodes only the topics changed since it was last built.
        body = topics.document()
        # RocketMQ 5.x answers the count (its admin tools page through large tables with it).
        ext = {"totalTopicNum": str(len(topics))}
        return request.response(ResponseCode.SUCCESS, None, ext, body)

    async def get_topic_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        topic = GetTopicConfigRequestHeader.from_ext(request.ext_fields).topic
        config = self._state.topics.get(topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return request.response(ResponseCode.SUCCESS, None, {}, encode_topic_config(config))

    async def get_subscription_group_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        group = GetSubscriptionGroupConfigRequestHeader.from_ext(request.ext_fields).group
        state = self._state
        config = state.groups.find_or_create(group, state.config.auto_create_subscription_group)
        if config is None:
            return request.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] not exist"
            )
        body = orjson.dumps({"groupName": config.group_name, **config.to_json()})
        return request.response(ResponseCode.SUCCESS, None, {}, body)

    async def query_consume_queue(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = QueryConsumeQueueRequestHeader.from_ext(request.ext_fields)
        store = self._state.store
        entries = store.consume_queue_entries(
            header.topic, header.queue_id, header.index, min(header.count, 1000)
        )
        if entries is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"{header.queue_id}@{header.topic} is not exist!"
            )
        subscription_data = filter_data = message_filter = None
        if header.consumer_group:
            subscription = self._state.consumers.subscription(header.consumer_group, header.topic)
            if subscription is None:
                filter_data = f"{header.consumer_group}@{header.topic} is not online!"
            else:
                subscription_data = subscription.subscription_data()
                message_filter = subscription.message_filter
        queue_data = [
            ConsumeQueueData(
                physic_offset=commit_log_offset,
                physic_size=size,
                tags_code=tags_code,
                eval=message_filter is not None and message_filter.matches_tags_code(tags_code),
            )
            for commit_log_offset, size, tags_code in entries
        ]
        body = QueryConsumeQueueResponseBody(
            queue_data=queue_data,
            max_queue_index=store.get_max_queue_offset(header.topic, header.queue_id),
            min_queue_index=store.get_min_queue_offset(header.topic, header.queue_id),
            subscription_data=subscription_data,
            filter_data=filter_data,
        )
        return request.response(ResponseCode.SUCCESS, None, {}, encode_query_consume_queue(body))
