"""Bodies clients answer the broker's relayed admin questions with (sans-IO, fastjson form).

* GET_CONSUMER_RUNNING_INFO (307): ConsumerRunningInfo, what a consumer is doing: its
  settings (``properties``), subscriptions, per queue what it holds (``mqTable`` of
  ProcessQueueInfo) and per topic its rates (``statusTable`` of ConsumeStatus). rocketmq-exporter
  turns ``statusTable`` into its ``rocketmq_client_*`` metrics.
* CONSUME_MESSAGE_DIRECTLY (309): ConsumeMessageDirectlyResult, the outcome of consuming one
  message on demand (the dashboard's "resend" of a dead letter).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from orbitmq.errors import RemoteProtocolError
from orbitmq.model.heartbeat import SubscriptionData
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.admin_bodies import mq_key, queue_of_key
from orbitmq.protocol.bodies import _subscription, _subscription_json
from orbitmq.protocol.fastjson import dumps, loads

__all__ = [
    "ConsumeMessageDirectlyResult",
    "ConsumeStatus",
    "ConsumerRunningInfo",
    "ProcessQueueInfo",
    "decode_consume_message_directly_result",
    "decode_consumer_running_info",
    "encode_consume_message_directly_result",
    "encode_consumer_running_info",
]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclass(frozen=True, slots=True)
class ProcessQueueInfo:
    """What a consumer holds of one queue (Java's ProcessQueueInfo; ``droped`` is Java's spelling)."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mi_b: int = 0
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    droped: bool = False
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ConsumeStatus:
    """A consumer's rates on one topic (Java's ConsumeStatus; RT in ms, TPS per second)."""

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0


_STATUS_WIRE = {
    "pull_rt": "pullRT",
    "pull_tps": "pullTPS",
    "consume_rt": "consumeRT",
    "consume_ok_tps": "consumeOKTPS",
    "consume_failed_tps": "consumeFailedTPS",
    "consume_failed_msgs": "consumeFailedMsgs",
}


def _queue_info_json(info: ProcessQueueInfo) -> dict[str, Any]:
    return dict(sorted((_camel(item.name), getattr(info, item.name)) for item in fields(info)))


def _queue_info(raw: Mapping[str, Any]) -> ProcessQueueInfo:
    values: dict[str, Any] = {}
    for item in fields(ProcessQueueInfo):
        key = _camel(item.name)
        if key in raw and raw[key] is not None:
            values[item.name] = bool(raw[key]) if item.type in ("bool", bool) else int(raw[key])  # noqa: E721
    return ProcessQueueInfo(**values)


@dataclass(slots=True)
class ConsumerRunningInfo:
    """GET_CONSUMER_RUNNING_INFO's answer."""

    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: dict[str, ConsumeStatus] = field(default_factory=dict)
    jstack: str = ""


def encode_consumer_running_info(info: ConsumerRunningInfo) -> bytes:
    return dumps(
        {
            "jstack": info.jstack,
            "mqTable": {mq_key(mq): _queue_info_json(item) for mq, item in sorted(info.mq_table.items())},
            "properties": dict(sorted(info.properties.items())),
            "statusTable": {
                topic: {_STATUS_WIRE[name]: getattr(status, name) for name in _STATUS_WIRE}
                for topic, status in sorted(info.status_table.items())
            },
            "subscriptionSet": [_subscription_json(sub) for sub in info.subscription_set],
        }
    )


def decode_consumer_running_info(data: bytes | bytearray | memoryview | str) -> ConsumerRunningInfo:
    what = "ConsumerRunningInfo"
    obj = loads(data, what)
    if not isinstance(obj, dict):
        raise RemoteProtocolError(f"{what} is not a JSON object")
    try:
        return ConsumerRunningInfo(
            {str(key): str(value) for key, value in (obj.get("properties") or {}).items()},
            [_subscription(sub, f"{what}.subscriptionSet") for sub in obj.get("subscriptionSet") or []],
            {
                queue_of_key(key, what): _queue_info(value)
                for key, value in (obj.get("mqTable") or {}).items()
            },
            {
                str(topic): ConsumeStatus(
                    **{
                        name: type(getattr(ConsumeStatus(), name))(raw.get(wire_name, 0))
                        for name, wire_name in _STATUS_WIRE.items()
                    }
                )
                for topic, raw in (obj.get("statusTable") or {}).items()
            },
            str(obj.get("jstack") or ""),
        )
    except (AttributeError, TypeError, ValueError) as exc:
        raise RemoteProtocolError(f"{what}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResult:
    """CONSUME_MESSAGE_DIRECTLY's answer. ``consume_result``: CR_SUCCESS, CR_LATER, CR_ROLLBACK,
    CR_COMMIT, CR_THROW_EXCEPTION or CR_RETURN_NULL."""

    consume_result: str
    order: bool = False
    auto_commit: bool = True
    remark: str = ""
    spent_time_mills: int = 0


def encode_consume_message_directly_result(result: ConsumeMessageDirectlyResult) -> bytes:
    return dumps(
        {
            "autoCommit": result.auto_commit,
            "consumeResult": result.consume_result,
            "order": result.order,
            "remark": result.remark,
            "spentTimeMills": result.spent_time_mills,
        }
    )


def decode_consume_message_directly_result(
    data: bytes | bytearray | memoryview | str,
) -> ConsumeMessageDirectlyResult:
    what = "ConsumeMessageDirectlyResult"
    obj = loads(data, what)
    if not isinstance(obj, dict):
        raise RemoteProtocolError(f"{what} is not a JSON object")
    return ConsumeMessageDirectlyResult(
        str(obj.get("consumeResult") or ""),
        bool(obj.get("order", False)),
        bool(obj.get("autoCommit", True)),
        str(obj.get("remark") or ""),
        int(obj.get("spentTimeMills") or 0),
    )
