"""Typed headers of the admin requests (operations-features §3.3, §4, §5, §6), sans-IO.

The same :class:`~orbitmq.protocol.header_fields.HeaderBase` machinery as
``orbitmq.protocol.headers`` (camelCase wire names, strings on the wire, a rule per field that
a request must meet); this module holds the admin side so the core header module stays about
the message paths.
"""

from __future__ import annotations

from dataclasses import dataclass

from orbitmq.protocol.header_fields import Group, HeaderBase, Text, Topic, wire

__all__ = [
    "AddWritePermOfBrokerRequestHeader",
    "AddWritePermOfBrokerResponseHeader",
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
    "QueryConsumeQueueRequestHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "ReplyMessageRequestHeader",
    "ViewBrokerStatsDataRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
    "WipeWritePermOfBrokerResponseHeader",
]


@dataclass(frozen=True, slots=True)
class GetTopicStatsInfoRequestHeader(HeaderBase):
    """GET_TOPIC_STATS_INFO (202)."""

    topic: Topic


@dataclass(frozen=True, slots=True)
class GetConsumeStatsRequestHeader(HeaderBase):
    """GET_CONSUME_STATS (208); without ``topic`` every topic the group has offsets on."""

    consumer_group: Group
    topic: Topic | None = None


@dataclass(frozen=True, slots=True)
class GetBrokerConsumeStatsRequestHeader(HeaderBase):
    """GET_BROKER_CONSUME_STATS (317): every group's consume stats on one broker."""

    is_order: bool = False


@dataclass(frozen=True, slots=True)
class GetConsumerConnectionListRequestHeader(HeaderBase):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: Group


@dataclass(frozen=True, slots=True)
class GetProducerConnectionListRequestHeader(HeaderBase):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: Group


@dataclass(frozen=True, slots=True)
class QueryTopicConsumeByWhoRequestHeader(HeaderBase):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: Topic


@dataclass(frozen=True, slots=True)
class ViewBrokerStatsDataRequestHeader(HeaderBase):
    """VIEW_BROKER_STATS_DATA (315): one stats item, e.g. TOPIC_PUT_NUMS of a topic."""

    stats_name: Text
    stats_key: str


@dataclass(frozen=True, slots=True)
class DeleteSubscriptionGroupRequestHeader(HeaderBase):
    """DELETE_SUBSCRIPTIONGROUP (207); ``clean_offset`` also drops the group's offsets."""

    group_name: Group
    clean_offset: bool = False


@dataclass(frozen=True, slots=True)
class CloneGroupOffsetRequestHeader(HeaderBase):
    """CLONE_GROUP_OFFSET (314): copy ``src_group``'s offsets (of ``topic``, or all) to ``dest_group``."""

    src_group: Group
    dest_group: Group
    topic: Topic | None = None
    offline: bool = False


@dataclass(frozen=True, slots=True)
class GetConsumerStatusRequestHeader(HeaderBase):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) and GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: Topic
    group: Group
    client_addr: Text | None = None


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyRequestHeader(HeaderBase):
    """CONSUME_MESSAGE_DIRECTLY (309): have one client of a group consume one message now."""

    consumer_group: Group
    client_id: Text
    msg_id: Text
    broker_name: Text | None = None
    topic: Topic | None = None


@dataclass(frozen=True, slots=True)
class GetBrokerConfigResponseHeader(HeaderBase):
    """Answer to GET_BROKER_CONFIG (26): the config's DataVersion as JSON text."""

    version: str


@dataclass(frozen=True, slots=True)
class PutKVConfigRequestHeader(HeaderBase):
    """PUT_KV_CONFIG (100), to a name server."""

    namespace: Text
    key: Text
    value: str


@dataclass(frozen=True, slots=True)
class DeleteKVConfigRequestHeader(HeaderBase):
    """DELETE_KV_CONFIG (102), to a name server."""

    namespace: Text
    key: Text


@dataclass(frozen=True, slots=True)
class GetKVListByNamespaceRequestHeader(HeaderBase):
    """GET_KVLIST_BY_NAMESPACE (219), to a name server."""

    namespace: Text


@dataclass(frozen=True, slots=True)
class ReplyMessageRequestHeader(HeaderBase):
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


@dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerRequestHeader(HeaderBase):
    """WIPE_WRITE_PERM_OF_BROKER (205), to a name server: take write off a broker's queue data."""

    broker_name: Text


@dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerResponseHeader(HeaderBase):
    """Answer to WIPE_WRITE_PERM_OF_BROKER: how many topics' queue data changed."""

    wipe_topic_count: int


@dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerRequestHeader(HeaderBase):
    """ADD_WRITE_PERM_OF_BROKER (327), to a name server: give a broker's queue data write back."""

    broker_name: Text


@dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerResponseHeader(HeaderBase):
    """Answer to ADD_WRITE_PERM_OF_BROKER: how many topics' queue data changed."""

    add_topic_count: int


@dataclass(frozen=True, slots=True)
class QueryConsumeQueueRequestHeader(HeaderBase):
    """QUERY_CONSUME_QUEUE (321): ``count`` consume queue entries of one queue from ``index``."""

    topic: Topic
    queue_id: int
    index: int
    count: int
    consumer_group: str | None = None
