"""Trace records: RocketMQ's field layouts, the variants older and newer writers produce.

Method: golden record text (Java 4.9.8, a 5.x Pub with clientHost, the short SubAfter forms of
older and CLOUD writers) decodes to the expected fields; every record type round-trips.
"""

from __future__ import annotations

import pytest

from orbitmq.protocol.trace_data import TraceRecord, decode_trace_records, encode_trace_record, trace_keys

S1, S2 = "\x01", "\x02"


def test_java_pub_with_14_fields_decodes() -> None:
    text = (
        S1.join(
            [
                "Pub",
                "1700",
                "DefaultRegion",
                "PG",
                "T",
                "MID",
                "null",
                "k1 k2",
                "10.0.0.1:10911",
                "64",
                "3",
                "0",
                "OFF",
                "true",
            ]
        )
        + S2
    )
    (record,) = decode_trace_records(text)
    assert (record.group, record.tags, record.keys, record.cost_ms, record.offset_msg_id, record.success) == (
        "PG",
        None,
        "k1 k2",
        3,
        "OFF",
        True,
    )


@pytest.mark.parametrize(
    ("fields", "offset_msg_id", "client_host"),
    [
        (["Pub", "1", "R", "PG", "T", "MID", "t", "k", "h:1", "8", "2", "0", "true"], None, ""),
        (
            ["Pub", "1", "R", "PG", "T", "MID", "t", "k", "h:1", "8", "2", "0", "OFF", "false", "10.1.1.1"],
            "OFF",
            "10.1.1.1",
        ),
    ],
)
def test_pub_with_13_or_15_fields_decodes(
    fields: list[str], offset_msg_id: str | None, client_host: str
) -> None:
    (record,) = decode_trace_records(S1.join(fields) + S2)
    assert record.offset_msg_id == offset_msg_id and record.client_host == client_host


@pytest.mark.parametrize(
    ("fields", "context_code", "group"),
    [
        (["SubAfter", "REQ", "MID", "5", "true", "k"], 0, ""),
        (["SubAfter", "REQ", "MID", "5", "false", "k", "4"], 4, ""),
        (["SubAfter", "REQ", "MID", "5", "true", "k", "0", "1700", "CG"], 0, "CG"),
    ],
)
def test_sub_after_with_6_7_or_9_fields_decodes(fields: list[str], context_code: int, group: str) -> None:
    (record,) = decode_trace_records(S1.join(fields) + S2)
    assert (record.request_id, record.cost_ms, record.context_code, record.group) == (
        "REQ",
        5,
        context_code,
        group,
    )


@pytest.mark.parametrize(
    "record",
    [
        TraceRecord("Pub", 1, "R", "PG", "T", "M", "tag", "k", "h:1", 10, 2, 3, "OFF", False),
        TraceRecord("SubBefore", 1, "R", "CG", msg_id="M", keys=None, request_id="Q", retry_times=2),
        TraceRecord("SubAfter", 5, group="CG", msg_id="M", keys="k", cost_ms=4, success=True, request_id="Q", context_code=0),
        TraceRecord("EndTransaction", 1, "R", "PG", "T", "M", "t", "k", "h:1", msg_type=2, transaction_id="X",
                    transaction_state="COMMIT_MESSAGE", from_transaction_check=True),
    ],
)  # fmt: skip
def test_trace_records_round_trip(record: TraceRecord) -> None:
    assert decode_trace_records(encode_trace_record(record)) == [record]


def test_trace_keys_joins_msg_ids_and_business_keys_once() -> None:
    records = [
        TraceRecord("Pub", msg_id="M1", keys="a b"),
        TraceRecord("SubAfter", msg_id="M1", keys="b null"),
    ]
    assert trace_keys(records) == "M1 a b"


def test_unknown_and_short_records_are_skipped() -> None:
    assert decode_trace_records("Recall" + S1 + "1" + S2 + "Pub" + S1 + "x" + S2) == []
