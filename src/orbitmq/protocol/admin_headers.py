"""Typed headers of the admin requests (operations-features §3.3, §4, §5, §6), sans-IO.

The same :class:`~orbitmq.protocol.headers._Header` machinery as ``orbitmq.protocol.headers``
(camelCase wire names, strings on the wire); this module holds the admin side so the core
header module stays about the message paths.
"""

from __future__ import annotations

from dataclasses import dataclass

from orbitmq.protocol.headers import _Header, wire

__all__ = [
    "CloneGroupOffsetRequestHeader",
    "ConsumeMessageDirectlyRequestHeader",
    "DeleteKVConfigRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "GetBrokerConfigResponseHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerStatusRequestHeader",
    "GetKVListByNamespaceRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "PutKVConfigRequestHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "ReplyMessageRequestHeader",
    "ViewBrokerStatsDataRequestHeader",
]


@dataclass(frozen=True, slots=True)
class GetTopicStatsInfoRequestHeader(_Header):
    """GET_TOPIC_STATS_INFO (202)."""

    topic: str


@dataclass(frozen=True, slots=True)
class GetConsumeStatsRequestHeader(_Header):
    """GET_CONSUME_STATS (208); without ``topic`` every topic the group has offsets on."""

    consumer_group: str
    topic: str | None = None


@dataclass(frozen=True, slots=True)
class GetBrokerConsumeStatsRequestHeader(_Header):
    """GET_BROKER_CONSUME_STATS (317): every group's consume stats on one broker."""

    is_order: bool = False


@dataclass(frozen=True, slots=True)
class GetConsumerConnectionListRequestHeader(_Header):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str


@dataclass(frozen=True, slots=True)
class GetProducerConnectionListRequestHeader(_Header):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str


@dataclass(frozen=True, slots=True)
class QueryTopicConsumeByWhoRequestHeader(_Header):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str


@dataclass(frozen=True, slots=True)
class ViewBrokerStatsDataRequestHeader(_Header):
    """VIEW_BROKER_STATS_DATA (315): one stats item, e.g. TOPIC_PUT_NUMS of a topic."""

    stats_name: str
    stats_key: str


@dataclass(frozen=True, slots=True)
class DeleteSubscriptionGroupRequestHeader(_Header):
    """DELETE_SUBSCRIPTIONGROUP (207); ``clean_offset`` also drops the group's offsets."""

    group_name: str
    clean_offset: bool = False


@dataclass(frozen=True, slots=True)
class CloneGroupOffsetRequestHeader(_Header):
    """CLONE_GROUP_OFFSET (314): copy ``src_group``'s offsets (of ``topic``, or all) to ``dest_group``."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@dataclass(frozen=True, slots=True)
class GetConsumerStatusRequestHeader(_Header):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) and GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: str
    group: str
    client_addr: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyRequestHeader(_Header):
    """CONSUME_MESSAGE_DIRECTLY (309): have one client of a group consume one message now."""

    consumer_group: str
    client_id: str
    msg_id: str
    broker_name: str | None = None
    topic: str | None = None


@dataclass(frozen=True, slots=True)
class GetBrokerConfigResponseHeader(_Header):
    """Answer to GET_BROKER_CONFIG (26): the config's DataVersion as JSON text."""

    version: str


@dataclass(frozen=True, slots=True)
class PutKVConfigRequestHeader(_Header):
    """PUT_KV_CONFIG (100), to a name server."""

    namespace: str
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class DeleteKVConfigRequestHeader(_Header):
    """DELETE_KV_CONFIG (102), to a name server."""

    namespace: str
    key: str


@dataclass(frozen=True, slots=True)
class GetKVListByNamespaceRequestHeader(_Header):
    """GET_KVLIST_BY_NAMESPACE (219), to a name server."""

    namespace: str


@dataclass(frozen=True, slots=True)
class ReplyMessageRequestHeader(_Header):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326): a reply pushed from the broker to its requester."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    born_host: str
    store_host: str
    store_timestamp: int
    properties: str | None = None
    reconsume_times: int = 0
    unit_mode: bool = False
    broker_name: str | None = wire("bname", None)
