"""Topic and consumer-group administration RocketMQ's tools call (operations-features §3.3, §4).

============================================  ==================================================
request                                       answer
============================================  ==================================================
GET_TOPIC_STATS_INFO (202)                    per write queue: min/max offset, last store time
GET_CONSUME_STATS (208)                       per read queue of each topic the group has offsets
                                              on (or the one named): broker and consumer offset
                                              and the store time of the last consumed message;
                                              the group's consume TPS
GET_BROKER_CONSUME_STATS (317)                the same for every group on this broker, at once
GET_CONSUMER_CONNECTION_LIST (203)            a group's online members and subscriptions;
                                              CONSUMER_NOT_ONLINE when none
GET_PRODUCER_CONNECTION_LIST (204)            a producer group's connections; SYSTEM_ERROR
                                              ``the producer group[g] not exist`` when none
QUERY_TOPIC_CONSUME_BY_WHO (300)              groups online on the topic or with offsets on it
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201)        every group config and the table's DataVersion
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200)     stores the body's config (persisted)
DELETE_SUBSCRIPTIONGROUP (207)                removes a group (``cleanOffset``: its offsets too)
CLONE_GROUP_OFFSET (314)                      copies a group's offsets to another group
============================================  ==================================================

Offsets below zero and missing store times answer 0, as RocketMQ's tools expect.
"""

from __future__ import annotations

