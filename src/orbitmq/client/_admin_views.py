"""Whole-broker reads for the admin client (one request per broker).

Mixed into :class:`orbitmq.client.admin.AdminClient`. The dashboard's pages are built from
these, so a page over 1,000 topics or 500 groups costs one request per broker, not one per row:

=========================  ==================================================================
operation                  request
=========================  ==================================================================
master_addresses           GET_BROKER_CLUSTER_INFO (name server)
all_topic_configs          GET_ALL_TOPIC_CONFIG (21) to one broker
all_consumer_offsets       GET_ALL_CONSUMER_OFFSET (43) to one broker
all_subscription_groups    GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) to one broker
group_members              GET_CONSUMER_LIST_BY_GROUP (38) to one broker
=========================  ==================================================================

Runtime info, message lookups and traces are :class:`~orbitmq.client._admin_api.AdminOperations`'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from orbitmq.errors import BrokerResponseError, ProtocolError, error_for_code
from orbitmq.model.route import TopicConfig
from orbitmq.protocol.bodies import decode_consumer_id_list, decode_topic_config_wrapper
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    GetConsumerListByGroupRequestHeader,
)

if TYPE_CHECKING:
    from orbitmq.client._instance import ClientInstance
    from orbitmq.client.config import ClientConfig
    from orbitmq.model.route import ClusterInfo

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
