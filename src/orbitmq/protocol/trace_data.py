"""Message-trace records: RocketMQ's TraceDataEncoder format (operations-features §1.5), sans-IO.

A trace message's body is records, each ending with ``0x02``, fields separated by ``0x01``;
booleans are ``true``/``false``, numbers decimal, absent values the text ``null``:

==============  ============================================================================
type            fields (index: meaning)
==============  ============================================================================
Pub (14)        0 type, 1 timestamp ms, 2 regionId, 3 producer group, 4 topic, 5 msgId, 6 tags,
                7 keys, 8 storeHost, 9 body length, 10 cost ms, 11 msgType ordinal,
                12 offsetMsgId, 13 success; 13 fields (no offsetMsgId) and a 15th (clientHost)
                are read too
SubBefore (8)   0 type, 1 timestamp, 2 regionId, 3 consumer group, 4 requestId, 5 msgId,
                6 retry times, 7 keys
SubAfter (9)    0 type, 1 requestId, 2 msgId, 3 cost ms, 4 success, 5 keys, 6 contextCode,
                7 timestamp, 8 consumer group; 6 and 7 fields are read too
EndTransaction  0 type, 1 timestamp, 2 regionId, 3 producer group, 4 topic, 5 msgId, 6 tags,
(13)            7 keys, 8 storeHost, 9 msgType (2), 10 transactionId, 11 state, 12 from check
==============  ============================================================================

msgType ordinals: 0 Normal_Msg, 1 Trans_Msg_Half, 2 Trans_msg_Commit, 3 Delay_Msg, 4 Order_Msg.
contextCode: 0 SUCCESS, 1 TIME_OUT, 2 EXCEPTION, 3 RETURNNULL, 4 FAILED. Records of other
types or malformed ones are skipped when decoding (a reader must survive any writer).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "TRACE_TYPE_END_TRANSACTION",
    "TRACE_TYPE_PUB",
    "TRACE_TYPE_SUB_AFTER",
    "TRACE_TYPE_SUB_BEFORE",
    "TraceRecord",
    "decode_trace_records",
    "encode_trace_record",
    "trace_keys",
]

FIELD_SEPARATOR = "\x01"
RECORD_SEPARATOR = "\x02"
TRACE_TYPE_PUB = "Pub"
TRACE_TYPE_SUB_BEFORE = "SubBefore"
TRACE_TYPE_SUB_AFTER = "SubAfter"
TRACE_TYPE_END_TRANSACTION = "EndTransaction"
MSG_TYPE_NORMAL = 0
MSG_TYPE_TRANS_HALF = 1
MSG_TYPE_TRANS_COMMIT = 2
MSG_TYPE_DELAY = 3


@dataclass(slots=True)
class TraceRecord:
    """One trace record; which fields matter depends on ``trace_type`` (see the module table)."""

    trace_type: str
    timestamp: int = 0
    region_id: str = ""
    group: str = ""
    topic: str = ""
    msg_id: str = ""
    tags: str | None = None
    keys: str | None = None
    store_host: str = ""
    body_length: int = 0
    cost_ms: int = 0
    msg_type: int = MSG_TYPE_NORMAL
    offset_msg_id: str | None = None
    success: bool = True
    request_id: str = ""
    retry_times: int = 0
    context_code: int = 0
    transaction_id: str | None = None
    transaction_state: str = ""
    from_transaction_check: bool = False
    client_host: str = ""


def _text(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def encode_trace_record(record: TraceRecord) -> str:
    """One record, with its trailing ``0x02``, as the Java encoder writes it."""
    kind = record.trace_type
    if kind == TRACE_TYPE_PUB:
        fields: list[object] = [
            kind, record.timestamp, record.region_id, record.group, record.topic, record.msg_id,
            record.tags, record.keys, record.store_host, record.body_length, record.cost_ms,
            record.msg_type, record.offset_msg_id, record.success,
        ]  # fmt: skip
    elif kind == TRACE_TYPE_SUB_BEFORE:
        fields = [
            kind, record.timestamp, record.region_id, record.group, record.request_id, record.msg_id,
            record.retry_times, record.keys,
        ]  # fmt: skip
    elif kind == TRACE_TYPE_SUB_AFTER:
        fields = [
            kind, record.request_id, record.msg_id, record.cost_ms, record.success, record.keys,
            record.context_code, record.timestamp, record.group,
        ]  # fmt: skip
    elif kind == TRACE_TYPE_END_TRANSACTION:
        fields = [
            kind, record.timestamp, record.region_id, record.group, record.topic, record.msg_id,
            record.tags, record.keys, record.store_host, record.msg_type, record.transaction_id,
            record.transaction_state, record.from_transaction_check,
        ]  # fmt: skip
    else:
        raise ValueError(f"unknown trace type {kind!r}")
    return FIELD_SEPARATOR.join(_text(field) for field in fields) + RECORD_SEPARATOR


def _optional(text: str) -> str | None:
    return None if text == "null" else text


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"


def _decode_one(fields: list[str]) -> TraceRecord | None:
    kind = fields[0]
    count = len(fields)
    if kind == TRACE_TYPE_PUB and count >= 13:
        success_index = 13 if count >= 14 else 12
        return TraceRecord(
            kind, _int(fields[1]), fields[2], fields[3], fields[4], fields[5], _optional(fields[6]),
            _optional(fields[7]), fields[8], _int(fields[9]), _int(fields[10]), _int(fields[11]),
            offset_msg_id=_optional(fields[12]) if count >= 14 else None,
            success=_bool(fields[success_index]),
            client_host=fields[14] if count >= 15 else "",
        )  # fmt: skip
    if kind == TRACE_TYPE_SUB_BEFORE and count >= 8:
        return TraceRecord(
            kind, _int(fields[1]), fields[2], fields[3], msg_id=fields[5], keys=_optional(fields[7]),
            request_id=fields[4], retry_times=_int(fields[6]),
        )  # fmt: skip
    if kind == TRACE_TYPE_SUB_AFTER and count >= 6:
        return TraceRecord(
            kind,
            timestamp=_int(fields[7]) if count >= 9 else 0,
            group=fields[8] if count >= 9 else "",
            msg_id=fields[2],
            keys=_optional(fields[5]),
            cost_ms=_int(fields[3]),
            success=_bool(fields[4]),
            request_id=fields[1],
            context_code=_int(fields[6]) if count >= 7 else 0,
        )
    if kind == TRACE_TYPE_END_TRANSACTION and count >= 13:
        return TraceRecord(
            kind, _int(fields[1]), fields[2], fields[3], fields[4], fields[5], _optional(fields[6]),
            _optional(fields[7]), fields[8], msg_type=_int(fields[9]),
            transaction_id=_optional(fields[10]), transaction_state=fields[11],
            from_transaction_check=_bool(fields[12]),
        )  # fmt: skip
    return None


def decode_trace_records(text: str) -> list[TraceRecord]:
    """Every record of a trace message body (Java, C++ 2.x or OrbitMQ written)."""
    records = []
    for chunk in text.split(RECORD_SEPARATOR):
        chunk = chunk.strip("\n")
        if not chunk:
            continue
        record = _decode_one(chunk.rstrip(FIELD_SEPARATOR).split(FIELD_SEPARATOR))
        if record is not None:
            records.append(record)
    return records


def trace_keys(records: list[TraceRecord]) -> str:
    """The KEYS property of a trace message: every msgId and business key, space-separated, once."""
    seen: dict[str, None] = {}
    for record in records:
        if record.msg_id:
            seen.setdefault(record.msg_id, None)
        for key in (record.keys or "").split(" "):
            if key and key != "null":
                seen.setdefault(key, None)
    return " ".join(seen)
