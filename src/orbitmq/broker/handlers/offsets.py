"""Consumer offsets and queue offset lookups (remoting-protocol §2.9, §2.10).

QUERY_CONSUMER_OFFSET answers a group's committed offset. For a group that never committed,
it answers 0 when the queue was never truncated (its min offset is 0), so a new group sees the
messages already stored; otherwise QUERY_NOT_FOUND, and a client at CONSUME_FROM_LAST_OFFSET
(the Java, C++ and Go clients' default) starts from the max offset. ``setZeroIfNotFound=false``
always answers QUERY_NOT_FOUND. This is Apache RocketMQ 5.5's rule (ConsumerManageProcessor)
but for one condition: Apache answers 0 only while the queue's first message is also in the
page cache (``checkInMemByConsumeOffset(topic, queueId, 0, 1)``, a mincore of its commit-log
bytes), so a backlog recently written starts from its oldest message on both brokers, and
one whose first message the kernel evicted starts from the end on Apache's, from its oldest
message here (the choice that loses nothing). UPDATE_CONSUMER_OFFSET stores an offset. GET_MAX_OFFSET,
GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME and SEARCH_OFFSET_BY_TIMESTAMP ask the store.
Every response carries an extFields object, since the C++ client dereferences it.
"""

from __future__ import annotations

from orbitmq.broker.handlers import BrokerState
from orbitmq.broker.validation import check_group_name
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from orbitmq.transport.server import RequestContext


class OffsetHandlers:
    """Consumer offset commits and queue offset queries."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    async def query_consumer_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        illegal_group = check_group_name(header.consumer_group)
        if illegal_group is not None:
            return illegal_group.response(request)
        committed = self._state.offsets.query(header.consumer_group, header.topic, header.queue_id)
        if (
            committed is None
            and header.set_zero_if_not_found is not False
            and self._state.store.get_min_queue_offset(header.topic, header.queue_id) <= 0
        ):
            committed = 0
        if committed is None:
            return request.response(
                ResponseCode.QUERY_NOT_FOUND,
                f"no offset of group [{header.consumer_group}] on topic [{header.topic}] "
                f"queue {header.queue_id}, and the queue was truncated",
                {},
            )
        return request.response(
            ResponseCode.SUCCESS, None, QueryConsumerOffsetResponseHeader(committed).to_ext()
        )

    async def update_consumer_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """Store a group's offset, for a queue this broker hosts (RocketMQ 5 checks the same)."""
        header = UpdateConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        illegal_group = check_group_name(header.consumer_group)
        if illegal_group is not None:
            return illegal_group.response(request)
        state = self._state
        topic_config = state.topics.get(header.topic)
        if topic_config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {header.topic} does not exist", {})
        queue_count = max(topic_config.read_queue_nums, topic_config.write_queue_nums)
        if not 0 <= header.queue_id < queue_count:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic[{header.topic}] has {queue_count} queues",
                {},
            )
        if (
            state.groups.find_or_create(header.consumer_group, state.config.auto_create_subscription_group)
            is None
        ):
            return request.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist",
                {},
            )
        # Ignored (but acknowledged) while an admin reset of the queue waits for the group's pull.
        state.offsets.commit_unless_reset(
            header.consumer_group, header.topic, header.queue_id, header.commit_offset
        )
        return request.response(ResponseCode.SUCCESS, None, {})

    async def get_max_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = GetMaxOffsetRequestHeader.from_ext(request.ext_fields)
        queue_offset = self._state.store.get_max_queue_offset(header.topic, header.queue_id)
        return request.response(ResponseCode.SUCCESS, None, GetMaxOffsetResponseHeader(queue_offset).to_ext())

    async def get_min_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = GetMinOffsetRequestHeader.from_ext(request.ext_fields)
        queue_offset = self._state.store.get_min_queue_offset(header.topic, header.queue_id)
        return request.response(ResponseCode.SUCCESS, None, GetMinOffsetResponseHeader(queue_offset).to_ext())

    async def get_earliest_msg_storetime(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = GetEarliestMsgStoretimeRequestHeader.from_ext(request.ext_fields)
        timestamp = self._state.store.get_earliest_store_timestamp(header.topic, header.queue_id)
        return request.response(
            ResponseCode.SUCCESS, None, GetEarliestMsgStoretimeResponseHeader(timestamp).to_ext()
        )

    async def search_offset_by_timestamp(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = SearchOffsetRequestHeader.from_ext(request.ext_fields)
        queue_offset = self._state.store.get_queue_offset_by_time(
            header.topic, header.queue_id, header.timestamp
        )
        return request.response(ResponseCode.SUCCESS, None, SearchOffsetResponseHeader(queue_offset).to_ext())
