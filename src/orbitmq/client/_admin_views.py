"""Whole-broker reads and message lookups for the admin client (one request per broker).

Mixed into :class:`orbitmq.client.admin.AdminClient`. The dashboard's pages are built from
these, so a page over 1,000 topics or 500 groups costs one request per broker, not one per row:

=========================  ==================================================================
operation                  request
=========================  ==================================================================
master_addresses           GET_BROKER_CLUSTER_INFO (name server)
broker_runtime_info        GET_BROKER_RUNTIME_INFO (28) to one broker
all_topic_configs          GET_ALL_TOPIC_CONFIG (21) to one broker
all_consumer_offsets       GET_ALL_CONSUMER_OFFSET (43) to one broker
all_subscription_groups    GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) to one broker
group_members              GET_CONSUMER_LIST_BY_GROUP (38) to one broker
query_messages             QUERY_MESSAGE (12) to every master hosting the topic
view_message               VIEW_MESSAGE_BY_ID (33) to the broker the offsetMsgId names
=========================  ==================================================================
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import orjson

from orbitmq.client._record_decode import decode_records
from orbitmq.errors import BrokerResponseError, ProtocolError, error_for_code
from orbitmq.model.message import MessageExt
from orbitmq.model.route import TopicConfig
from orbitmq.protocol.bodies import decode_consumer_id_list, decode_topic_config_wrapper
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    GetConsumerListByGroupRequestHeader,
    QueryMessageRequestHeader,
    ViewMessageRequestHeader,
)
from orbitmq.protocol.message_id import decode_offset_msg_id

if TYPE_CHECKING:
    from orbitmq.client._instance import ClientInstance
    from orbitmq.client.config import ClientConfig
    from orbitmq.model.route import ClusterInfo, TopicRouteData

__all__ = ["AdminViews"]

QUERY_MAX_NUM = 64
"""Messages one QUERY_MESSAGE asks each broker for (mqadmin's queryMsgByKey default)."""


def _json(body: bytes, what: str) -> dict[str, Any]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"{what}: malformed JSON body: {exc}") from exc
    if not isinstance(document, dict):
        raise ProtocolError(f"{what}: the body is not a JSON object")
    return document


class AdminViews:
    """Admin reads over whole brokers (see the module docstring)."""

    client_config: ClientConfig

    @property
    def _client(self) -> ClientInstance:  # provided by AdminClient
        raise NotImplementedError

    async def cluster_info(self) -> ClusterInfo:  # provided by AdminClient
        raise NotImplementedError

    async def topic_route(self, topic: str) -> TopicRouteData:  # provided by AdminClient
        raise NotImplementedError

    async def _call(self, addr: str, code: int, ext: dict[str, str] | None = None) -> RemotingCommand:
        request = RemotingCommand.request(code, ext or {})
        response = await self._client.remoting.invoke(addr, request, self.client_config.request_timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, f"request {code} on broker {addr}: {response.remark}")
        return response

    async def master_addresses(self) -> dict[str, str]:
        """Broker name -> master address, for every broker group with a live master."""
        info = await self.cluster_info()
        return {
            name: broker.master_addr
            for name, broker in sorted(info.broker_addr_table.items())
            if broker.master_addr is not None
        }

    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's runtime table (all values strings)."""
        table = _json((await self._call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)).body, "runtime info")
        values = table.get("table", {})
        return {str(key): str(value) for key, value in values.items()} if isinstance(values, dict) else {}

    async def all_topic_configs(self, addr: str) -> dict[str, TopicConfig]:
        """Every topic configured on the broker at ``addr``."""
        response = await self._call(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        return dict(decode_topic_config_wrapper(response.body).topic_config_table)

    async def all_consumer_offsets(self, addr: str) -> dict[tuple[str, str], dict[int, int]]:
        """(topic, group) -> queue id -> committed offset, for every group on the broker."""
        document = _json(
            (await self._call(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)).body, "consumer offsets"
        )
        offsets: dict[tuple[str, str], dict[int, int]] = {}
        for key, queues in dict(document.get("offsetTable") or {}).items():
            topic, _, group = str(key).partition("@")
            if group and isinstance(queues, dict):
                offsets[(topic, group)] = {int(queue_id): int(offset) for queue_id, offset in queues.items()}
        return offsets

    async def all_subscription_groups(self, addr: str) -> dict[str, dict[str, Any]]:
        """Group name -> its SubscriptionGroupConfig JSON, for every group on the broker."""
        response = await self._call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        table = _json(response.body, "subscription groups").get("subscriptionGroupTable") or {}
        return {str(name): dict(config) for name, config in table.items() if isinstance(config, dict)}

    async def group_members(self, addr: str, group: str) -> list[str]:
        """Client ids of ``group``'s online members as the broker at ``addr`` knows them ([] when none)."""
        header = GetConsumerListByGroupRequestHeader(group)
        try:
            response = await self._call(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_ext())
        except BrokerResponseError:  # a broker answers SYSTEM_ERROR for a group with no member
            return []
        return decode_consumer_id_list(response.body)

    async def query_messages(
        self,
        topic: str,
        key: str,
        *,
        begin_ms: int = 0,
        end_ms: int | None = None,
        max_num: int = QUERY_MAX_NUM,
        unique_key: bool = False,
    ) -> list[MessageExt]:
        """Messages of ``topic`` indexed under ``key`` (a KEYS token, or the msgId with ``unique_key``).

        Asks every master hosting ``topic``; newest first. An empty list when none matches.

        Raises:
            TopicNotExistError: the name server knows no ``topic``.
        """
        route = await self.topic_route(topic)
        addrs = [data.broker_addrs[0] for data in route.broker_datas if 0 in data.broker_addrs]
        header = QueryMessageRequestHeader(
            topic=topic,
            key=key,
            max_num=max_num,
            begin_timestamp=begin_ms,
            end_timestamp=end_ms if end_ms is not None else int(time.time() * 1000) + 60_000,
            unique_key_query=True if unique_key else None,
        )

        async def one(addr: str) -> list[MessageExt]:
            request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, header.to_ext())
            response = await self._client.remoting.invoke(
                addr, request, self.client_config.request_timeout_ms
            )
            if response.code == ResponseCode.QUERY_NOT_FOUND:
                return []
            if response.code != ResponseCode.SUCCESS:
                raise error_for_code(
                    response.code, f"query {topic} by key {key} on {addr}: {response.remark}"
                )
            return decode_records(response.body)

        found = [
            message for batch in await asyncio.gather(*(one(addr) for addr in addrs)) for message in batch
        ]
        return sorted(found, key=lambda message: message.store_timestamp, reverse=True)

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message an offsetMsgId names (the broker address and commit-log offset it encodes).

        Raises:
            ProtocolError: ``offset_msg_id`` is not 32 hex digits.
            BrokerResponseError: no message starts at that offset.
        """
        decoded = decode_offset_msg_id(offset_msg_id)
        header = ViewMessageRequestHeader(decoded.commit_log_offset)
        response = await self._call(decoded.addr, RequestCode.VIEW_MESSAGE_BY_ID, header.to_ext())
        messages = decode_records(response.body)
        if not messages:
            raise ProtocolError(f"message {offset_msg_id}: the broker answered no record")
        return messages[0]
