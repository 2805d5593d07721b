"""Typed request and response headers: one frozen dataclass per command (remoting-protocol §2).

A command's "custom header" travels as ``extFields``, a flat string-to-string map whose keys
are RocketMQ's camelCase field names. Each class here declares its fields once, in snake_case;
:class:`_Header` derives the wire name (``queue_id`` -> ``queueId``) unless a field overrides
it with :func:`wire` (``commit_log_offset`` travels as ``offset``, ``client_id`` as ``clientID``).

Reading (``from_ext``) follows what real clients send (§1.3):

* integers are decimal text with an optional sign (the command decoder has already turned the
  C++ client's JSON numbers into such text); anything else raises ``RemoteProtocolError``;
* booleans ``"true"``/``"1"`` (any case) are true, ``"false"``/``"0"``/``""`` are false;
* an absent field, or an empty string for a numeric field, takes the declared default; a
  field without a default is required and its absence raises ``RemoteProtocolError``;
* unknown keys (``AccessKey``, ``Signature``, ``OnsChannel``, ...) are ignored.

Writing (``to_ext``) renders every value as a string, because the C++ client ignores a
response field that is not a JSON string; ``None`` fields are left out.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from orbitmq.errors import RemoteProtocolError

_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
_TRUE_TEXT = frozenset({"true", "1"})
_FALSE_TEXT = frozenset({"false", "0", ""})


def wire(name: str, default: Any = dataclasses.MISSING) -> Any:
    """Declare a header field whose wire name is not the camelCase of its Python name."""
    return dataclasses.field(default=default, metadata={"wire": name})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _parse_int(text: str) -> int:
    stripped = text.strip()
    # Python's int() also takes "1_000" and non-ASCII digits; Java's parseLong takes neither.
    if not stripped.isascii() or "_" in stripped:
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
class _FieldSpec:
    attr: str
    wire_name: str
    parse: Callable[[str], Any]
    is_numeric: bool
    required: bool


def _base_type(hint: Any) -> type:
    """``int`` for ``int`` and ``int | None``; the scalar type a field parses to."""
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    base = args[0] if args else hint
    if base not in _PARSERS:
        raise TypeError(f"header field type {hint!r} is not str, int or bool")
    return typing.cast(type, base)


class _Header:
    """Shared ``from_ext``/``to_ext`` driven by each subclass's dataclass fields."""

    __slots__ = ()
    _specs_cache: ClassVar[dict[type, tuple[_FieldSpec, ...]]] = {}

    @classmethod
    def _specs(cls) -> tuple[_FieldSpec, ...]:
        specs = _Header._specs_cache.get(cls)
        if specs is None:
            hints = typing.get_type_hints(cls)
            built = []
            for item in dataclasses.fields(cls):  # type: ignore[arg-type]
                base = _base_type(hints[item.name])
                required = item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
                built.append(
                    _FieldSpec(
                        attr=item.name,
                        wire_name=item.metadata.get("wire", _camel(item.name)),
                        parse=_PARSERS[base],
                        is_numeric=base is int,
                        required=required,
                    )
                )
            specs = tuple(built)
            _Header._specs_cache[cls] = specs
        return specs

    @classmethod
    def from_ext(cls, ext: dict[str, str]) -> Self:
        """Build the header from a command's ext fields.

        Raises:
            RemoteProtocolError: a required field is missing or a value does not parse;
                the message names the header and the wire field.
        """
        values: dict[str, Any] = {}
        for spec in cls._specs():
            text = ext.get(spec.wire_name)
            if text is None or (spec.is_numeric and text.strip() == ""):
                if spec.required:
                    raise RemoteProtocolError(f"{cls.__name__}: required field {spec.wire_name!r} is missing")
                continue
            try:
                values[spec.attr] = spec.parse(text)
            except (ValueError, TypeError) as exc:
                raise RemoteProtocolError(
                    f"{cls.__name__}: field {spec.wire_name!r} has unparsable value {text!r}"
                ) from exc
        return cls(**values)

    def to_ext(self) -> dict[str, str]:
        """The ext fields of this header, every value a string, ``None`` fields omitted."""
        ext: dict[str, str] = {}
        for spec in self._specs():
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

    producer_group: str
    topic: str
    queue_id: int
    default_topic: str = "TBW102"
    default_topic_queue_nums: int = 4
    sys_flag: int = 0
    born_timestamp: int = 0
    flag: int = 0
    properties: str | None = None
    reconsume_times: int = 0
    unit_mode: bool = False
    max_reconsume_times: int | None = None
    batch: bool = False
    broker_name: str | None = wire("bname", None)

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

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    msg_id: str = ""
    from_transaction_check: bool = False
    transaction_id: str | None = None


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

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int = 32
    sys_flag: int = 0
    commit_offset: int = 0
    suspend_timeout_millis: int = 0
    sub_version: int = 0
    subscription: str | None = None
    expression_type: str | None = None
    broker_name: str | None = wire("bname", None)


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

    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool | None = None


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetResponseHeader(_Header):
    """The committed queue offset of a group."""

    queue_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetRequestHeader(_Header):
    """UPDATE_CONSUMER_OFFSET (15)."""

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int


