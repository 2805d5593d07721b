"""JSON command bodies (remoting-protocol §2.6, §2.8, §2.12, §2.17-§2.19).

Each body has an ``encode_*`` function returning UTF-8 JSON bytes and a ``decode_*``
function taking bytes. Encoders write standard JSON, field names in RocketMQ's camelCase
and numbers as JSON numbers (the C++ client reads route numbers with ``asInt()``).

Decoders are lenient where real peers are sloppy, and strict about types otherwise:

* a Java name server older than 4.9.4 writes map keys unquoted (``{0:"10.0.0.1:10911"}``);
  such keys are quoted before parsing;
* heartbeat enums arrive as names (Java) or ordinals (C++), ``subVersion`` as a number or
  a string, sets may be absent, and the C++ ``codeSet`` is garbage, so tag hash codes are
  always recomputed from the tags;
* unknown keys are ignored; a wrong type or malformed JSON raises ``RemoteProtocolError``
  naming the body and the field.

REGISTER_BROKER also has a compressed body (§2.18): a zlib stream of

    size  field
    4+D   int length + DataVersion JSON
    4     int topic count
    4+T   per topic: int length + "name read write perm filterType" (space separated)
    4+F   int length + filterServerList JSON
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar

import orjson

from orbitmq.errors import RemoteProtocolError
from orbitmq.model.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from orbitmq.model.message import MessageQueue
from orbitmq.model.route import BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfig, TopicRouteData
from orbitmq.protocol.frame import MAX_FRAME_BYTES
from orbitmq.protocol.headers import QUEUE_NUMS_MAX
from orbitmq.protocol.names import shorten, topic_name_problem
from orbitmq.protocol.tags import SUB_ALL, TagFilter, java_string_hash

_E = TypeVar("_E", bound=IntEnum)
_T = TypeVar("_T")
_INT = struct.Struct(">i")
_REQUIRED: Any = object()
_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
# A key (digits, optionally signed) right after "{" or "," and before ":", outside strings.
_DECIMAL = re.compile(r"\s*[+-]?[0-9]+\s*")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)', re.DOTALL)


# -- JSON reading helpers ------------------------------------------------------------------------


def _quote_numeric_keys(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(2) is None:
            return match.group(0)
        return f'{match.group(1)}"{match.group(2)}"{match.group(3)}'

    return _TOKEN.sub(replace, text)


def _loads(data: bytes | bytearray | memoryview | str, what: str) -> dict[str, Any]:
    raw = bytes(data) if isinstance(data, bytearray | memoryview) else data
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as first_error:
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            parsed = orjson.loads(_quote_numeric_keys(text))
        except (UnicodeDecodeError, orjson.JSONDecodeError):
            raise RemoteProtocolError(f"{what} body is not valid JSON: {first_error}") from first_error
    return _obj(parsed, what)


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RemoteProtocolError(f"{what} is not a JSON object")
    return value


def _get(obj: dict[str, Any], key: str, what: str, default: Any) -> Any:
    value = obj.get(key)
    if value is None:
        if default is _REQUIRED:
            raise RemoteProtocolError(f"{what}: field {key!r} is missing")
        return default
    return value


def _str(obj: dict[str, Any], key: str, what: str, default: Any = _REQUIRED) -> Any:
    value = _get(obj, key, what, default)
    if value is not default and not isinstance(value, str):
        raise RemoteProtocolError(f"{what}: field {key!r} is not a string: {value!r}")
    return value


def _to_int(value: Any, where: str) -> int:
    integral_float = isinstance(value, float) and value.is_integer()
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif integral_float or (isinstance(value, str) and _DECIMAL.fullmatch(value)):
        number = int(value)
    else:
        raise RemoteProtocolError(f"{where} is not an integer: {value!r}")
    if not _LONG_MIN <= number <= _LONG_MAX:
        raise RemoteProtocolError(f"{where} is outside the signed 64-bit range: {number}")
    return number


def _int(obj: dict[str, Any], key: str, what: str, default: Any = _REQUIRED) -> Any:
    value = _get(obj, key, what, default)
    return value if value is default else _to_int(value, f"{what}: field {key!r}")


def _bool(obj: dict[str, Any], key: str, what: str, default: bool = False) -> bool:
    value = _get(obj, key, what, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "false", "0", ""):
        return value.strip().lower() in ("true", "1")
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    raise RemoteProtocolError(f"{what}: field {key!r} is not a boolean: {value!r}")


def _list(obj: dict[str, Any], key: str, what: str) -> list[Any]:
    value = _get(obj, key, what, [])
    if not isinstance(value, list):
        raise RemoteProtocolError(f"{what}: field {key!r} is not an array")
    return value


def _dict(obj: dict[str, Any], key: str, what: str) -> dict[str, Any]:
    value = _get(obj, key, what, {})
    if not isinstance(value, dict):
        raise RemoteProtocolError(f"{what}: field {key!r} is not an object")
    return value


def _items(values: list[Any], what: str, parse: Callable[[dict[str, Any], str], _T]) -> list[_T]:
    return [parse(_obj(item, f"{what}[{index}]"), f"{what}[{index}]") for index, item in enumerate(values)]


def _strings(values: Iterable[Any], what: str) -> list[str]:
    result = []
    for item in values:
        if not isinstance(item, str):
            raise RemoteProtocolError(f"{what} holds a non-string: {item!r}")
        result.append(item)
    return result


def _enum(enum_type: type[_E], value: Any, where: str) -> _E:
    try:
        if isinstance(value, str) and not _DECIMAL.fullmatch(value):
            return enum_type[value.strip()]
        return enum_type(_to_int(value, where))
    except (KeyError, ValueError) as exc:
        raise RemoteProtocolError(f"{where}: {value!r} is not a {enum_type.__name__}") from exc


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value)


# -- routes --------------------------------------------------------------------------------------


def _queue_data_json(queue_data: QueueData) -> dict[str, Any]:
    return {
        "brokerName": queue_data.broker_name,
        "perm": queue_data.perm,
        "readQueueNums": queue_data.read_queue_nums,
        "topicSysFlag": queue_data.topic_sys_flag,
        "writeQueueNums": queue_data.write_queue_nums,
    }


def _queue_data(obj: dict[str, Any], what: str) -> QueueData:
    # RocketMQ before 4.9 spelled the flag "topicSynFlag".
    sys_flag = _int(obj, "topicSysFlag", what, None)
    if sys_flag is None:
        sys_flag = _int(obj, "topicSynFlag", what, 0)
    return QueueData(
        broker_name=_str(obj, "brokerName", what),
        read_queue_nums=_int(obj, "readQueueNums", what),
        write_queue_nums=_int(obj, "writeQueueNums", what),
        perm=_int(obj, "perm", what),
        topic_sys_flag=sys_flag,
    )


def _broker_data_json(broker_data: BrokerData) -> dict[str, Any]:
    addrs = {str(broker_id): addr for broker_id, addr in sorted(broker_data.broker_addrs.items())}
    return {"brokerAddrs": addrs, "brokerName": broker_data.broker_name, "cluster": broker_data.cluster}


def _broker_data(obj: dict[str, Any], what: str) -> BrokerData:
    addrs = _dict(obj, "brokerAddrs", what)
    return BrokerData(
        cluster=_str(obj, "cluster", what, ""),
        broker_name=_str(obj, "brokerName", what),
        broker_addrs={
            _to_int(key, f"{what}.brokerAddrs key"): _str(addrs, key, f"{what}.brokerAddrs") for key in addrs
        },
    )


def encode_topic_route(route: TopicRouteData) -> bytes:
    """GET_ROUTEINFO_BY_TOPIC response body; keys in the alphabetical order Java writes."""
    return _dumps(
        {
            "brokerDatas": [_broker_data_json(item) for item in route.broker_datas],
            "filterServerTable": route.filter_server_table,
            "orderTopicConf": route.order_topic_conf,
            "queueDatas": [_queue_data_json(item) for item in route.queue_datas],
        }
    )


def decode_topic_route(data: bytes | bytearray | memoryview | str) -> TopicRouteData:
    """Parse a TopicRouteData body (quoted or fastjson's unquoted numeric keys)."""
    what = "TopicRouteData"
    obj = _loads(data, what)
    filters = _dict(obj, "filterServerTable", what)
    return TopicRouteData(
        queue_datas=_items(_list(obj, "queueDatas", what), "queueDatas", _queue_data),
        broker_datas=_items(_list(obj, "brokerDatas", what), "brokerDatas", _broker_data),
        order_topic_conf=_str(obj, "orderTopicConf", what, None),
        filter_server_table={
            key: _strings(_list(filters, key, "filterServerTable"), f"filterServerTable[{key!r}]")
            for key in filters
        },
    )


def encode_cluster_info(info: ClusterInfo) -> bytes:
    """GET_BROKER_CLUSTER_INFO response body."""
    return _dumps(
        {
            "brokerAddrTable": {
                name: _broker_data_json(data) for name, data in info.broker_addr_table.items()
            },
            "clusterAddrTable": {name: sorted(names) for name, names in info.cluster_addr_table.items()},
        }
    )


def decode_cluster_info(data: bytes | bytearray | memoryview | str) -> ClusterInfo:
    """Parse a ClusterInfo body."""
    what = "ClusterInfo"
    obj = _loads(data, what)
    brokers = _dict(obj, "brokerAddrTable", what)
    clusters = _dict(obj, "clusterAddrTable", what)
    return ClusterInfo(
        broker_addr_table={
            name: _broker_data(_obj(value, f"brokerAddrTable[{name!r}]"), f"brokerAddrTable[{name!r}]")
            for name, value in brokers.items()
        },
        cluster_addr_table={
            name: set(_strings(_list(clusters, name, what), f"clusterAddrTable[{name!r}]"))
            for name in clusters
        },
    )


@dataclass(slots=True)
class TopicList:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER response body."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None


def encode_topic_list(topics: TopicList) -> bytes:
    return _dumps({"brokerAddr": topics.broker_addr, "topicList": topics.topic_list})


def decode_topic_list(data: bytes | bytearray | memoryview | str) -> TopicList:
    obj = _loads(data, "TopicList")
    return TopicList(
        topic_list=_strings(_list(obj, "topicList", "TopicList"), "topicList"),
        broker_addr=_str(obj, "brokerAddr", "TopicList", None),
    )


# -- broker registration -------------------------------------------------------------------------


@dataclass(slots=True)
class TopicConfigSerializeWrapper:
    """A broker's topic table and its version (GET_ALL_TOPIC_CONFIG, REGISTER_BROKER)."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)


@dataclass(slots=True)
class RegisterBrokerBody:
    """REGISTER_BROKER request body."""

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: list[str] = field(default_factory=list)


TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


def _topic_config_json(config: TopicConfig) -> dict[str, Any]:
    return {
        # RocketMQ 5.x's topic attributes (message.type, queue.type ...: model.topic_attributes).
        "attributes": dict(config.attributes),
        "order": config.order,
        "perm": config.perm,
        "readQueueNums": config.read_queue_nums,
        "topicFilterType": config.topic_filter_type,
        "topicName": config.topic_name,
        "topicSysFlag": config.topic_sys_flag,
        "writeQueueNums": config.write_queue_nums,
    }


def _topic_config(obj: dict[str, Any], what: str) -> TopicConfig:
    return TopicConfig(
        topic_name=_str(obj, "topicName", what),
        read_queue_nums=_int(obj, "readQueueNums", what, 16),
        write_queue_nums=_int(obj, "writeQueueNums", what, 16),
        perm=_int(obj, "perm", what, 6),
        topic_filter_type=_str(obj, "topicFilterType", what, "SINGLE_TAG"),
        topic_sys_flag=_int(obj, "topicSysFlag", what, 0),
        order=_bool(obj, "order", what),
        attributes=_string_map(obj, "attributes", what),
    )


def _string_map(obj: dict[str, Any], key: str, what: str) -> dict[str, str]:
    value = _dict(obj, key, what)
    if not all(isinstance(item, str) for item in value.values()):
        raise RemoteProtocolError(f"{what}: field {key!r} holds a value that is not a string")
    return value


def decode_topic_config(obj: Any, what: str = "TopicConfig") -> TopicConfig:
    """One TopicConfig JSON object (an entry of topics.json or of a REGISTER_BROKER body).

    Raises:
        RemoteProtocolError: a field is missing or has the wrong type; names ``what``.
    """
    return _topic_config(_obj(obj, what), what)


def topic_config_problem(config: TopicConfig) -> str | None:
    """Why ``config`` is not a topic a broker may host (None when it is).

    The same rules as UPDATE_AND_CREATE_TOPIC's header: a legal topic name, 1..1024 read and
    write queues, permission bits 0..15, a known filter type and a non-negative topic sysFlag.
    """
    problem = topic_name_problem(config.topic_name)
    if problem is not None:
        return problem
    name = shorten(config.topic_name)
    for field_name, count in (
        ("readQueueNums", config.read_queue_nums),
        ("writeQueueNums", config.write_queue_nums),
    ):
        if not 1 <= count <= QUEUE_NUMS_MAX:
            return f"topic {name}: {field_name} {count} is not 1..{QUEUE_NUMS_MAX}"
    if not 0 <= config.perm <= 15:
        return f"topic {name}: perm {config.perm} is not 0..15"
    if config.topic_filter_type not in TOPIC_FILTER_TYPES:
        return f"topic {name}: topicFilterType {shorten(config.topic_filter_type)} is not one of {TOPIC_FILTER_TYPES}"
    if not 0 <= config.topic_sys_flag <= (1 << 31) - 1:
        return f"topic {name}: topicSysFlag {config.topic_sys_flag} is not a non-negative int"
    return None


def _data_version_json(version: DataVersion) -> dict[str, Any]:
    return {"counter": version.counter, "stateVersion": version.state_version, "timestamp": version.timestamp}


def _data_version(obj: dict[str, Any], what: str) -> DataVersion:
    return DataVersion(
        timestamp=_int(obj, "timestamp", what, 0),
        counter=_int(obj, "counter", what, 0),
        state_version=_int(obj, "stateVersion", what, 0),
    )


def encode_data_version(version: DataVersion) -> bytes:
    """QUERY_DATA_VERSION request/response body."""
    return _dumps(_data_version_json(version))


def decode_data_version(data: bytes | bytearray | memoryview | str) -> DataVersion:
    return _data_version(_loads(data, "DataVersion"), "DataVersion")


def _wrapper_json(wrapper: TopicConfigSerializeWrapper) -> dict[str, Any]:
    return {
        "dataVersion": _data_version_json(wrapper.data_version),
        "topicConfigTable": {
            name: _topic_config_json(cfg) for name, cfg in wrapper.topic_config_table.items()
        },
    }


def _wrapper(obj: dict[str, Any], what: str) -> TopicConfigSerializeWrapper:
    table = _dict(obj, "topicConfigTable", what)
    return TopicConfigSerializeWrapper(
        topic_config_table={
            name: _topic_config(_obj(value, f"topicConfigTable[{name!r}]"), f"topicConfigTable[{name!r}]")
            for name, value in table.items()
        },
        data_version=_data_version(_dict(obj, "dataVersion", what), f"{what}.dataVersion"),
    )


def encode_topic_config(config: TopicConfig) -> bytes:
    """GET_TOPIC_CONFIG response body: one topic's TopicConfig (RocketMQ 5's TopicConfigAndQueueMapping
    without a static topic's ``mappingDetail``)."""
    return _dumps(_topic_config_json(config))


def encode_topic_config_wrapper(wrapper: TopicConfigSerializeWrapper) -> bytes:
    """GET_ALL_TOPIC_CONFIG response body."""
    return _dumps(_wrapper_json(wrapper))


def encode_topic_config_entry(name: str, config: TopicConfig) -> bytes:
    """One ``"name":{TopicConfig}`` member of a wrapper's topicConfigTable, as
    :func:`encode_topic_config_wrapper` writes it (for :func:`join_topic_config_wrapper`)."""
    return _dumps(name) + b":" + _dumps(_topic_config_json(config))


def join_topic_config_wrapper(data_version: DataVersion, entries: list[bytes]) -> bytes:
    """The bytes of :func:`encode_topic_config_wrapper` from already encoded table entries.

    A broker with tens of thousands of topics keeps each topic's entry and re-encodes only the
    topics that changed; the join is one pass over bytes.
    """
    return b"".join(
        (
            b'{"dataVersion":',
            encode_data_version(data_version),
            b',"topicConfigTable":{',
            b",".join(entries),
            b"}}",
        )
    )


def register_broker_json_body(wrapper_json: bytes, filter_server_list: list[str]) -> bytes:
    """The JSON REGISTER_BROKER body around an encoded TopicConfigSerializeWrapper (the bytes of
    :func:`encode_register_broker_body` without ``compressed``)."""
    return b"".join(
        (
            b'{"filterServerList":',
            _dumps(filter_server_list),
            b',"topicConfigSerializeWrapper":',
            wrapper_json,
            b"}",
        )
    )


def decode_topic_config_wrapper(data: bytes | bytearray | memoryview | str) -> TopicConfigSerializeWrapper:
    return _wrapper(_loads(data, "TopicConfigSerializeWrapper"), "TopicConfigSerializeWrapper")


def encode_register_broker_body(body: RegisterBrokerBody, *, compressed: bool = False) -> bytes:
    """REGISTER_BROKER body, as JSON or in the compressed layout of the module docstring."""
    wrapper = body.topic_config_serialize_wrapper
    if not compressed:
        return _dumps(
            {
                "filterServerList": body.filter_server_list,
                "topicConfigSerializeWrapper": _wrapper_json(wrapper),
            }
        )
    out = bytearray()
    _put_chunk(out, encode_data_version(wrapper.data_version))
    out += _INT.pack(len(wrapper.topic_config_table))
    for config in wrapper.topic_config_table.values():
        text = " ".join(
            (
                config.topic_name,
                str(config.read_queue_nums),
                str(config.write_queue_nums),
                str(config.perm),
                config.topic_filter_type,
            )
        )
        if config.attributes:
            # RocketMQ 5 appends the attributes as JSON (TopicConfig.encode); 4.x reads five fields.
            text += " " + _dumps(config.attributes).decode()
        _put_chunk(out, text.encode())
    _put_chunk(out, _dumps(body.filter_server_list))
    return zlib.compress(bytes(out), 9)


def _put_chunk(out: bytearray, chunk: bytes) -> None:
    out += _INT.pack(len(chunk)) + chunk


def decode_register_broker_body(
    data: bytes | bytearray | memoryview, *, compressed: bool = False
) -> RegisterBrokerBody:
    """Parse a REGISTER_BROKER body in either form (the header's ``compressed`` flag says which)."""
    what = "RegisterBrokerBody"
    if not compressed:
        obj = _loads(data, what)
        wrapper = _wrapper(_dict(obj, "topicConfigSerializeWrapper", what), "topicConfigSerializeWrapper")
        filters = _strings(_list(obj, "filterServerList", what), "filterServerList")
        return RegisterBrokerBody(topic_config_serialize_wrapper=wrapper, filter_server_list=filters)
    raw = _inflate(bytes(data), what)
    position, version_json = _take_chunk(raw, 0, "dataVersion")
    version = decode_data_version(version_json)
    count, position = _take_int(raw, position, "topic count")
    table: dict[str, TopicConfig] = {}
    for index in range(count):
        position, chunk = _take_chunk(raw, position, f"topic #{index}")
        config = _compact_topic_config(chunk, index)
        table[config.topic_name] = config
    position, filters_json = _take_chunk(raw, position, "filterServerList")
    try:
        filters_value = orjson.loads(filters_json)
    except orjson.JSONDecodeError as exc:
        raise RemoteProtocolError(f"{what}: filterServerList is not valid JSON") from exc
    if not isinstance(filters_value, list):
        raise RemoteProtocolError(f"{what}: filterServerList is not an array")
    return RegisterBrokerBody(
        topic_config_serialize_wrapper=TopicConfigSerializeWrapper(table, version),
        filter_server_list=_strings(filters_value, "filterServerList"),
    )


def decode_register_broker_data_version(
    data: bytes | bytearray | memoryview, *, compressed: bool = False
) -> DataVersion:
    """Only the DataVersion of a REGISTER_BROKER body: a name server that already holds that
    version of the broker's table keeps it and need not decode the topics (the compressed
    layout holds the version first, so only its first bytes are inflated)."""
    what = "RegisterBrokerBody"
    if not compressed:
        obj = _loads(data, what)
        wrapper = _dict(obj, "topicConfigSerializeWrapper", what)
        return _data_version(
            _dict(wrapper, "dataVersion", "topicConfigSerializeWrapper"),
            "topicConfigSerializeWrapper.dataVersion",
        )
    inflater = zlib.decompressobj()
    try:
        head = inflater.decompress(bytes(data), 4)
        if len(head) == 4:
            length = _INT.unpack(head)[0]
            if 0 <= length <= MAX_FRAME_BYTES:
                head += inflater.decompress(inflater.unconsumed_tail, length)
    except zlib.error as exc:
        raise RemoteProtocolError(f"{what}: compressed body does not inflate: {exc}") from exc
    _, version_json = _take_chunk(head, 0, "dataVersion")
    return decode_data_version(version_json)


def _inflate(data: bytes, what: str) -> bytes:
    # Bound the output so a small hostile stream cannot expand into gigabytes.
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data, MAX_FRAME_BYTES * 4)
    except zlib.error as exc:
        raise RemoteProtocolError(f"{what}: compressed body does not inflate: {exc}") from exc
    if inflater.unconsumed_tail:
        raise RemoteProtocolError(f"{what}: compressed body inflates beyond {MAX_FRAME_BYTES * 4} bytes")
    return raw


