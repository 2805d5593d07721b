"""Typed request and response headers: one frozen dataclass per command (remoting-protocol §2).

A command's "custom header" travels as ``extFields``, a flat string-to-string map whose keys
are RocketMQ's camelCase field names. Each class here declares its fields once, in snake_case;
:class:`HeaderBase` (``header_fields``) derives the wire name (``queue_id`` -> ``queueId``)
unless a field overrides it with :func:`wire` (``commit_log_offset`` travels as ``offset``,
``client_id`` as ``clientID``).

Reading (``from_ext``) follows what real clients send (§1.3), then checks every field:

* integers are decimal text with an optional sign (the command decoder has already turned the
  C++ client's JSON numbers into such text);
* booleans ``"true"``/``"1"`` (any case) are true, ``"false"``/``"0"``/``""`` are false;
* an absent field, or an empty string for a numeric field, takes the declared default; a
  field without a default is required;
* unknown keys (``AccessKey``, ``Signature``, ``OnsChannel``, ...) are ignored;
* each field's type carries its :class:`Rule` (``Annotated``): 32-bit ranges for what Java
  declares ``int``, non-negative offsets, queue counts, allowed values, text lengths, and the
  topic and group naming rules. These are the boundary checks of every request: a handler
  gets a header whose every value it can store, persist and reload.

A missing, unparsable or rule-breaking field raises ``BadRequestError`` carrying the response
code to answer (SYSTEM_ERROR, or MESSAGE_ILLEGAL for a message's own fields) and a short remark
naming the header and the wire field; a long value is shown only by its start and length.

Writing (``to_ext``) renders every value as a string, because the C++ client ignores a
response field that is not a JSON string; ``None`` fields are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Self

from orbitmq.protocol.header_fields import (
    INT32_MAX,
    INT32_MIN,
    QUERY_KEY_MAX_CHARS,
    QUEUE_NUMS_MAX,
    SUBSCRIPTION_MAX_CHARS,
    TEXT_MAX_CHARS,
    FieldSpec,
    Group,
    HeaderBase,
    Int32,
    MessageInt32,
    NonNegativeInt32,
    NonNegativeInt64,
    OptionalGroup,
    OptionalTopic,
    PropertyString,
    QueueNums,
    ReconsumeTimes,
    Rule,
    Text,
    Topic,
    wire,
)

RECALL_HANDLE_MAX_CHARS = 1024
"""Longest RECALL_MESSAGE handle (base64 of five short fields)."""

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "QUERY_KEY_MAX_CHARS",
    "QUEUE_NUMS_MAX",
    "SUBSCRIPTION_MAX_CHARS",
    "TEXT_MAX_CHARS",
    "FieldSpec",
    "HeaderBase",
    "Rule",
]

# -- producer ------------------------------------------------------------------------------------

# SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) carry the V1 fields under one-letter names.
SEND_V2_WIRE_NAMES: dict[str, str] = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "bname",
}
_SEND_V1_TO_V2 = {long_name: letter for letter, long_name in SEND_V2_WIRE_NAMES.items()}
_SEND_V1_NAMES = frozenset(_SEND_V1_TO_V2)
_send_v2_name_cache: list[tuple[str, ...]] = []


def _send_v2_names() -> tuple[str, ...]:
    """SendMessageRequestHeader's fields under their letters, in field order (built on first use)."""
    if not _send_v2_name_cache:
        names = SendMessageRequestHeader.wire_names()
        _send_v2_name_cache.append(tuple(_SEND_V1_TO_V2.get(name, name) for name in names))
    return _send_v2_name_cache[0]


