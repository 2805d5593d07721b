"""The compiled ``_property_scan.record_values`` against its twin, and ``matches_in`` against ``filter(record)``.

Method: Hypothesis lays stored records (IPv4 and IPv6 hosts, any body and topic) with property
strings made of the queried names, other names, duplicates, a leading item, values holding the
name-value separator or bytes that are not UTF-8, into a buffer; then sometimes changes a byte
or moves a row's offset or size (records cut short, running past the readable limit, lying
before the buffer, sizes of zero or below). The compiled function must answer exactly what
``record_values_py`` answers. A SQL92 filter's ``matches_in`` must answer each record in the
buffer exactly as calling the filter on the record's bytes does, with the compiled helper and
with the pure-Python path.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from orbitmq import native
from orbitmq.filter import compile_filter
from orbitmq.filter import records as records_module
from orbitmq.filter.records import MAX_NAMES, ReadableBuffer, Row, record_values_py
from orbitmq.model.message import MessageExt
from orbitmq.protocol.message_codec import encode_stored_message
from tests.support.native_modes import MODES, use_mode

_compiled = native.load("orbitmq.filter._property_scan")
_NAMES = ("price", "region", "TAGS", "a", "é", "")


@st.composite
def _property_strings(draw: st.DrawFn) -> bytes:
    name = st.sampled_from([*(n.encode() for n in _NAMES), b"pri", b"UNIQ_KEY", b"a\x01b"])
    value = st.one_of(
        st.sampled_from([b"", b"7", b"42", b"eu", b"us", b"\xff\xfe", b"x\x01y", b"caf\xc3\xa9"]),
        st.binary(max_size=5),
    )
    items = draw(st.lists(st.tuples(name, value), max_size=6))
    text = b"\x02".join(key + b"\x01" + data for key, data in items)
    if draw(st.booleans()):
        text += draw(st.sampled_from([b"\x02", b"\x02price", b"price\x01", b"\x01"]))
    return text


@st.composite
def _records(draw: st.DrawFn) -> bytes:
    hosts = draw(
        st.sampled_from([("10.0.0.1", "10.0.0.2"), ("::1", "10.0.0.2"), ("10.0.0.1", "::2"), ("::1", "::2")])
    )
    message = MessageExt(
        topic=draw(st.text(alphabet="Tt-é", min_size=1, max_size=8)),
        body=draw(st.binary(max_size=40)),
        born_host=(hosts[0], 1234),
        store_host=(hosts[1], 10911),
    )
    return encode_stored_message(message, draw(_property_strings()))


@st.composite
def _layouts(draw: st.DrawFn) -> tuple[bytes, int, int, list[Row]]:
    """A buffer of records, the log position of its first byte, its readable limit, the rows."""
    records = draw(st.lists(_records(), min_size=1, max_size=6))
    buffer = bytearray(b"\x00" * draw(st.integers(0, 3)))
    base = draw(st.integers(0, 2**40))
    rows: list[Row] = []
    for record in records:
        rows.append((base + len(buffer), len(record), 0))
        buffer += record
    buffer += draw(st.binary(max_size=3))
    for _ in range(draw(st.integers(0, 3))):  # a byte changed: a length, a host bit, a value
        position = draw(st.integers(0, len(buffer) - 1))
        buffer[position] ^= draw(st.sampled_from([0x01, 0x10, 0x20, 0x40, 0x80, 0xFF]))
    for _ in range(draw(st.integers(0, 3))):  # a row moved or resized
        index = draw(st.integers(0, len(rows) - 1))
        offset, size, tags = rows[index]
        rows[index] = (
            offset + draw(st.integers(-300, 300)),
            draw(st.sampled_from([size, size - 1, size + 1, 0, -5, 39, 40, 41, 97])),
            tags,
        )
    # The readable limit: the whole buffer, anywhere, or a byte either side of a record's end.
    ends = [
        min(max(offset - base + size + shift, 0), len(buffer))
        for offset, size, _ in rows
        for shift in (-1, 0, 1)
    ]
    limit = draw(st.one_of(st.just(len(buffer)), st.integers(0, len(buffer)), st.sampled_from(ends)))
    return bytes(buffer), base, limit, draw(st.permutations(rows))


_name_tuples = st.lists(st.sampled_from(_NAMES), max_size=4).map(tuple)


@pytest.mark.skipif(_compiled is None, reason="the compiled property scan is not built")
@settings(max_examples=500, deadline=None)
@given(_layouts(), _name_tuples, st.booleans())
@example((b"", 0, 0, [(0, 0, 0)]), ("price",), False)
def test_compiled_record_values_answer_as_the_python_twin(
    layout: tuple[bytes, int, int, list[Row]], names: tuple[str, ...], mapped: bool
) -> None:
    data, base, limit, rows = layout
    assert _compiled is not None
    buffer: ReadableBuffer = data
    if mapped and data:
        buffer = mmap.mmap(-1, len(data))
        buffer[:] = data
    compiled = _compiled.record_values(buffer, base, limit, rows, names)
    assert compiled == record_values_py(buffer, base, limit, rows, names)
    assert len(compiled) == len(rows)


def test_record_values_reads_the_last_duplicate_and_a_leading_name() -> None:
    properties = b"region\x01eu\x02price\x011\x02x\x01\x02price\x0199"
    record = encode_stored_message(MessageExt(topic="T", body=b"b"), properties)
    rows: list[Row] = [(100, len(record), 0), (100, len(record) + 1, 0), (99, len(record), 0)]
    for function in (record_values_py, _compiled.record_values if _compiled else record_values_py):
        assert function(record, 100, len(record), rows, ("price", "region", "x", "y")) == [
            (b"99", b"eu", b"", None),
            None,
            None,
        ]
        assert function(record[:-1], 100, len(record) - 1, [(100, len(record) - 1, 0)], ("price",)) == [False]


@pytest.mark.skipif(_compiled is None, reason="the compiled property scan is not built")
def test_compiled_record_values_refuses_what_the_twin_refuses() -> None:
    assert _compiled is not None
    for function in (_compiled.record_values, record_values_py):
        with pytest.raises(ValueError, match="limit"):
            function(b"abc", 0, 4, [], ("a",))
        with pytest.raises(ValueError, match="limit"):
            function(b"abc", 0, -1, [], ("a",))
        with pytest.raises(ValueError, match="names"):
            function(b"abc", 0, 3, [], ("a",) * (MAX_NAMES + 1))


@pytest.fixture(scope="module", params=MODES)
def scan_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a test with the compiled property scan, then with the pure-Python path."""
    compiled = _compiled.record_values if _compiled is not None else None
    yield from use_mode(request, records_module, "record_values", compiled, record_values_py, "property scan")