def _take_int(raw: bytes, position: int, what: str) -> tuple[int, int]:
    if position + 4 > len(raw):
        raise RemoteProtocolError(f"RegisterBrokerBody: {what} truncated at byte {position}")
    return _INT.unpack_from(raw, position)[0], position + 4


def _take_chunk(raw: bytes, position: int, what: str) -> tuple[int, bytes]:
    length, position = _take_int(raw, position, f"{what} length")
    if length < 0 or position + length > len(raw):
        raise RemoteProtocolError(f"RegisterBrokerBody: {what} length {length} exceeds the body")
    return position + length, raw[position : position + length]


def _compact_topic_config(chunk: bytes, index: int) -> TopicConfig:
    try:
        parts = chunk.decode("utf-8").split(" ")
        if len(parts) < 5:
            raise ValueError("fewer than 5 fields")
        return TopicConfig(
            topic_name=parts[0],
            read_queue_nums=_to_int(parts[1], "readQueueNums"),
            write_queue_nums=_to_int(parts[2], "writeQueueNums"),
            perm=_to_int(parts[3], "perm"),
            topic_filter_type=parts[4],
            attributes=_compact_attributes(parts[5] if len(parts) > 5 else ""),
        )
    except (UnicodeDecodeError, ValueError, RemoteProtocolError) as exc:
        raise RemoteProtocolError(f"RegisterBrokerBody: topic #{index} is malformed: {chunk!r}") from exc