@dataclass(frozen=True, slots=True)
class SendMessageRequestHeader(HeaderBase):
    """SEND_MESSAGE (10); also SEND_MESSAGE_V2/SEND_BATCH_MESSAGE through :meth:`from_v2_ext`."""

    producer_group: Group
    topic: Topic
    queue_id: Int32
    default_topic: OptionalTopic = "TBW102"
    default_topic_queue_nums: Int32 = 4
    sys_flag: MessageInt32 = 0
    born_timestamp: int = 0
    flag: MessageInt32 = 0
    properties: PropertyString | None = None
    reconsume_times: ReconsumeTimes = 0
    unit_mode: bool = False
    max_reconsume_times: Int32 | None = None
    batch: bool = False
    broker_name: Text | None = wire("bname", None)

    @classmethod
    def from_v2_ext(cls, ext: dict[str, str]) -> Self:
        """Build the header from SEND_MESSAGE_V2's one-letter ext names (``a`` .. ``n``).

        Read in place under the letters; an ext that also carries a V1 name is renamed first,
        so either name of a field is read as before (the last one sent wins).
        """
        if _SEND_V1_NAMES.isdisjoint(ext):
            return cls.read_fields(ext, _send_v2_names())
        return cls.from_ext({SEND_V2_WIRE_NAMES.get(key, key): value for key, value in ext.items()})

    def to_v2_ext(self) -> dict[str, str]:
        """The ext fields under SEND_MESSAGE_V2's one-letter names."""
        return {_SEND_V1_TO_V2[key]: value for key, value in self.to_ext().items()}


@dataclass(frozen=True, slots=True)
class SendMessageResponseHeader(HeaderBase):
    """Answer to a send. ``msg_id`` is the offsetMsgId (comma-joined for a batch)."""

    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    msg_region: str | None = wire("MSG_REGION", None)
    trace_on: str | None = wire("TRACE_ON", None)


@dataclass(frozen=True, slots=True)
class EndTransactionRequestHeader(HeaderBase):
    """END_TRANSACTION (37). ``commit_or_rollback`` is 0, 8 (commit) or 12 (rollback)."""

    producer_group: Group
    tran_state_table_offset: NonNegativeInt64
    commit_log_offset: NonNegativeInt64
    commit_or_rollback: Annotated[int, Rule(choices=(0, 8, 12))]
    msg_id: Text = ""
    from_transaction_check: bool = False
    transaction_id: Text | None = None


@dataclass(frozen=True, slots=True)
class CheckTransactionStateRequestHeader(HeaderBase):
    """CHECK_TRANSACTION_STATE (39), broker to producer."""

    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


# -- consumer ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PullMessageRequestHeader(HeaderBase):
    """PULL_MESSAGE (11). ``sys_flag`` bits: commit offset, suspend, subscription, class filter."""

    consumer_group: Group
    topic: Topic
    queue_id: Int32
    queue_offset: int
    max_msg_nums: Int32 = 32
    sys_flag: Int32 = 0
    commit_offset: int = 0
    suspend_timeout_millis: int = 0
    sub_version: int = 0
    subscription: Annotated[str, Rule(max_chars=SUBSCRIPTION_MAX_CHARS)] | None = None
    expression_type: Text | None = None
    broker_name: Text | None = wire("bname", None)


@dataclass(frozen=True, slots=True)
class PullMessageResponseHeader(HeaderBase):
    """Answer to a pull; the Java client needs all four fields."""

    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int = 0


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetRequestHeader(HeaderBase):
    """QUERY_CONSUMER_OFFSET (14).

    ``set_zero_if_not_found`` (RocketMQ 5's ``setZeroIfNotFound``): absent or true keeps the 4.x
    answer of offset 0 for a group that never committed on an untruncated queue; false asks for
    QUERY_NOT_FOUND instead, so the consumer's own start policy (e.g. from a timestamp) applies.
    """

    consumer_group: Group
    topic: Topic
    queue_id: Int32
    set_zero_if_not_found: bool | None = None


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetResponseHeader(HeaderBase):
    """The committed queue offset of a group."""

    queue_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetRequestHeader(HeaderBase):
    """UPDATE_CONSUMER_OFFSET (15)."""

    consumer_group: Group
    topic: Topic
    queue_id: Int32
    commit_offset: int


