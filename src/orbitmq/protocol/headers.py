"""Typed request and response headers: one frozen dataclass per command (remoting-protocol §2).

A command's "custom header" travels as ``extFields``, a flat string-to-string map whose keys
are RocketMQ's camelCase field names. Each class here declares its fields once, in snake_case;
:class:`_Header` derives the wire name (``queue_id`` -> ``queueId``) unless a field overrides
it with :func:`wire` (``commit_log_offset`` travels as ``offset``, ``client_id`` as ``clientID``).

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

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Self

from orbitmq.errors import BadRequestError
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.names import group_name_problem, shorten, topic_name_problem

_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
_TRUE_TEXT = frozenset({"true", "1"})
_FALSE_TEXT = frozenset({"false", "0", ""})

TEXT_MAX_CHARS = 255
"""Longest free-text header value (ids, addresses, client ids) unless a field says otherwise."""
QUEUE_NUMS_MAX = 1024
"""Most read or write queues a topic may have."""
SUBSCRIPTION_MAX_CHARS = 65535
"""Longest subscription expression of a pull."""
QUERY_KEY_MAX_CHARS = 32767
"""Longest key of a QUERY_MESSAGE (a key is part of a property string, itself at most 32767 bytes)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """What a header field's value must satisfy once parsed (attached with ``Annotated``).

    ``low``/``high`` bound an integer; ``max_chars``/``max_bytes`` bound a string (``max_bytes``
    counts UTF-8 bytes, as RocketMQ does for the property string); ``name`` applies the topic
    or group naming rule of ``protocol.names``; ``choices`` lists the only values allowed.
    ``code`` is the response code a breach answers with.
    """

    low: int | None = None
    high: int | None = None
    max_chars: int | None = None
    max_bytes: int | None = None
    name: str | None = None
    choices: tuple[object, ...] | None = None
    allow_empty: bool = False
    code: int = ResponseCode.SYSTEM_ERROR


# Field types: the scalar a field parses to, with the rule its value must meet.
Int32 = Annotated[int, Rule(low=INT32_MIN, high=INT32_MAX)]
NonNegativeInt32 = Annotated[int, Rule(low=0, high=INT32_MAX)]
NonNegativeInt64 = Annotated[int, Rule(low=0)]
QueueNums = Annotated[int, Rule(low=1, high=QUEUE_NUMS_MAX)]
Text = Annotated[str, Rule(max_chars=TEXT_MAX_CHARS)]
Topic = Annotated[str, Rule(name="topic")]
OptionalTopic = Annotated[str, Rule(name="topic", allow_empty=True)]
Group = Annotated[str, Rule(name="group")]
OptionalGroup = Annotated[str, Rule(name="group", allow_empty=True)]
# A message's own fields: RocketMQ answers MESSAGE_ILLEGAL when they are out of range.
MessageInt32 = Annotated[int, Rule(low=INT32_MIN, high=INT32_MAX, code=ResponseCode.MESSAGE_ILLEGAL)]
ReconsumeTimes = Annotated[int, Rule(low=0, high=INT32_MAX, code=ResponseCode.MESSAGE_ILLEGAL)]
PropertyString = Annotated[str, Rule(max_bytes=32767, code=ResponseCode.MESSAGE_ILLEGAL)]


def wire(name: str, default: Any = dataclasses.MISSING) -> Any:
    """Declare a header field whose wire name is not the camelCase of its Python name."""
    return dataclasses.field(default=default, metadata={"wire": name})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _parse_int(text: str) -> int:
    stripped = text.strip()
    # Python's int() also takes "1_000" and non-ASCII digits; Java's parseLong takes neither.
    # A long has at most 20 characters with its sign: refuse longer text before converting it.
    if not stripped.isascii() or "_" in stripped or len(stripped) > 20:
        raise ValueError("not a decimal integer")
    value = int(stripped, 10)
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise ValueError("outside the signed 64-bit range")
    return value


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE_TEXT:
        return True
    if lowered in _FALSE_TEXT:
        return False
    raise ValueError("not a boolean")


def _parse_str(text: str) -> str:
    return text