def _compact_attributes(text: str) -> dict[str, str]:
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"attributes are not JSON: {exc}") from exc
    return _string_map({"attributes": value}, "attributes", "TopicConfig")


def encode_kv_table(table: dict[str, str]) -> bytes:
    """KV table body (REGISTER_BROKER response, GET_KV_LIST_BY_NAMESPACE)."""
    return _dumps({"table": table})


def decode_kv_table(data: bytes | bytearray | memoryview | str) -> dict[str, str]:
    table = _dict(_loads(data, "KVTable"), "table", "KVTable")
    return {key: _str(table, key, "KVTable.table") for key in table}


# -- clients -------------------------------------------------------------------------------------


def _subscription_json(sub: SubscriptionData) -> dict[str, Any]:
    result: dict[str, Any] = {
        "classFilterMode": sub.class_filter_mode,
        "codeSet": sorted(sub.code_set),
        "expressionType": sub.expression_type,
        "subString": sub.sub_string,
        "subVersion": sub.sub_version,
        "tagsSet": sorted(sub.tags_set),
        "topic": sub.topic,
    }
    if sub.filter_class_source is not None:
        result["filterClassSource"] = sub.filter_class_source
    return result


def _subscription(obj: dict[str, Any], what: str) -> SubscriptionData:
    sub_string = _str(obj, "subString", what, SUB_ALL)
    expression_type = _str(obj, "expressionType", what, "TAG")
    if "tagsSet" in obj and obj["tagsSet"] is not None:
        tags = frozenset(_strings(_list(obj, "tagsSet", what), f"{what}.tagsSet"))
    elif expression_type == "TAG":
        tags = TagFilter.parse(sub_string).tags
    else:
        tags = frozenset()
    return SubscriptionData(
        topic=_str(obj, "topic", what),
        sub_string=sub_string,
        tags_set=tags,
        # Recomputed: the C++ client sends zeros here.
        code_set=frozenset(java_string_hash(tag) for tag in tags),
        sub_version=_int(obj, "subVersion", what, 0),
        expression_type=expression_type,
        class_filter_mode=_bool(obj, "classFilterMode", what),
        filter_class_source=_str(obj, "filterClassSource", what, None),
    )


