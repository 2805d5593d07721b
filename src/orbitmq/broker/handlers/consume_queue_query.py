"""QUERY_CONSUME_QUEUE (321): a queue's entries for admin tools (``mqadmin queryCq``).

Unlike a pull it ignores the topic's read permission (as RocketMQ's admin processor does): it
is how tools read a write-only ``%DLQ%`` topic, asking for the entries here and then for each
message by its commit-log offset (VIEW_MESSAGE_BY_ID). It reads from the store only; it needs
no subscription group. An unknown topic or a queue id out of range is SYSTEM_ERROR with a
remark naming it; ``count`` is cut to :data:`QUERY_CONSUME_QUEUE_COUNT_MAX`; an ``index``
below the queue's min offset starts at the min offset.
"""

from __future__ import annotations

from orbitmq.broker.handlers import BrokerState
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.consume_queue_query import (
    QUERY_CONSUME_QUEUE_COUNT_MAX,
    ConsumeQueueEntry,
    QueryConsumeQueueRequestHeader,
    encode_consume_queue_body,
)
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.protocol.tags import tags_code
from orbitmq.store.results import GetStatus
from orbitmq.transport.server import RequestContext

__all__ = ["ConsumeQueueQueryHandlers"]


class ConsumeQueueQueryHandlers:
    """QUERY_CONSUME_QUEUE."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    async def query_consume_queue(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = QueryConsumeQueueRequestHeader.from_ext(request.ext_fields)
        config = self._state.topics.get(header.topic)
        if config is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"topic[{header.topic}] not exist")
        if not 0 <= header.queue_id < max(config.read_queue_nums, config.write_queue_nums):
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] has "
                f"{config.read_queue_nums} read and {config.write_queue_nums} write queues",
            )
        store = self._state.store
        min_offset = store.get_min_queue_offset(header.topic, header.queue_id)
        max_offset = store.get_max_queue_offset(header.topic, header.queue_id)
        start = max(header.index, min_offset)
        count = min(header.count, QUERY_CONSUME_QUEUE_COUNT_MAX)
        entries: list[ConsumeQueueEntry] = []
        while len(entries) < count and start < max_offset:
            result = store.get_messages(
                header.topic, header.queue_id, start, count - len(entries), max_total_bytes=4 << 20
            )
            if result.status is not GetStatus.FOUND or not result.queue_offsets:
                break
            for queue_offset, commit_log_offset, buffer in zip(
                result.queue_offsets, result.commit_log_offsets, result.buffers, strict=True
            ):
                message = decode_stored_messages(buffer, decode_body=False)[0]
                entries.append(
                    ConsumeQueueEntry(queue_offset, commit_log_offset, len(buffer), tags_code(message.tags))
                )
            if result.next_begin_offset <= start:
                break
            start = result.next_begin_offset
        ext = {"index": str(max(header.index, min_offset))}
        return request.response(
            ResponseCode.SUCCESS, None, ext, encode_consume_queue_body(entries, min_offset, max_offset)
        )
