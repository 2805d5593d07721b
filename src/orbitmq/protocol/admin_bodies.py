"""Bodies of the admin requests RocketMQ's tools send (operations-features §3.3), sans-IO.

Java writes these with fastjson: keys in alphabetical order, and maps keyed by a
``MessageQueue`` written with the queue object as the key (``orbitmq.protocol.fastjson``).
Encoders here write exactly that, so ``mqadmin``, rocketmq-dashboard and rocketmq-exporter read
OrbitMQ's answers; decoders accept it (and standard JSON where Java clients send that).

==========================================  ==============================================
body                                        used by
==========================================  ==============================================
TopicStatsTable                             GET_TOPIC_STATS_INFO (202)
ConsumeStats                                GET_CONSUME_STATS (208)
ConsumerConnection / ProducerConnection     GET_CONSUMER_CONNECTION_LIST (203) / 204
GroupList                                   QUERY_TOPIC_CONSUME_BY_WHO (300)
BrokerStatsData                             VIEW_BROKER_STATS_DATA (315)
SubscriptionGroupWrapper                    GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201); one group
                                            is UPDATE_AND_CREATE_SUBSCRIPTIONGROUP's body (200)
ResetOffsetBody                             INVOKE_BROKER_TO_RESET_OFFSET (222) answer and
                                            RESET_CONSUMER_CLIENT_OFFSET (220): Java's map form,
                                            or the array form the C++ client parses
ConsumerStatusBody                          GET_CONSUMER_STATUS_FROM_CLIENT (221) / 223
CheckClientRequestBody                      CHECK_CLIENT_CONFIG (46)
==========================================  ==============================================

Consumer running info (307) and consume-directly results (309) have their own module,
``orbitmq.protocol.client_bodies``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orbitmq.errors import RemoteProtocolError
from orbitmq.model.heartbeat import SubscriptionData
from orbitmq.model.message import MessageQueue
from orbitmq.model.subscription_group import SubscriptionGroupConfig
from orbitmq.protocol.bodies import _subscription, _subscription_json
from orbitmq.protocol.fastjson import ObjectKey, dumps, loads

__all__ = [
    "ConsumeQueueData",
    "QueryConsumeQueueResponseBody",
    "decode_query_consume_queue",
    "encode_query_consume_queue",
    "BrokerStatsData",
    "BrokerStatsItem",
    "CheckClientRequestBody",
    "ClientConnection",
    "ConsumeStats",
    "ConsumerConnection",
    "OffsetWrapper",
    "TopicOffset",
    "decode_broker_stats_data",
    "decode_check_client_body",
    "decode_consume_stats",
    "decode_consume_stats_list",
    "decode_consumer_connection",
    "decode_consumer_status_body",
    "decode_group_list",
    "decode_mq_offsets",
    "decode_producer_connection",
    "decode_reset_offset_body",
    "decode_subscription_group_config",
    "decode_subscription_group_wrapper",
    "decode_topic_stats_table",
    "encode_broker_stats_data",
    "encode_check_client_body",
    "encode_consume_stats",
    "encode_consume_stats_list",
    "encode_consumer_connection",
    "encode_consumer_status_body",
    "encode_group_list",
    "encode_mq_offsets",
    "encode_producer_connection",
    "encode_reset_offset_body",
    "encode_subscription_group_config",
    "encode_subscription_group_wrapper",
    "encode_topic_stats_table",
    "mq_key",
    "queue_of_key",
]


# -- helpers ----------------------------------------------------------------------------------


def mq_key(queue: MessageQueue) -> ObjectKey:
    """A MessageQueue as a fastjson map key."""
    return ObjectKey({"brokerName": queue.broker_name, "queueId": queue.queue_id, "topic": queue.topic})


def _queue(fields: Mapping[str, Any], what: str) -> MessageQueue:
    try:
        return MessageQueue(str(fields["topic"]), str(fields["brokerName"]), int(fields["queueId"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise RemoteProtocolError(f"{what}: bad MessageQueue {dict(fields)!r}") from exc


def queue_of_key(key: Any, what: str) -> MessageQueue:
    """The MessageQueue of a fastjson map key (an ObjectKey)."""
    if not isinstance(key, ObjectKey):
        raise RemoteProtocolError(f"{what}: map key {key!r} is not a MessageQueue object")
    return _queue(key.fields, what)


def _object(data: bytes | bytearray | memoryview | str, what: str) -> dict[Any, Any]:
    value = loads(data, what)
    if not isinstance(value, dict):
        raise RemoteProtocolError(f"{what} is not a JSON object")
    return value


def _table(obj: Mapping[Any, Any], key: str, what: str) -> dict[Any, Any]:
    value = obj.get(key) or {}
    if not isinstance(value, dict):
        raise RemoteProtocolError(f"{what}.{key} is not an object")
    return value


def _number(obj: Mapping[str, Any], key: str, what: str, default: int | float = 0) -> Any:
    """An integer (or, with a float ``default``, a float) member; absent or null is ``default``."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise RemoteProtocolError(f"{what}.{key} is not a number: {value!r}")
    try:
        return float(value) if isinstance(default, float) else int(value)
    except ValueError as exc:
        raise RemoteProtocolError(f"{what}.{key} is not a number: {value!r}") from exc