def _consumer_data(obj: dict[str, Any], what: str) -> ConsumerData:
    def enum(enum_type: type[_E], key: str, default: _E) -> _E:
        value = obj.get(key)
        return default if value is None else _enum(enum_type, value, f"{what}.{key}")

    return ConsumerData(
        group_name=_str(obj, "groupName", what),
        consume_type=enum(ConsumeType, "consumeType", ConsumeType.CONSUME_PASSIVELY),
        message_model=enum(MessageModel, "messageModel", MessageModel.CLUSTERING),
        consume_from_where=enum(
            ConsumeFromWhere, "consumeFromWhere", ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
        ),
        subscription_data_set=_items(
            _list(obj, "subscriptionDataSet", what), f"{what}.subscriptionDataSet", _subscription
        ),
        unit_mode=_bool(obj, "unitMode", what),
    )


def encode_heartbeat(heartbeat: HeartbeatData) -> bytes:
    """HEART_BEAT request body, enums by name as Java clients send them."""
    consumers = [
        {
            "consumeFromWhere": consumer.consume_from_where.name,
            "consumeType": consumer.consume_type.name,
            "groupName": consumer.group_name,
            "messageModel": consumer.message_model.name,
            "subscriptionDataSet": [_subscription_json(sub) for sub in consumer.subscription_data_set],
            "unitMode": consumer.unit_mode,
        }
        for consumer in heartbeat.consumer_data_set
    ]
    return _dumps(
        {
            "clientID": heartbeat.client_id,
            "consumerDataSet": consumers,
            "producerDataSet": [
                {"groupName": producer.group_name} for producer in heartbeat.producer_data_set
            ],
        }
    )