_PARSERS: dict[type, Callable[[str], Any]] = {int: _parse_int, bool: _parse_bool, str: _parse_str}


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One header field as the wire sees it: its names, scalar type, rule and whether required."""

    attr: str
    wire_name: str
    base: type
    parse: Callable[[str], Any]
    is_numeric: bool
    required: bool
    rule: Rule | None
    # (low, high) of an integer rule without choices: the common check, done inline.
    bounds: tuple[int, int] | None = None


def _base_and_rule(hint: Any) -> tuple[type, Rule | None]:
    """``(int, rule)`` for ``Int32`` and ``Int32 | None``: the scalar a field parses to, its rule."""
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    candidate = args[0] if args and typing.get_origin(hint) is not Annotated else hint
    rule = None
    if typing.get_origin(candidate) is Annotated:
        base, *extras = typing.get_args(candidate)
        rule = next((extra for extra in extras if isinstance(extra, Rule)), None)
    else:
        base = candidate
    if base not in _PARSERS:
        raise TypeError(f"header field type {hint!r} is not str, int or bool")
    return typing.cast(type, base), rule


def _breach(rule: Rule, value: Any) -> str | None:
    """What is wrong with ``value`` under ``rule`` (None when nothing)."""
    if isinstance(value, bool):
        return None if rule.choices is None or value in rule.choices else "is not allowed"
    if isinstance(value, int):
        if rule.choices is not None and value not in rule.choices:
            return f"is {value}, not one of {', '.join(map(str, rule.choices))}"
        low = rule.low if rule.low is not None else _LONG_MIN
        high = rule.high if rule.high is not None else _LONG_MAX
        if not low <= value <= high:
            return f"is {value}, outside [{low}, {high}]"
        return None
    text = typing.cast(str, value)
    if rule.name is not None:
        if rule.allow_empty and text == "":
            return None
        return topic_name_problem(text) if rule.name == "topic" else group_name_problem(text)
    if rule.choices is not None and text not in rule.choices:
        return f"is {shorten(text)!r}, not one of {', '.join(map(str, rule.choices))}"
    if rule.max_chars is not None and len(text) > rule.max_chars:
        return f"has {len(text)} characters, more than {rule.max_chars}"
    if rule.max_bytes is not None and len(text) > rule.max_bytes // 4:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > rule.max_bytes:
            return f"has {size} bytes, more than {rule.max_bytes}"
    return None


class _Header:
    """Shared ``from_ext``/``to_ext`` driven by each subclass's dataclass fields."""

    __slots__ = ()
    _specs_cache: ClassVar[dict[type, tuple[FieldSpec, ...]]] = {}

    @classmethod
    def field_specs(cls) -> tuple[FieldSpec, ...]:
        """Every field of this header with its wire name, type and rule (in declaration order)."""
        specs = _Header._specs_cache.get(cls)
        if specs is None:
            hints = typing.get_type_hints(cls, include_extras=True)
            built = []
            for item in dataclasses.fields(cls):  # type: ignore[arg-type]
                base, rule = _base_and_rule(hints[item.name])
                required = item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
                bounds = None
                if rule is not None and base is int and rule.choices is None:
                    low = rule.low if rule.low is not None else _LONG_MIN
                    bounds = (low, rule.high if rule.high is not None else _LONG_MAX)
                built.append(
                    FieldSpec(
                        attr=item.name,
                        wire_name=item.metadata.get("wire", _camel(item.name)),
                        base=base,
                        parse=_PARSERS[base],
                        is_numeric=base is int,
                        required=required,
                        rule=rule,
                        bounds=bounds,
                    )
                )
            specs = tuple(built)
            _Header._specs_cache[cls] = specs
        return specs

    @classmethod
    def from_ext(cls, ext: dict[str, str]) -> Self:
        """Build the header from a command's ext fields, checking every field's rule.

        Raises:
            BadRequestError: a required field is missing, a value does not parse or breaks
                its rule; the remark names the header and the wire field, the code is the
                rule's (SYSTEM_ERROR unless it says MESSAGE_ILLEGAL).
        """
        values: dict[str, Any] = {}
        for spec in cls.field_specs():
            text = ext.get(spec.wire_name)
            if text is None or (spec.is_numeric and text.strip() == ""):
                if spec.required:
                    raise BadRequestError(
                        f"{cls.__name__}: required field {spec.wire_name!r} is missing", field=spec.wire_name
                    )
                continue
            try:
                value = spec.parse(text)
            except (ValueError, TypeError):
                code = spec.rule.code if spec.rule is not None else ResponseCode.SYSTEM_ERROR
                raise BadRequestError(
                    f"{cls.__name__}: field {spec.wire_name!r} has unparsable value {shorten(text)!r}",
                    int(code),
                    spec.wire_name,
                ) from None
            bounds = spec.bounds
            if bounds is not None and bounds[0] <= value <= bounds[1]:
                pass
            elif spec.rule is not None:
                problem = _breach(spec.rule, value)
                if problem is not None:
                    raise BadRequestError(
                        f"{cls.__name__}: field {spec.wire_name!r} {problem}"
                        if spec.rule.name is None
                        else f"{cls.__name__}: field {spec.wire_name!r}: {problem}",
                        int(spec.rule.code),
                        spec.wire_name,
                    )
            values[spec.attr] = value
        return cls(**values)

    def to_ext(self) -> dict[str, str]:
        """The ext fields of this header, every value a string, ``None`` fields omitted."""
        ext: dict[str, str] = {}
        for spec in self.field_specs():
            value = getattr(self, spec.attr)
            if value is not None:
                ext[spec.wire_name] = _render(value)
        return ext


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


