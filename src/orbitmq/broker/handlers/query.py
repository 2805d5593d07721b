"""Message lookups: VIEW_MESSAGE_BY_ID (33) by commit-log offset and QUERY_MESSAGE (12) by key.

Both answer with raw stored records (remoting-protocol §3.1) as the body. A key query uses
the store's index (``topic#key`` over UNIQ_KEY and every KEYS token) within the request's time
range; nothing found is QUERY_NOT_FOUND. A unique-key query (``_UNIQUE_KEY_QUERY=true``) is
capped at 32 results as in RocketMQ.
"""

from __future__ import annotations

from orbitmq.broker.handlers import BrokerState
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from orbitmq.transport.server import RequestContext

UNIQUE_KEY_QUERY_MAX_NUM = 32
QUERY_MAX_NUM = 64
"""Cap of a key query, whatever the request asks (RocketMQ's defaultQueryMaxNum)."""


class QueryHandlers:
    """Lookups of stored messages."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    async def view_message_by_id(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = ViewMessageRequestHeader.from_ext(request.ext_fields)
        record = self._state.store.read_message(header.commit_log_offset)
        if record is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.commit_log_offset}"
            )
        return request.response(ResponseCode.SUCCESS, None, {}, bytes(record))

    async def query_message(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = QueryMessageRequestHeader.from_ext(request.ext_fields)
        max_num = (
            UNIQUE_KEY_QUERY_MAX_NUM
            if header.unique_key_query
            else min(max(header.max_num, 1), QUERY_MAX_NUM)
        )
        records = self._state.store.query_messages_by_key(
            header.topic, header.key, max_num, header.begin_timestamp, header.end_timestamp
        )
        # The store does not expose its index's last update point; clients only log these fields.
        # RocketMQ answers them whether or not anything was found.
        ext = QueryMessageResponseHeader(
            index_last_update_timestamp=0, index_last_update_phyoffset=0
        ).to_ext()
        if not records:
            return request.response(
                ResponseCode.QUERY_NOT_FOUND,
                f"can not find message by key [{header.key}] of topic [{header.topic}], "
                "maybe time range not correct",
                ext,
            )
        return request.response(ResponseCode.SUCCESS, None, ext, b"".join(records))