def decode_heartbeat(data: bytes | bytearray | memoryview | str) -> HeartbeatData:
    """Parse a HEART_BEAT body from any client (see the module docstring for the leniencies)."""
    what = "HeartbeatData"
    obj = _loads(data, what)
    return HeartbeatData(
        client_id=_str(obj, "clientID", what),
        producer_data_set=_items(
            _list(obj, "producerDataSet", what),
            "producerDataSet",
            lambda item, where: ProducerData(group_name=_str(item, "groupName", where)),
        ),
        consumer_data_set=_items(_list(obj, "consumerDataSet", what), "consumerDataSet", _consumer_data),
    )


def _mq_json(queue: MessageQueue) -> dict[str, Any]:
    return {"brokerName": queue.broker_name, "queueId": queue.queue_id, "topic": queue.topic}


def _mq(obj: dict[str, Any], what: str) -> MessageQueue:
    return MessageQueue(
        topic=_str(obj, "topic", what),
        broker_name=_str(obj, "brokerName", what),
        queue_id=_int(obj, "queueId", what),
    )


def _mq_set(obj: dict[str, Any], key: str, what: str) -> set[MessageQueue]:
    return set(_items(_list(obj, key, what), f"{what}.{key}", _mq))


@dataclass(slots=True)
class LockBatchRequestBody:
    """LOCK_BATCH_MQ request body; UNLOCK_BATCH_MQ uses the same fields."""

    consumer_group: str
    client_id: str
    mq_set: set[MessageQueue] = field(default_factory=set)
    only_this_broker: bool = False