@dataclass(frozen=True, slots=True)
class SendMessageRequestHeader(_Header):
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
        """Build the header from SEND_MESSAGE_V2's one-letter ext names (``a`` .. ``n``)."""
        return cls.from_ext({SEND_V2_WIRE_NAMES.get(key, key): value for key, value in ext.items()})

    def to_v2_ext(self) -> dict[str, str]:
        """The ext fields under SEND_MESSAGE_V2's one-letter names."""
        return {_SEND_V1_TO_V2[key]: value for key, value in self.to_ext().items()}


@dataclass(frozen=True, slots=True)
class SendMessageResponseHeader(_Header):
    """Answer to a send. ``msg_id`` is the offsetMsgId (comma-joined for a batch)."""

    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    msg_region: str | None = wire("MSG_REGION", None)
    trace_on: str | None = wire("TRACE_ON", None)


@dataclass(frozen=True, slots=True)
class EndTransactionRequestHeader(_Header):
    """END_TRANSACTION (37). ``commit_or_rollback`` is 0, 8 (commit) or 12 (rollback)."""

    producer_group: Group
    tran_state_table_offset: NonNegativeInt64
    commit_log_offset: NonNegativeInt64
    commit_or_rollback: Annotated[int, Rule(choices=(0, 8, 12))]
    msg_id: Text = ""
    from_transaction_check: bool = False
    transaction_id: Text | None = None


@dataclass(frozen=True, slots=True)
class CheckTransactionStateRequestHeader(_Header):
    """CHECK_TRANSACTION_STATE (39), broker to producer."""

    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


# -- consumer ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PullMessageRequestHeader(_Header):
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
class PullMessageResponseHeader(_Header):
    """Answer to a pull; the Java client needs all four fields."""

    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int = 0


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetRequestHeader(_Header):
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
class QueryConsumerOffsetResponseHeader(_Header):
    """The committed queue offset of a group."""

    queue_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetRequestHeader(_Header):
    """UPDATE_CONSUMER_OFFSET (15)."""

    consumer_group: Group
    topic: Topic
    queue_id: Int32
    commit_offset: int


@dataclass(frozen=True, slots=True)
class ConsumerSendMsgBackRequestHeader(_Header):
    """CONSUMER_SEND_MSG_BACK (36). ``commit_log_offset`` locates the failed message."""

    commit_log_offset: NonNegativeInt64 = wire("offset")
    group: Group = wire("group")
    delay_level: Int32 = 0
    origin_msg_id: Text | None = None
    origin_topic: OptionalTopic | None = None
    unit_mode: bool = False
    max_reconsume_times: Int32 | None = None


@dataclass(frozen=True, slots=True)
class NotifyConsumerIdsChangedRequestHeader(_Header):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker to consumer."""

    consumer_group: Group


@dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader(_Header):
    """UNREGISTER_CLIENT (35). The C++ client sends ``""`` for the group it does not have."""

    client_id: Text = wire("clientID")
    producer_group: OptionalGroup | None = None
    consumer_group: OptionalGroup | None = None


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupRequestHeader(_Header):
    """GET_CONSUMER_LIST_BY_GROUP (38)."""

    consumer_group: Group


@dataclass(frozen=True, slots=True)
class ResetOffsetRequestHeader(_Header):
    """RESET_CONSUMER_CLIENT_OFFSET (220), broker to consumer."""

    topic: str
    group: str
    timestamp: int
    is_force: bool = False


@dataclass(frozen=True, slots=True)
class GetConsumerRunningInfoRequestHeader(_Header):
    """GET_CONSUMER_RUNNING_INFO (307), broker to consumer."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


# -- queue offsets and lookups -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetMaxOffsetRequestHeader(_Header):
    """GET_MAX_OFFSET (30)."""

    topic: Topic
    queue_id: Int32