@dataclass(frozen=True, slots=True)
class ConsumerSendMsgBackRequestHeader(_Header):
    """CONSUMER_SEND_MSG_BACK (36). ``commit_log_offset`` locates the failed message."""

    commit_log_offset: int = wire("offset")
    group: str = wire("group")
    delay_level: int = 0
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


@dataclass(frozen=True, slots=True)
class NotifyConsumerIdsChangedRequestHeader(_Header):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker to consumer."""

    consumer_group: str


@dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader(_Header):
    """UNREGISTER_CLIENT (35). The C++ client sends ``""`` for the group it does not have."""

    client_id: str = wire("clientID")
    producer_group: str | None = None
    consumer_group: str | None = None


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupRequestHeader(_Header):
    """GET_CONSUMER_LIST_BY_GROUP (38)."""

    consumer_group: str


@dataclass(frozen=True, slots=True)
class ResetOffsetRequestHeader(_Header):
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
class GetConsumerRunningInfoRequestHeader(_Header):
    """GET_CONSUMER_RUNNING_INFO (307), broker to consumer."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


# -- queue offsets and lookups -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetMaxOffsetRequestHeader(_Header):
    """GET_MAX_OFFSET (30)."""

    topic: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class GetMaxOffsetResponseHeader(_Header):
    """The next queue offset to be written."""

    queue_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class GetMinOffsetRequestHeader(_Header):
    """GET_MIN_OFFSET (31)."""

    topic: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class GetMinOffsetResponseHeader(_Header):
    """The oldest queue offset still stored."""

    queue_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeRequestHeader(_Header):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeResponseHeader(_Header):
    """Store time (ms since epoch) of the message at the queue's min offset."""

    timestamp: int


@dataclass(frozen=True, slots=True)
class SearchOffsetRequestHeader(_Header):
    """SEARCH_OFFSET_BY_TIMESTAMP (29). ``timestamp`` is ms since epoch."""

    topic: str
    queue_id: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class SearchOffsetResponseHeader(_Header):
    """The queue offset found for a timestamp."""

    queue_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class ViewMessageRequestHeader(_Header):
    """VIEW_MESSAGE_BY_ID (33); the offset is decoded from an offsetMsgId."""

    commit_log_offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class QueryMessageRequestHeader(_Header):
    """QUERY_MESSAGE (12): messages of ``topic`` indexed under ``key`` in a time range."""

    topic: str
    key: str
    max_num: int
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

    topic: str
    default_topic: str = "TBW102"
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False


@dataclass(frozen=True, slots=True)
class DeleteTopicRequestHeader(_Header):
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: str


@dataclass(frozen=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader(_Header):
    """DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str
    cluster_name: str | None = None


# -- name server ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetRouteInfoRequestHeader(_Header):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str
    accept_standard_json_only: bool | None = None


@dataclass(frozen=True, slots=True)
class RegisterBrokerRequestHeader(_Header):
    """REGISTER_BROKER (103). ``body_crc32`` is 0 or the masked CRC32 of the body."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int
    ha_server_addr: str = ""
    compressed: bool = False
    body_crc32: int = 0


@dataclass(frozen=True, slots=True)
class RegisterBrokerResponseHeader(_Header):
    """Answer to REGISTER_BROKER; filled for slaves only."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRequestHeader(_Header):
    """UNREGISTER_BROKER (104)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class QueryDataVersionRequestHeader(_Header):
    """QUERY_DATA_VERSION (322); the body carries the broker's DataVersion."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class QueryDataVersionResponseHeader(_Header):
    """Whether the name server's view of the broker differs from the one sent."""

    changed: bool


@dataclass(frozen=True, slots=True)
class GetKVConfigRequestHeader(_Header):
    """GET_KV_CONFIG (101)."""

    namespace: str
    key: str


@dataclass(frozen=True, slots=True)
class GetKVConfigResponseHeader(_Header):
    """The configured value, absent when not found."""

    value: str | None = None