@dataclass(frozen=True, slots=True)
class ConsumerSendMsgBackRequestHeader(HeaderBase):
    """CONSUMER_SEND_MSG_BACK (36). ``commit_log_offset`` locates the failed message."""

    commit_log_offset: NonNegativeInt64 = wire("offset")
    group: Group = wire("group")
    delay_level: Int32 = 0
    origin_msg_id: Text | None = None
    origin_topic: OptionalTopic | None = None
    unit_mode: bool = False
    max_reconsume_times: Int32 | None = None


@dataclass(frozen=True, slots=True)
class NotifyConsumerIdsChangedRequestHeader(HeaderBase):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker to consumer."""

    consumer_group: Group


@dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader(HeaderBase):
    """UNREGISTER_CLIENT (35). The C++ client sends ``""`` for the group it does not have."""

    client_id: Text = wire("clientID")
    producer_group: OptionalGroup | None = None
    consumer_group: OptionalGroup | None = None


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupRequestHeader(HeaderBase):
    """GET_CONSUMER_LIST_BY_GROUP (38)."""

    consumer_group: Group


@dataclass(frozen=True, slots=True)
class ResetOffsetRequestHeader(HeaderBase):
    """RESET_CONSUMER_CLIENT_OFFSET (220), broker to consumer; also INVOKE_BROKER_TO_RESET_OFFSET
    (222), admin to broker, where ``timestamp`` -1 means the max offset (skip accumulated
    messages) and RocketMQ 5's ``queue_id``/``offset`` reset one queue to an exact offset.
    """

    topic: str
    group: str
    timestamp: int
    is_force: bool = False
    queue_id: int | None = None
    offset: int | None = None


@dataclass(frozen=True, slots=True)
class GetConsumerRunningInfoRequestHeader(HeaderBase):
    """GET_CONSUMER_RUNNING_INFO (307), broker to consumer."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


# -- queue offsets and lookups -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetMaxOffsetRequestHeader(HeaderBase):
    """GET_MAX_OFFSET (30)."""

    topic: Topic
    queue_id: Int32


@dataclass(frozen=True, slots=True)
class GetMaxOffsetResponseHeader(HeaderBase):
    """The next queue offset to be written."""

    queue_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class GetMinOffsetRequestHeader(HeaderBase):
    """GET_MIN_OFFSET (31)."""

    topic: Topic
    queue_id: Int32


@dataclass(frozen=True, slots=True)
class GetMinOffsetResponseHeader(HeaderBase):
    """The oldest queue offset still stored."""

    queue_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeRequestHeader(HeaderBase):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: Topic
    queue_id: Int32


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeResponseHeader(HeaderBase):
    """Store time (ms since epoch) of the message at the queue's min offset."""

    timestamp: int


@dataclass(frozen=True, slots=True)
class SearchOffsetRequestHeader(HeaderBase):
    """SEARCH_OFFSET_BY_TIMESTAMP (29). ``timestamp`` is ms since epoch."""

    topic: Topic
    queue_id: Int32
    timestamp: int


@dataclass(frozen=True, slots=True)
class SearchOffsetResponseHeader(HeaderBase):
    """The queue offset found for a timestamp."""

    queue_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class ViewMessageRequestHeader(HeaderBase):
    """VIEW_MESSAGE_BY_ID (33); the offset is decoded from an offsetMsgId."""

    commit_log_offset: NonNegativeInt64 = wire("offset")


@dataclass(frozen=True, slots=True)
class QueryMessageRequestHeader(HeaderBase):
    """QUERY_MESSAGE (12): messages of ``topic`` indexed under ``key`` in a time range."""

    topic: Topic
    key: Annotated[str, Rule(max_chars=QUERY_KEY_MAX_CHARS)]
    max_num: Int32
    begin_timestamp: int
    end_timestamp: int
    unique_key_query: bool | None = wire("_UNIQUE_KEY_QUERY", None)


