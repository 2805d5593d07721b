"""The column builder against the reference decoder: same rows from raw pull bodies as from
decoded messages, for compressed bodies, IPv6 hosts, missing UNIQ_KEY, tag filters and ends."""

from __future__ import annotations

import zlib

import pytest

from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageConst, MessageExt, SysFlag
from orbitmq.protocol.message_codec import decode_stored_messages, encode_stored_message
from orbitmq.protocol.tags import TagFilter
from orbitmq.spark._arrow_records import records_batch, records_batch_py
from orbitmq.spark._schema import ColumnBuilder, messages_to_batch, source_arrow_schema


def _message(offset: int, **overrides: object) -> MessageExt:
    fields: dict[str, object] = {
        "topic": "Orders", "body": f"body-{offset}".encode(), "queue_id": 3, "queue_offset": offset,
        "commit_log_offset": 1000 + offset * 200, "born_timestamp": 1_700_000_000_000 + offset,
        "store_timestamp": 1_700_000_000_005 + offset, "store_host": ("10.1.2.3", 10911),
        "properties": {"UNIQ_KEY": f"U{offset}", "TAGS": "a" if offset % 2 else "b", "KEYS": "k1 k2"},
        "reconsume_times": offset % 3,
    }  # fmt: skip
    fields.update(overrides)
    return MessageExt(**fields)  # type: ignore[arg-type]


def _rows_from_raw(
    messages: list[MessageExt], expression: str = "*", end: int = 10**9
) -> list[dict[str, object]]:
    builder = ColumnBuilder("broker-a", TagFilter.parse(expression), end)
    builder.add_pull_body(b"".join(encode_stored_message(m) for m in messages))
    return builder.flush().to_pylist()  # type: ignore[no-any-return]


def test_column_builder_matches_reference_decoding() -> None:
    messages = [_message(i) for i in range(5)]
    messages.append(_message(5, properties={"TAGS": "a"}))  # no UNIQ_KEY: offsetMsgId
    messages.append(_message(6, born_host=("::1", 5), sys_flag=SysFlag.BORNHOST_V6))  # reference path
    raw = b"".join(encode_stored_message(m) for m in messages)
    expected = messages_to_batch(decode_stored_messages(raw, decompress=True), "broker-a").to_pylist()
    got = _rows_from_raw(messages)
    assert got == expected
    assert got[5]["msg_id"] == messages[5].offset_msg_id and got[0]["msg_id"] == "U0"
    assert got[2]["properties"] == [("UNIQ_KEY", "U2"), ("TAGS", "b"), ("KEYS", "k1 k2")]
    assert got[1]["born_timestamp"].timestamp() * 1000 == pytest.approx(1_700_000_000_001)


def test_column_builder_inflates_compressed_bodies() -> None:
    plain = b"x" * 5000
    msg = _message(0, body=zlib.compress(plain), sys_flag=SysFlag.COMPRESSED)
    assert _rows_from_raw([msg])[0]["body"] == plain


def test_column_builder_filters_tags_exactly_and_trims_the_end() -> None:
    rows = _rows_from_raw([_message(i) for i in range(10)], expression="a", end=7)
    assert [r["queue_offset"] for r in rows] == [1, 3, 5]


def test_column_builder_rejects_garbage_with_our_error() -> None:
    builder = ColumnBuilder("broker-a", TagFilter.parse("*"), 10)
    with pytest.raises(RemoteProtocolError):
        builder.add_pull_body(encode_stored_message(_message(0))[:-3])
    with pytest.raises(RemoteProtocolError):
        builder.add_pull_body(b"\x00" * 100)


def test_flushed_batches_have_the_declared_schema_and_reset() -> None:
    builder = ColumnBuilder("broker-a", TagFilter.parse("*"), 10)
    builder.add_messages([_message(1), _message(2)])
    first = builder.flush()
    assert first.schema.equals(source_arrow_schema()) and first.num_rows == 2
    assert len(builder) == 0 and builder.flush().num_rows == 0


def _mixed_records(count: int) -> list[MessageExt]:
    """Long and short bodies, with and without UNIQ_KEY, tags, keys, or any property."""
    records = []
    for index in range(count):
        props = {"WAIT": "true", "note": f"n{index}"}
        if index % 3:
            props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = f"7F00000100002A9F{index:016X}"
        if index % 2:
            props[MessageConst.TAGS] = "odd"
            props[MessageConst.KEYS] = f"k{index} j{index}"
        if index % 5 == 0:
            props = {}
        body = bytes(range(256)) * 4 if index % 7 else f"short{index}".encode()
        records.append(
            MessageExt(
                topic="Orders", body=body, properties=props, queue_id=3, queue_offset=100 + index,
                born_timestamp=1_700_000_000_000 + index, store_timestamp=1_700_000_000_100 + index,
                commit_log_offset=4096 * index, reconsume_times=index % 4,
            )
        )  # fmt: skip
    return records


@pytest.mark.parametrize(("expression", "end_offset"), [("*", 2**62), ("odd", 150)])
def test_records_batch_gives_the_rows_of_the_record_at_a_time_path(expression: str, end_offset: int) -> None:
    body = b"".join(encode_stored_message(m) for m in _mixed_records(70))
    builder = ColumnBuilder("broker-a", TagFilter.parse(expression), end_offset)
    builder.add_pull_body(body)
    fast = records_batch(body, "broker-a", TagFilter.parse(expression), end_offset)
    assert fast is not None and fast.schema.equals(source_arrow_schema())
    assert fast.to_pylist() == builder.flush().to_pylist()


def test_records_batch_leaves_compressed_and_malformed_bodies_to_the_slow_path() -> None:
    compressed = MessageExt(
        topic="T", body=zlib.compress(b"x" * 300), queue_offset=1, sys_flag=SysFlag.COMPRESSED
    )
    body = encode_stored_message(compressed)
    assert records_batch(body, "b", TagFilter.parse("*"), 10) is None
    assert records_batch(body[:-3], "b", TagFilter.parse("*"), 10) is None


def test_records_batch_leaves_text_that_is_not_utf8_to_the_reference_decoder() -> None:
    record = bytearray(encode_stored_message(_message(4, properties={"A": "b"})))
    record[-1] = 0xFF  # the value "b" becomes a byte that is not UTF-8
    assert records_batch_py(bytes(record), "b", TagFilter.parse("*"), 10) is None
    assert records_batch(bytes(record), "b", TagFilter.parse("*"), 10) is None