_EXPRESSIONS = (
    "price < 50 AND region IN ('eu', 'us')",
    "price >= 0 AND region IS NOT NULL",
    "region IS NULL",
    "a = 'x\x01y' OR TAGS = 'eu'",
    "1 = 1",
)


@settings(max_examples=300, deadline=None)
@given(_layouts(), st.sampled_from(_EXPRESSIONS))
def test_matches_in_answers_each_record_as_the_filter_does(
    scan_mode: str, layout: tuple[bytes, int, int, list[Row]], expression: str
) -> None:
    data, base, limit, rows = layout
    record_filter = compile_filter("SQL92", expression).stored_record_filter()
    answers = record_filter.matches_in(data, base, limit, rows)
    expected = []
    for offset, size, _ in rows:
        position = offset - base
        inside = size > 0 and position >= 0 and position + size <= limit
        expected.append(record_filter(data[position : position + size]) if inside else None)
    assert answers == expected


def test_matches_in_never_matches_a_value_that_is_not_utf8(scan_mode: str) -> None:
    good = encode_stored_message(MessageExt(topic="T", body=b""), b"price\x011\x02region\x01eu")
    bad = encode_stored_message(MessageExt(topic="T", body=b""), b"price\x011\x02region\x01e\xff")
    data = good + bad
    rows: list[Row] = [(0, len(good), 0), (len(good), len(bad), 0), (len(good), len(bad) - 3, 0)]
    record_filter = compile_filter("SQL92", "price < 50 AND region IS NOT NULL").stored_record_filter()
    assert record_filter.matches_in(data, 0, len(data), rows) == [True, False, False]
    assert [record_filter(good), record_filter(bad), record_filter(bad[:-3])] == [True, False, False]