@dataclass(frozen=True, slots=True)
class QueryMessageResponseHeader(HeaderBase):
    """Answer to QUERY_MESSAGE."""

    index_last_update_timestamp: int
    index_last_update_phyoffset: int


# -- topics --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateTopicRequestHeader(HeaderBase):
    """UPDATE_AND_CREATE_TOPIC (17)."""

    topic: Topic
    default_topic: Topic = "TBW102"
    read_queue_nums: QueueNums = 8
    write_queue_nums: QueueNums = 8
    perm: Annotated[int, Rule(low=0, high=15)] = 6
    topic_filter_type: Annotated[str, Rule(choices=("SINGLE_TAG", "MULTI_TAG"))] = "SINGLE_TAG"
    topic_sys_flag: NonNegativeInt32 = 0
    order: bool = False
    # RocketMQ 5's attribute changes, "+message.type=FIFO,-reserve.time" (model.topic_attributes).
    attributes: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicRequestHeader(HeaderBase):
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: Topic


@dataclass(frozen=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader(HeaderBase):
    """DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: Topic
    cluster_name: OptionalTopic | None = None


# -- name server ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetRouteInfoRequestHeader(HeaderBase):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: Topic
    accept_standard_json_only: bool | None = None


@dataclass(frozen=True, slots=True)
class RegisterBrokerRequestHeader(HeaderBase):
    """REGISTER_BROKER (103). ``body_crc32`` is 0 or the masked CRC32 of the body."""

    broker_name: Topic
    broker_addr: Text
    cluster_name: Topic
    broker_id: NonNegativeInt64
    ha_server_addr: Text = ""
    compressed: bool = False
    body_crc32: Int32 = 0


@dataclass(frozen=True, slots=True)
class RegisterBrokerResponseHeader(HeaderBase):
    """Answer to REGISTER_BROKER; filled for slaves only."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRequestHeader(HeaderBase):
    """UNREGISTER_BROKER (104)."""

    broker_name: Topic
    broker_addr: Text
    cluster_name: Topic
    broker_id: NonNegativeInt64


@dataclass(frozen=True, slots=True)
class QueryDataVersionRequestHeader(HeaderBase):
    """QUERY_DATA_VERSION (322); the body carries the broker's DataVersion."""

    broker_name: Topic
    broker_addr: Text
    cluster_name: Topic
    broker_id: NonNegativeInt64


@dataclass(frozen=True, slots=True)
class QueryDataVersionResponseHeader(HeaderBase):
    """Whether the name server's view of the broker differs from the one sent."""

    changed: bool


@dataclass(frozen=True, slots=True)
class GetKVConfigRequestHeader(HeaderBase):
    """GET_KV_CONFIG (101)."""

    namespace: Text
    key: Text


@dataclass(frozen=True, slots=True)
class GetKVConfigResponseHeader(HeaderBase):
    """The configured value, absent when not found."""

    value: str | None = None


# -- consumer groups and recall ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetTopicConfigRequestHeader(HeaderBase):
    """GET_TOPIC_CONFIG (351): ``lo`` asks for a static topic's queue mapping too (none here)."""

    topic: Topic
    lo: bool | None = None


@dataclass(frozen=True, slots=True)
class GetSubscriptionGroupConfigRequestHeader(HeaderBase):
    """GET_SUBSCRIPTIONGROUP_CONFIG (352)."""

    group: Group


@dataclass(frozen=True, slots=True)
class RecallMessageRequestHeader(HeaderBase):
    """RECALL_MESSAGE (370): ``recall_handle`` names a timed message of ``topic``."""

    topic: Topic
    recall_handle: Annotated[str, Rule(max_chars=RECALL_HANDLE_MAX_CHARS)]
    producer_group: OptionalGroup | None = None
