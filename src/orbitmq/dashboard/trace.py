"""Message trace records (operations-features §1.5): decoded from trace-topic message bodies.

Pure. A body holds records ended by ``\\x02``, fields separated by ``\\x01``. Decoded here:
``Pub`` (13 to 15 fields), ``SubBefore`` (8), ``SubAfter`` (6, 7 or 9) and ``EndTransaction``
(13); other or short records are skipped, never fatal (a dashboard shows what it can).
SubBefore and SubAfter are paired by request id on the page (§1.7).
"""

from __future__ import annotations

from dataclasses import dataclass

SEP_FIELD = "\x01"
SEP_RECORD = "\x02"


@dataclass(frozen=True, slots=True)
class TraceRecord:
    kind: str
    """Pub, SubBefore, SubAfter or EndTransaction."""
    group: str
    msg_id: str
    timestamp_ms: int
    cost_ms: int
    success: bool | None
    keys: str
    request_id: str = ""
    retry_times: int = 0
    detail: str = ""


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1


def decode_trace_body(body: str) -> list[TraceRecord]:
    """Every record of one trace message body that can be read."""
    records = []
    for raw in body.split(SEP_RECORD):
        fields = raw.split(SEP_FIELD)
        record = _record(fields)
        if record is not None:
            records.append(record)
    return records


def _record(fields: list[str]) -> TraceRecord | None:
    kind = fields[0].strip() if fields else ""
    if kind == "Pub" and len(fields) >= 13:
        return TraceRecord(
            "Pub", fields[3], fields[5], _int(fields[1]), _int(fields[10]), fields[-1] == "true" if len(fields) >= 14 else True,
            fields[7], detail=f"topic {fields[4]}, tags {fields[6]}, store host {fields[8]}",
        )  # fmt: skip
    if kind == "SubBefore" and len(fields) >= 8:
        return TraceRecord(
            "SubBefore", fields[3], fields[5], _int(fields[1]), 0, None, fields[7],
            request_id=fields[4], retry_times=_int(fields[6]),
        )  # fmt: skip
    if kind == "SubAfter" and len(fields) >= 6:
        group = fields[8] if len(fields) >= 9 else ""
        timestamp = _int(fields[7]) if len(fields) >= 9 else -1
        return TraceRecord(
            "SubAfter", group, fields[2], timestamp, _int(fields[3]), fields[4] == "true", fields[5],
            request_id=fields[1],
        )  # fmt: skip
    if kind == "EndTransaction" and len(fields) >= 13:
        return TraceRecord(
            "EndTransaction",
            fields[3],
            fields[5],
            _int(fields[1]),
            0,
            None,
            fields[7],
            detail=f"state {fields[11]}",
        )
    return None