from orbitmq.broker.handlers import BrokerState, now_ms
from orbitmq.broker.stats import GROUP_GET_NUMS, TOPIC_PUT_NUMS
from orbitmq.broker.validation import check_group_name
from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.admin_bodies import (
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    TopicOffset,
    decode_subscription_group_config,
    encode_consume_stats,
    encode_consume_stats_list,
    encode_consumer_connection,
    encode_group_list,
    encode_producer_connection,
    encode_subscription_group_wrapper,
    encode_topic_stats_table,
)
from orbitmq.protocol.admin_headers import (
    CloneGroupOffsetRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.server import RequestContext

__all__ = ["GroupAdminHandlers"]


class GroupAdminHandlers:
    """Statistics of topics and groups, connections, and group configs."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    # -- statistics -----------------------------------------------------------------------------

    async def get_topic_stats_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = GetTopicStatsInfoRequestHeader.from_ext(request.ext_fields)
        state = self._state
        config = state.topics.get(header.topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        store = state.store
        table: dict[MessageQueue, TopicOffset] = {}
        for queue_id in range(config.write_queue_nums):
            max_offset = max(store.get_max_queue_offset(header.topic, queue_id), 0)
            last = store.get_store_timestamp(header.topic, queue_id, max_offset - 1) if max_offset > 0 else 0
            table[MessageQueue(header.topic, state.config.broker_name, queue_id)] = TopicOffset(
                max(store.get_min_queue_offset(header.topic, queue_id), 0), max_offset, max(last, 0)
            )
        put_tps = state.stats.minute_tps(TOPIC_PUT_NUMS, header.topic, now_ms())
        return request.response(ResponseCode.SUCCESS, None, {}, encode_topic_stats_table(table, put_tps))

    def consume_stats(self, group: str, topic: str | None) -> ConsumeStats:
        """GET_CONSUME_STATS for one group (``topic`` None: every topic it has offsets on)."""
        state = self._state
        topics = [topic] if topic else sorted(state.offsets.topics_of_group(group))
        online = state.consumers.get(group)
        stats = ConsumeStats()
        now = now_ms()
        for name in topics:
            config = state.topics.get(name)
            if config is None:
                continue
            # An online group that does not subscribe this topic (any more) is not reported on it.
            if (
                online is not None
                and online.subscriptions
                and name not in online.subscriptions
                and not name.startswith("%RETRY%")
            ):
                continue
            for queue_id in range(config.read_queue_nums):
                broker_offset = max(state.store.get_max_queue_offset(name, queue_id), 0)
                consumer_offset = max(state.offsets.query(group, name, queue_id) or 0, 0)
                last = (
                    state.store.get_store_timestamp(name, queue_id, consumer_offset - 1)
                    if consumer_offset > 0
                    else 0
                )
                stats.offset_table[MessageQueue(name, state.config.broker_name, queue_id)] = OffsetWrapper(
                    broker_offset, consumer_offset, max(last, 0), consumer_offset
                )
            stats.consume_tps += state.stats.minute_tps(GROUP_GET_NUMS, f"{name}@{group}", now)
        return stats

    async def get_consume_stats(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumeStatsRequestHeader.from_ext(request.ext_fields)
        body = encode_consume_stats(self.consume_stats(header.consumer_group, header.topic))
        return request.response(ResponseCode.SUCCESS, None, {}, body)

    async def get_broker_consume_stats(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        state = self._state
        by_group: dict[str, list[ConsumeStats]] = {}
        total_diff = 0
        groups, _ = state.groups.configs()
        for group in sorted(groups):
            items = []
            for topic in sorted(state.offsets.topics_of_group(group)):
                stats = self.consume_stats(group, topic)
                if stats.offset_table:
                    items.append(stats)
                    total_diff += stats.total_diff
            if items:
                by_group[group] = items
        body = encode_consume_stats_list(f"{state.store_host[0]}:{state.store_host[1]}", by_group, total_diff)
        return request.response(ResponseCode.SUCCESS, None, {}, body)

    # -- connections ----------------------------------------------------------------------------

    async def get_consumer_connection_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = GetConsumerConnectionListRequestHeader.from_ext(request.ext_fields)
        group = self._state.consumers.get(header.consumer_group)
        if group is None or not group.channels:
            return request.response(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{header.consumer_group}] not online"
            )
        connection = ConsumerConnection(
            [
                ClientConnection(entry.client_id, entry.channel.peer_address, entry.language, entry.version)
                for entry in group.channels.values()
            ],
            {topic: sub.subscription_data() for topic, sub in group.subscriptions.items()},
            group.consume_type,
            group.message_model,
            group.consume_from_where,
        )
        return request.response(ResponseCode.SUCCESS, None, {}, encode_consumer_connection(connection))

    async def get_producer_connection_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = GetProducerConnectionListRequestHeader.from_ext(request.ext_fields)
        channels = self._state.producers.channels(header.producer_group)
        if not channels:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"the producer group[{header.producer_group}] not exist"
            )
        connections = [
            ClientConnection(entry.client_id, entry.channel.peer_address, entry.language, entry.version)
            for entry in channels
        ]
        return request.response(ResponseCode.SUCCESS, None, {}, encode_producer_connection(connections))

    async def query_topic_consume_by_who(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = QueryTopicConsumeByWhoRequestHeader.from_ext(request.ext_fields)
        state = self._state
        groups = set(state.offsets.groups_of_topic(header.topic))
        groups |= {
            name for name in state.consumers.groups() if state.consumers.subscription(name, header.topic)
        }
        return request.response(ResponseCode.SUCCESS, None, {}, encode_group_list(groups))

    # -- group configs --------------------------------------------------------------------------

    async def get_all_subscription_group_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        groups, version = self._state.groups.configs()
        # RocketMQ 5.x answers the count (its admin tools page through large tables with it).
        ext = {"totalGroupNum": str(len(groups))}
        return request.response(
            ResponseCode.SUCCESS, None, ext, encode_subscription_group_wrapper(groups, version)
        )

    async def update_and_create_subscription_group(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        try:
            config = decode_subscription_group_config(request.body)
        except RemoteProtocolError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"bad subscription group body: {exc}")
        rejection = check_group_name(config.group_name)
        if rejection is not None:
            return rejection.response(request)
        self._state.groups.put(config)
        return request.response(ResponseCode.SUCCESS, None, {})

    async def delete_subscription_group(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = DeleteSubscriptionGroupRequestHeader.from_ext(request.ext_fields)
        self._state.groups.remove(header.group_name)
        if header.clean_offset:
            self._state.offsets.remove_group(header.group_name)
        return request.response(ResponseCode.SUCCESS, None, {})

    async def clone_group_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = CloneGroupOffsetRequestHeader.from_ext(request.ext_fields)
        state = self._state
        rejection = check_group_name(header.dest_group)
        if rejection is not None:
            return rejection.response(request)
        topics = [header.topic] if header.topic else sorted(state.offsets.topics_of_group(header.src_group))
        online = state.consumers.get(header.src_group)
        for topic in topics:
            # An online source group that does not consume the topic has nothing to copy there.
            if (
                not header.offline
                and online is not None
                and online.subscriptions
                and topic not in online.subscriptions
            ):
                continue
            state.offsets.clone(header.src_group, header.dest_group, topic)
        return request.response(ResponseCode.SUCCESS, None, {})
