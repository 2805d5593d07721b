"""The compiled ``_record_columns`` path of ``records_batch`` against its NumPy twin and the
record-at-a-time reference: the same rows (or the same refusal) for every body."""

from __future__ import annotations

import pyarrow as pa  # type: ignore[import-untyped]
import pytest

from orbitmq import native
from orbitmq.model.message import MessageConst, MessageExt, SysFlag
from orbitmq.protocol.message_codec import encode_stored_message
from orbitmq.protocol.tags import TagFilter
from orbitmq.spark._arrow_records import records_batch_native, records_batch_py
from orbitmq.spark._schema import ColumnBuilder, source_arrow_schema

_compiled = native.load("orbitmq.spark._record_columns")
pytestmark = pytest.mark.skipif(_compiled is None, reason="the C helper did not build (or is turned off)")

_END = 2**62


def _record(offset: int, properties: dict[str, str], body: bytes = b"payload", **fields: object) -> bytes:
    message = MessageExt(
        topic="Orders", body=body, properties=properties, queue_id=2, queue_offset=offset,
        commit_log_offset=7000 + 300 * offset, born_timestamp=1_700_000_000_000 + offset,
        store_timestamp=1_700_000_000_050 + offset, store_host=("10.1.2.3", 10911),
        reconsume_times=offset % 3, **fields,  # type: ignore[arg-type]
    )  # fmt: skip
    return encode_stored_message(message)


def _both(body: bytes, expression: str = "*", end_offset: int = _END) -> pa.RecordBatch | None:
    """The compiled path's batch, after checking that the twin answers the same."""
    compiled = records_batch_native(body, "broker-a", TagFilter.parse(expression), end_offset)
    twin = records_batch_py(body, "broker-a", TagFilter.parse(expression), end_offset)
    if compiled is None or twin is None:
        assert compiled is None and twin is None
        return None
    compiled.validate(full=True)
    assert compiled.schema.equals(source_arrow_schema())
    assert compiled.to_pylist() == twin.to_pylist()
    return compiled


def _reference(body: bytes, expression: str = "*", end_offset: int = _END) -> list[dict[str, object]]:
    builder = ColumnBuilder("broker-a", TagFilter.parse(expression), end_offset)
    builder.add_pull_body(body)
    return builder.flush().to_pylist()  # type: ignore[no-any-return]


def _mixed(count: int) -> bytes:
    records = []
    for offset in range(count):
        properties = {"WAIT": "true", "note": f"n{offset}" * (offset % 9)}
        if offset % 3:
            properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = f"7F0000010000{offset:020X}"
        if offset % 2:
            properties[MessageConst.TAGS] = "odd" if offset % 4 == 1 else ""
            properties[MessageConst.KEYS] = f"k{offset} j{offset}"
        if offset % 5 == 0:
            properties = {}
        body = bytes(range(256)) * (offset % 5) + b"x" * (offset % 13)
        records.append(_record(offset, properties, body))
    return b"".join(records)


@pytest.mark.parametrize(
    ("expression", "end_offset"), [("*", _END), ("odd", _END), ("*", 40), ("odd || x", 9)]
)
def test_record_columns_gives_the_twins_and_the_references_rows(expression: str, end_offset: int) -> None:
    body = _mixed(75)
    batch = _both(body, expression, end_offset)
    assert batch is not None
    assert batch.to_pylist() == _reference(body, expression, end_offset)


def test_record_columns_reads_properties_as_the_reference_decoder_does() -> None:
    # Empty items and items without 0x01 are skipped; a value keeps a second 0x01; a trailing
    # separator (the C++ client's) adds nothing; an empty value is a value.
    odd = "\x02\x02A\x01x\x01y\x02noseparator\x02TAGS\x01\x02KEYS\x01k1 k2\x02"
    body = _record(5, {}) + _record(6, {"A": "1"})
    # Rewrite the first record's (empty) property string with the odd one, fixing the sizes.
    first = bytearray(_record(5, {}))
    first[-2:] = len(odd).to_bytes(2, "big")
    first += odd.encode()
    first[0:4] = len(first).to_bytes(4, "big")
    body = bytes(first) + _record(6, {"A": "1"})
    batch = _both(body)
    assert batch is not None
    rows = batch.to_pylist()
    assert rows == _reference(body)
    assert rows[0]["properties"] == [("A", "x\x01y"), ("TAGS", ""), ("KEYS", "k1 k2")]
    assert (rows[0]["tags"], rows[0]["keys"], rows[1]["tags"], rows[1]["keys"]) == ("", "k1 k2", None, None)


def test_record_columns_takes_a_missing_uniq_key_as_the_offset_msg_id() -> None:
    batch = _both(_record(3, {"TAGS": "a"}) + _record(4, {"UNIQ_KEY": ""}))
    assert batch is not None
    assert batch.column("msg_id").to_pylist() == [
        bytes([10, 1, 2, 3, 0, 0, 0x2A, 0x9F, 0, 0, 0, 0, 0, 0, 0x1E, 0xDC]).hex().upper(),
        "",
    ]


def test_record_columns_refuses_what_the_twin_refuses() -> None:
    plain = _record(1, {"A": "b"})
    not_utf8 = bytearray(plain)
    not_utf8[-1] = 0xFF  # the last byte of the value "b"
    refused = [
        b"",
        plain[:-1],
        plain + plain[:50],
        bytes(not_utf8),
        _record(2, {}, b"z" * 40, sys_flag=SysFlag.COMPRESSED),
    ]
    for body in refused:
        assert _both(body) is None, body[:16]
    # Every cut of a two-record body: refused, or (at the record boundary) the first record.
    body = _mixed(2)
    for cut in range(1, len(body)):
        _both(body[:cut])