@dataclass(frozen=True, slots=True)
class GetMaxOffsetResponseHeader(_Header):
    """The next queue offset to be written."""

    queue_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class GetMinOffsetRequestHeader(_Header):
    """GET_MIN_OFFSET (31)."""

    topic: Topic
    queue_id: Int32


@dataclass(frozen=True, slots=True)
class GetMinOffsetResponseHeader(_Header):
    """The oldest queue offset still stored."""

    queue_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeRequestHeader(_Header):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: Topic
    queue_id: Int32


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeResponseHeader(_Header):
    """Store time (ms since epoch) of the message at the queue's min offset."""

    timestamp: int


@dataclass(frozen=True, slots=True)
class SearchOffsetRequestHeader(_Header):
    """SEARCH_OFFSET_BY_TIMESTAMP (29). ``timestamp`` is ms since epoch."""

    topic: Topic
    queue_id: Int32
    timestamp: int


@dataclass(frozen=True, slots=True)
class SearchOffsetResponseHeader(_Header):
    """The queue offset found for a timestamp."""

    queue_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class ViewMessageRequestHeader(_Header):
    """VIEW_MESSAGE_BY_ID (33); the offset is decoded from an offsetMsgId."""

    commit_log_offset: NonNegativeInt64 = wire("offset")


@dataclass(frozen=True, slots=True)
class QueryMessageRequestHeader(_Header):
    """QUERY_MESSAGE (12): messages of ``topic`` indexed under ``key`` in a time range."""

    topic: Topic
    key: Annotated[str, Rule(max_chars=QUERY_KEY_MAX_CHARS)]
    max_num: Int32
    begin_timestamp: int
    end_timestamp: int
    unique_key_query: bool | None = wire("_UNIQUE_KEY_QUERY", None)


@dataclass(frozen=True, slots=True)
class QueryMessageResponseHeader(_Header):
    """Answer to QUERY_MESSAGE."""

    index_last_update_timestamp: int
    index_last_update_phyoffset: int


# -- topics --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateTopicRequestHeader(_Header):
    """UPDATE_AND_CREATE_TOPIC (17)."""

    topic: Topic
    default_topic: Topic = "TBW102"
    read_queue_nums: QueueNums = 8
    write_queue_nums: QueueNums = 8
    perm: Annotated[int, Rule(low=0, high=15)] = 6
    topic_filter_type: Annotated[str, Rule(choices=("SINGLE_TAG", "MULTI_TAG"))] = "SINGLE_TAG"
    topic_sys_flag: NonNegativeInt32 = 0
    order: bool = False


@dataclass(frozen=True, slots=True)
class DeleteTopicRequestHeader(_Header):
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: Topic


@dataclass(frozen=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader(_Header):
    """DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: Topic
    cluster_name: OptionalTopic | None = None


# -- name server ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetRouteInfoRequestHeader(_Header):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: Topic
    accept_standard_json_only: bool | None = None


@dataclass(frozen=True, slots=True)
class RegisterBrokerRequestHeader(_Header):
    """REGISTER_BROKER (103). ``body_crc32`` is 0 or the masked CRC32 of the body."""

    broker_name: Topic
    broker_addr: Text
    cluster_name: Topic
    broker_id: NonNegativeInt64
    ha_server_addr: Text = ""
    compressed: bool = False
    body_crc32: Int32 = 0


@dataclass(frozen=True, slots=True)
class RegisterBrokerResponseHeader(_Header):
    """Answer to REGISTER_BROKER; filled for slaves only."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRequestHeader(_Header):
    """UNREGISTER_BROKER (104)."""

    broker_name: Topic
    broker_addr: Text
    cluster_name: Topic
    broker_id: NonNegativeInt64


@dataclass(frozen=True, slots=True)
class QueryDataVersionRequestHeader(_Header):
    """QUERY_DATA_VERSION (322); the body carries the broker's DataVersion."""

    broker_name: Topic
    broker_addr: Text
    cluster_name: Topic
    broker_id: NonNegativeInt64


@dataclass(frozen=True, slots=True)
class QueryDataVersionResponseHeader(_Header):
    """Whether the name server's view of the broker differs from the one sent."""

    changed: bool


@dataclass(frozen=True, slots=True)
class GetKVConfigRequestHeader(_Header):
    """GET_KV_CONFIG (101)."""

    namespace: Text
    key: Text


@dataclass(frozen=True, slots=True)
class GetKVConfigResponseHeader(_Header):
    """The configured value, absent when not found."""

    value: str | None = None