def encode_mq_offsets(offsets: Mapping[MessageQueue, int]) -> bytes:
    """``{"offsetTable": {MQ: offset}}`` (ResetOffsetBody, Java form)."""
    return dumps({"offsetTable": {mq_key(mq): offset for mq, offset in sorted(offsets.items())}})


def decode_mq_offsets(table: Mapping[Any, Any], what: str) -> dict[MessageQueue, int]:
    return {queue_of_key(key, what): int(value) for key, value in table.items()}


# -- topic and consumer statistics ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicOffset:
    """One queue of GET_TOPIC_STATS_INFO: its offsets and the store time of its last message."""

    min_offset: int
    max_offset: int
    last_update_timestamp: int = 0


def encode_topic_stats_table(table: Mapping[MessageQueue, TopicOffset], topic_put_tps: float = 0.0) -> bytes:
    """TopicStatsTable; ``topicPutTps`` (RocketMQ 5.x) is the topic's puts per second."""
    return dumps(
        {
            "offsetTable": {
                mq_key(mq): {
                    "lastUpdateTimestamp": item.last_update_timestamp,
                    "maxOffset": item.max_offset,
                    "minOffset": item.min_offset,
                }
                for mq, item in sorted(table.items())
            },
            "topicPutTps": float(topic_put_tps),
        }
    )


def decode_topic_stats_table(data: bytes | bytearray | memoryview | str) -> dict[MessageQueue, TopicOffset]:
    what = "TopicStatsTable"
    table = _table(_object(data, what), "offsetTable", what)
    return {
        queue_of_key(key, what): TopicOffset(
            _number(value, "minOffset", what),
            _number(value, "maxOffset", what),
            _number(value, "lastUpdateTimestamp", what),
        )
        for key, value in table.items()
    }


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    """One queue of GET_CONSUME_STATS: where the broker is, where the group is, and when."""

    broker_offset: int
    consumer_offset: int
    last_timestamp: int = 0
    pull_offset: int = 0

    @property
    def diff(self) -> int:
        return max(self.broker_offset - self.consumer_offset, 0)


@dataclass(slots=True)
class ConsumeStats:
    """GET_CONSUME_STATS's answer: per queue offsets of one group, and its consume TPS."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    @property
    def total_diff(self) -> int:
        return sum(item.diff for item in self.offset_table.values())


def encode_consume_stats(stats: ConsumeStats) -> bytes:
    return dumps(
        {
            "consumeTps": stats.consume_tps,
            "offsetTable": {
                mq_key(mq): {
                    "brokerOffset": item.broker_offset,
                    "consumerOffset": item.consumer_offset,
                    "lastTimestamp": item.last_timestamp,
                    "pullOffset": item.pull_offset,
                }
                for mq, item in sorted(stats.offset_table.items())
            },
        }
    )


def decode_consume_stats(data: bytes | bytearray | memoryview | str) -> ConsumeStats:
    what = "ConsumeStats"
    obj = _object(data, what)
    return ConsumeStats(
        {
            queue_of_key(key, what): OffsetWrapper(
                _number(value, "brokerOffset", what),
                _number(value, "consumerOffset", what),
                _number(value, "lastTimestamp", what),
                _number(value, "pullOffset", what),
            )
            for key, value in _table(obj, "offsetTable", what).items()
        },
        float(_number(obj, "consumeTps", what, 0.0)),
    )


def encode_consume_stats_list(
    broker_addr: str, stats_by_group: Mapping[str, list[ConsumeStats]], total_diff: int
) -> bytes:
    """GET_BROKER_CONSUME_STATS's ConsumeStatsList: every group's stats (one per topic)."""
    return dumps(
        {
            "brokerAddr": broker_addr,
            "consumeStatsList": [
                {group: [loads(encode_consume_stats(stats)) for stats in items]}
                for group, items in sorted(stats_by_group.items())
            ],
            "totalDiff": total_diff,
        }
    )


def decode_consume_stats_list(data: bytes | bytearray | memoryview | str) -> dict[str, list[ConsumeStats]]:
    what = "ConsumeStatsList"
    raw = _object(data, what).get("consumeStatsList") or []
    if not isinstance(raw, list):
        raise RemoteProtocolError(f"{what}.consumeStatsList is not an array")
    found: dict[str, list[ConsumeStats]] = {}
    for entry in raw:
        if not isinstance(entry, dict):
            raise RemoteProtocolError(f"{what}: an entry is not an object")
        for group, items in entry.items():
            found.setdefault(str(group), []).extend(decode_consume_stats(dumps(item)) for item in items or [])
    return found


# -- connections ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class ClientConnection:
    """One client connection of a group: RocketMQ's ``Connection``."""

    client_id: str
    client_addr: str
    language: str
    version: int