@dataclass(slots=True)
class UnlockBatchRequestBody(LockBatchRequestBody):
    """UNLOCK_BATCH_MQ request body."""


def encode_lock_batch_request(body: LockBatchRequestBody) -> bytes:
    """LOCK_BATCH_MQ or UNLOCK_BATCH_MQ request body."""
    return _dumps(
        {
            "clientId": body.client_id,
            "consumerGroup": body.consumer_group,
            "mqSet": [_mq_json(queue) for queue in sorted(body.mq_set)],
            "onlyThisBroker": body.only_this_broker,
        }
    )


def decode_lock_batch_request(data: bytes | bytearray | memoryview | str) -> LockBatchRequestBody:
    what = "LockBatchRequestBody"
    obj = _loads(data, what)
    return LockBatchRequestBody(
        consumer_group=_str(obj, "consumerGroup", what),
        client_id=_str(obj, "clientId", what),
        mq_set=_mq_set(obj, "mqSet", what),
        only_this_broker=_bool(obj, "onlyThisBroker", what),
    )


def decode_unlock_batch_request(data: bytes | bytearray | memoryview | str) -> UnlockBatchRequestBody:
    locked = decode_lock_batch_request(data)
    return UnlockBatchRequestBody(
        locked.consumer_group, locked.client_id, locked.mq_set, locked.only_this_broker
    )


def encode_lock_batch_response(locked: Iterable[MessageQueue]) -> bytes:
    """LOCK_BATCH_MQ response body: the queues now locked by the requester."""
    return _dumps({"lockOKMQSet": [_mq_json(queue) for queue in sorted(locked)]})


def decode_lock_batch_response(data: bytes | bytearray | memoryview | str) -> set[MessageQueue]:
    what = "LockBatchResponseBody"
    return _mq_set(_loads(data, what), "lockOKMQSet", what)


def encode_consumer_id_list(client_ids: Iterable[str]) -> bytes:
    """GET_CONSUMER_LIST_BY_GROUP response body."""
    return _dumps({"consumerIdList": list(client_ids)})


def decode_consumer_id_list(data: bytes | bytearray | memoryview | str) -> list[str]:
    what = "GetConsumerListByGroupResponseBody"
    return _strings(_list(_loads(data, what), "consumerIdList", what), "consumerIdList")