def _connection_json(item: ClientConnection) -> dict[str, Any]:
    return {
        "clientAddr": item.client_addr,
        "clientId": item.client_id,
        "language": item.language,
        "version": item.version,
    }


def _connections(obj: Mapping[str, Any], what: str) -> list[ClientConnection]:
    raw = obj.get("connectionSet") or []
    if not isinstance(raw, list):
        raise RemoteProtocolError(f"{what}.connectionSet is not an array")
    return sorted(
        ClientConnection(
            str(item.get("clientId", "")),
            str(item.get("clientAddr", "")),
            str(item.get("language", "")),
            _number(item, "version", what),
        )
        for item in raw
        if isinstance(item, dict)
    )


@dataclass(slots=True)
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST's answer: a group's members and what they subscribe."""

    connection_set: list[ClientConnection] = field(default_factory=list)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"


def encode_consumer_connection(connection: ConsumerConnection) -> bytes:
    return dumps(
        {
            "connectionSet": [_connection_json(item) for item in sorted(connection.connection_set)],
            "consumeFromWhere": connection.consume_from_where,
            "consumeType": connection.consume_type,
            "messageModel": connection.message_model,
            "subscriptionTable": {
                topic: _subscription_json(sub) for topic, sub in sorted(connection.subscription_table.items())
            },
        }
    )


def decode_consumer_connection(data: bytes | bytearray | memoryview | str) -> ConsumerConnection:
    what = "ConsumerConnection"
    obj = _object(data, what)
    return ConsumerConnection(
        _connections(obj, what),
        {
            str(topic): _subscription(sub, f"{what}.subscriptionTable[{topic!r}]")
            for topic, sub in _table(obj, "subscriptionTable", what).items()
        },
        str(obj.get("consumeType") or "CONSUME_PASSIVELY"),
        str(obj.get("messageModel") or "CLUSTERING"),
        str(obj.get("consumeFromWhere") or "CONSUME_FROM_LAST_OFFSET"),
    )


def encode_producer_connection(connections: list[ClientConnection]) -> bytes:
    return dumps({"connectionSet": [_connection_json(item) for item in sorted(connections)]})


def decode_producer_connection(data: bytes | bytearray | memoryview | str) -> list[ClientConnection]:
    return _connections(_object(data, "ProducerConnection"), "ProducerConnection")


def encode_group_list(groups: set[str] | list[str]) -> bytes:
    return dumps({"groupList": sorted(groups)})


def decode_group_list(data: bytes | bytearray | memoryview | str) -> list[str]:
    raw = _object(data, "GroupList").get("groupList") or []
    if not isinstance(raw, list):
        raise RemoteProtocolError("GroupList.groupList is not an array")
    return sorted(str(item) for item in raw)


# -- broker statistics ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerStatsItem:
    """One window of a stats item: the sum over it, per second, and per call (RocketMQ's avgpt)."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


@dataclass(frozen=True, slots=True)
class BrokerStatsData:
    """VIEW_BROKER_STATS_DATA's answer: the last minute, hour and day of one stats item."""

    stats_minute: BrokerStatsItem = BrokerStatsItem()
    stats_hour: BrokerStatsItem = BrokerStatsItem()
    stats_day: BrokerStatsItem = BrokerStatsItem()


def _stats_item_json(item: BrokerStatsItem) -> dict[str, Any]:
    return {"avgpt": item.avgpt, "sum": item.sum, "tps": item.tps}


def encode_broker_stats_data(data: BrokerStatsData) -> bytes:
    return dumps(
        {
            "statsDay": _stats_item_json(data.stats_day),
            "statsHour": _stats_item_json(data.stats_hour),
            "statsMinute": _stats_item_json(data.stats_minute),
        }
    )


def decode_broker_stats_data(data: bytes | bytearray | memoryview | str) -> BrokerStatsData:
    what = "BrokerStatsData"
    obj = _object(data, what)

    def item(key: str) -> BrokerStatsItem:
        raw = _table(obj, key, what)
        return BrokerStatsItem(
            _number(raw, "sum", what),
            float(_number(raw, "tps", what, 0.0)),
            float(_number(raw, "avgpt", what, 0.0)),
        )

    return BrokerStatsData(item("statsMinute"), item("statsHour"), item("statsDay"))


# -- subscription groups ----------------------------------------------------------------------


def encode_subscription_group_config(config: SubscriptionGroupConfig) -> bytes:
    return dumps(dict(sorted(config.to_json().items())))


def decode_subscription_group_config(data: bytes | bytearray | memoryview | str) -> SubscriptionGroupConfig:
    obj = _object(data, "SubscriptionGroupConfig")
    name = obj.get("groupName")
    if not isinstance(name, str) or not name:
        raise RemoteProtocolError("SubscriptionGroupConfig.groupName is missing")
    try:
        return SubscriptionGroupConfig.from_json(name, obj)
    except (TypeError, ValueError) as exc:
        raise RemoteProtocolError(f"SubscriptionGroupConfig of {name}: {exc}") from exc


def encode_subscription_group_wrapper(
    groups: Mapping[str, SubscriptionGroupConfig], data_version: tuple[int, int]
) -> bytes:
    return dumps(
        {
            "dataVersion": {"counter": data_version[1], "stateVersion": 0, "timestamp": data_version[0]},
            "subscriptionGroupTable": {
                name: dict(sorted(config.to_json().items())) for name, config in sorted(groups.items())
            },
        }
    )


def decode_subscription_group_wrapper(
    data: bytes | bytearray | memoryview | str,
) -> dict[str, SubscriptionGroupConfig]:
    what = "SubscriptionGroupWrapper"
    table = _table(_object(data, what), "subscriptionGroupTable", what)
    try:
        return {str(name): SubscriptionGroupConfig.from_json(str(name), raw) for name, raw in table.items()}
    except (TypeError, ValueError, AttributeError) as exc:
        raise RemoteProtocolError(f"{what}: {exc}") from exc


# -- offsets pushed to and read from clients --------------------------------------------------


def encode_reset_offset_body(offsets: Mapping[MessageQueue, int], *, array_form: bool = False) -> bytes:
    """ResetOffsetBody: Java's map form, or (``array_form``) the list the C++ client parses.

    The C++ client (1.2.3) reads ``offsetTable`` as an array of queue objects carrying an
    ``offset`` member and ignores the map form with a log line.
    """
    if not array_form:
        return encode_mq_offsets(offsets)
    return dumps(
        {
            "offsetTable": [
                {"brokerName": mq.broker_name, "offset": offset, "queueId": mq.queue_id, "topic": mq.topic}
                for mq, offset in sorted(offsets.items())
            ]
        }
    )


def decode_reset_offset_body(data: bytes | bytearray | memoryview | str) -> dict[MessageQueue, int]:
    """Either form of ResetOffsetBody (see :func:`encode_reset_offset_body`)."""
    what = "ResetOffsetBody"
    table = _object(data, what).get("offsetTable") or {}
    if isinstance(table, list):
        return {_queue(item, what): _number(item, "offset", what) for item in table if isinstance(item, dict)}
    if not isinstance(table, dict):
        raise RemoteProtocolError(f"{what}.offsetTable is neither a map nor an array")
    return decode_mq_offsets(table, what)


def encode_consumer_status_body(consumer_table: Mapping[str, Mapping[MessageQueue, int]]) -> bytes:
    """GetConsumerStatusBody: each client's offsets (``messageQueueTable`` stays empty, as in Java)."""
    return dumps(
        {
            "consumerTable": {
                client_id: {mq_key(mq): offset for mq, offset in sorted(offsets.items())}
                for client_id, offsets in sorted(consumer_table.items())
            },
            "messageQueueTable": {},
        }
    )


def decode_consumer_status_body(
    data: bytes | bytearray | memoryview | str,
) -> dict[str, dict[MessageQueue, int]]:
    what = "GetConsumerStatusBody"
    obj = _object(data, what)
    return {
        str(client_id): decode_mq_offsets(offsets, what)
        for client_id, offsets in _table(obj, "consumerTable", what).items()
        if isinstance(offsets, dict)
    }


@dataclass(frozen=True, slots=True)
class CheckClientRequestBody:
    """CHECK_CLIENT_CONFIG's body: does the broker accept this subscription?"""

    client_id: str
    group: str
    subscription_data: SubscriptionData


def encode_check_client_body(body: CheckClientRequestBody) -> bytes:
    return dumps(
        {
            "clientId": body.client_id,
            "group": body.group,
            "subscriptionData": _subscription_json(body.subscription_data),
        }
    )


def decode_check_client_body(data: bytes | bytearray | memoryview | str) -> CheckClientRequestBody:
    what = "CheckClientRequestBody"
    obj = _object(data, what)
    raw = obj.get("subscriptionData")
    if not isinstance(raw, dict):
        raise RemoteProtocolError(f"{what}.subscriptionData is missing")
    return CheckClientRequestBody(
        str(obj.get("clientId") or ""),
        str(obj.get("group") or ""),
        _subscription(raw, f"{what}.subscriptionData"),
    )


# -- QUERY_CONSUME_QUEUE (321) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumeQueueData:
    """One consume queue entry as QUERY_CONSUME_QUEUE shows it (RocketMQ's ConsumeQueueData)."""

    physic_offset: int
    physic_size: int
    tags_code: int
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None

    def java_string(self) -> str:
        """Java's ``ConsumeQueueData.toString()``, which ``mqadmin queryCq`` prints per entry."""

        def text(value: str | None) -> str:
            return "null" if value is None else value

        return (
            f"ConsumeQueueData{{physicOffset={self.physic_offset}, physicSize={self.physic_size}, "
            f"tagsCode={self.tags_code}, extendDataJson='{text(self.extend_data_json)}', "
            f"bitMap='{text(self.bit_map)}', eval={str(self.eval).lower()}, msg='{text(self.msg)}'}}"
        )


@dataclass(frozen=True, slots=True)
class QueryConsumeQueueResponseBody:
    """QUERY_CONSUME_QUEUE's answer: entries from the asked index, the queue's bounds, and with a
    consumer group its subscription (or why there is none, in ``filter_data``)."""

    queue_data: list[ConsumeQueueData]
    max_queue_index: int
    min_queue_index: int
    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None


def encode_query_consume_queue(body: QueryConsumeQueueResponseBody) -> bytes:
    document: dict[str, Any] = {
        "maxQueueIndex": body.max_queue_index,
        "minQueueIndex": body.min_queue_index,
        "queueData": [
            {
                key: value
                for key, value in (
                    ("bitMap", entry.bit_map),
                    ("eval", entry.eval),
                    ("extendDataJson", entry.extend_data_json),
                    ("msg", entry.msg),
                    ("physicOffset", entry.physic_offset),
                    ("physicSize", entry.physic_size),
                    ("tagsCode", entry.tags_code),
                )
                if value is not None
            }
            for entry in body.queue_data
        ],
    }
    if body.subscription_data is not None:
        document["subscriptionData"] = _subscription_json(body.subscription_data)
    if body.filter_data is not None:
        document["filterData"] = body.filter_data
    return dumps(document)


def decode_query_consume_queue(data: bytes | bytearray | memoryview | str) -> QueryConsumeQueueResponseBody:
    document = loads(data)
    if not isinstance(document, dict):
        raise RemoteProtocolError("QueryConsumeQueueResponseBody: not a JSON object")
    entries = []
    for item in document.get("queueData") or []:
        if not isinstance(item, dict):
            raise RemoteProtocolError("QueryConsumeQueueResponseBody: a queueData entry is not an object")
        entries.append(
            ConsumeQueueData(
                physic_offset=int(item.get("physicOffset", 0)),
                physic_size=int(item.get("physicSize", 0)),
                tags_code=int(item.get("tagsCode", 0)),
                extend_data_json=item.get("extendDataJson"),
                bit_map=item.get("bitMap"),
                eval=bool(item.get("eval", False)),
                msg=item.get("msg"),
            )
        )
    subscription = document.get("subscriptionData")
    return QueryConsumeQueueResponseBody(
        queue_data=entries,
        max_queue_index=int(document.get("maxQueueIndex", 0)),
        min_queue_index=int(document.get("minQueueIndex", 0)),
        subscription_data=_subscription(subscription, "subscriptionData")
        if isinstance(subscription, dict)
        else None,
        filter_data=document.get("filterData"),
    )
