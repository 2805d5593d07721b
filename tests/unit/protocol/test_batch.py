"""Batch bodies: several producer messages in one SEND_MESSAGE/SEND_BATCH_MESSAGE body.

Method: hand-assembled records (including the C++ client's trailing 0x02), truncation at
every byte, trailing garbage, Hypothesis round-trips and arbitrary bytes. Every test runs twice:
with the compiled scan of plain batches (``_batch_scan.c``) and with the pure-Python path.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq import native
from orbitmq.errors import LocalProtocolError, RemoteProtocolError
from orbitmq.protocol import batch as batch_module
from orbitmq.protocol.batch import (
    BatchItem,
    decode_batch,
    decode_batch_columns,
    encode_batch,
    encode_batch_item,
)
from orbitmq.protocol.properties import decode_properties, encode_properties
from tests.support.batch_records import batch_record
from tests.support.native_modes import MODES, use_mode

_settings = settings(max_examples=80, deadline=None)
_compiled = native.load("orbitmq.protocol._batch_scan")


@pytest.fixture(autouse=True, scope="module", params=MODES)
def scan_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the module's tests with the compiled scan of plain batches, then without it."""
    compiled = _compiled.scan_plain_batch if _compiled is not None else None
    yield from use_mode(request, batch_module, "_native_scan", compiled, None, "batch scan")


CPP_BATCH = batch_record(0, b"one", b"UNIQ_KEY\x01A1\x02WAIT\x01true\x02") + batch_record(
    7, b"", b"UNIQ_KEY\x01A2\x02"
)


def test_batch_decodes_cpp_records_with_trailing_separator() -> None:
    assert decode_batch(CPP_BATCH) == [
        BatchItem(0, b"one", {"UNIQ_KEY": "A1", "WAIT": "true"}),
        BatchItem(7, b"", {"UNIQ_KEY": "A2"}),
    ]


def test_batch_encode_matches_hand_layout_without_trailing_separator() -> None:
    assert encode_batch([(3, b"abc", {"K": "v", "W": "x"})]) == batch_record(3, b"abc", b"K\x01v\x02W\x01x")


def test_batch_empty_body_is_empty_list() -> None:
    assert decode_batch(b"") == []


def test_batch_accepts_memoryview() -> None:
    assert len(decode_batch(memoryview(CPP_BATCH))) == 2


@pytest.mark.parametrize("cut", range(1, len(CPP_BATCH)))
def test_batch_truncated_body_raises_naming_index(cut: int) -> None:
    first_len = struct.unpack_from(">i", CPP_BATCH)[0]
    index = 0 if cut < first_len else 1
    if cut == first_len:
        assert len(decode_batch(CPP_BATCH[:cut])) == 1
        return
    with pytest.raises(RemoteProtocolError, match=f"#{index}"):
        decode_batch(CPP_BATCH[:cut])


def test_batch_trailing_garbage_raises_naming_next_index() -> None:
    with pytest.raises(RemoteProtocolError, match="#2"):
        decode_batch(CPP_BATCH + b"\x00\x01")


def test_batch_inconsistent_total_size_raises() -> None:
    bad = bytearray(batch_record(0, b"x", b""))
    struct.pack_into(">i", bad, 0, 99)
    with pytest.raises(RemoteProtocolError, match="#0.*total size 99"):
        decode_batch(bytes(bad))


def test_batch_negative_lengths_raise() -> None:
    negative_body = struct.pack(">iiiii", 22, 0, 0, 0, -1) + b"\x00\x00"
    with pytest.raises(RemoteProtocolError, match="body length -1"):
        decode_batch(negative_body)
    negative_properties = struct.pack(">iiiii", 22, 0, 0, 0, 0) + struct.pack(">h", -2)
    with pytest.raises(RemoteProtocolError, match="properties length -2"):
        decode_batch(negative_properties)


def test_batch_non_utf8_properties_raise_naming_index() -> None:
    with pytest.raises(RemoteProtocolError, match="#1"):
        decode_batch(batch_record(0, b"", b"") + batch_record(0, b"", b"\xff\xfe"))


def test_batch_encode_refuses_oversized_properties() -> None:
    with pytest.raises(LocalProtocolError, match="32767"):
        encode_batch_item(0, b"", {"K": "v" * 40000})


def test_batch_encode_refuses_out_of_range_flag() -> None:
    with pytest.raises(LocalProtocolError, match="flag"):
        encode_batch_item(1 << 40, b"", {})


_prop_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), max_size=8
)
_items = st.lists(
    st.builds(
        BatchItem,
        flag=st.integers(-(2**31), 2**31 - 1),
        body=st.binary(max_size=40),
        properties=st.dictionaries(_prop_text.filter(bool), _prop_text, max_size=4),
    ),
    max_size=5,
)


@_settings
@given(items=_items)
def test_batch_roundtrips(items: list[BatchItem]) -> None:
    assert decode_batch(encode_batch(items)) == items


@_settings
@given(data=st.binary(max_size=150))
def test_batch_arbitrary_bytes_raise_only_remote_protocol_error(data: bytes) -> None:
    try:
        items = decode_batch(data)
    except RemoteProtocolError:
        return
    assert sum(22 + len(item.body) for item in items) <= len(data)


# -- decode_batch_columns: the property bytes the broker stores without re-encoding ---------------

# Property strings built from separators and a few letters, so that empty items, repeated keys,
# items without or with two name/value separators and trailing separators all come up often.
_property_text = st.text(alphabet="ab\x01\x02", max_size=24)


@_settings
@given(
    st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=16), _property_text), max_size=5)
)
def test_batch_columns_match_decode_and_canonical_bytes_reencode(
    records: list[tuple[int, bytes, str]],
) -> None:
    body = b"".join(batch_record(flag, data, text.encode()) for flag, data, text in records)
    columns = decode_batch_columns(body)
    assert [
        BatchItem(*item) for item in zip(columns.flags, columns.bodies, columns.property_maps(), strict=True)
    ] == decode_batch(body)
    assert len(columns.encoded) == len(records)
    maps = columns.property_maps()
    assert (columns.unique_keys, columns.tags, columns.keys) == tuple(
        [properties.get(key) for properties in maps] for key in ("UNIQ_KEY", "TAGS", "KEYS")
    )
    for (_, _, text), properties, encoded in zip(records, maps, columns.encoded, strict=True):
        assert properties == decode_properties(text)
        try:
            reencoded: bytes | None = encode_properties(properties).encode()
        except LocalProtocolError:
            reencoded = None
        if encoded is not None:
            # Canonical: exactly the bytes the store would have encoded from the mapping.
            assert encoded == reencoded
        else:
            # Not canonical: storing the wire bytes would differ from the encoded mapping.
            assert reencoded != text.removesuffix("\x02").encode()


def test_batch_columns_drop_the_cpp_trailing_separator_from_the_bytes() -> None:
    columns = decode_batch_columns(CPP_BATCH)
    assert columns.encoded == [b"UNIQ_KEY\x01A1\x02WAIT\x01true", b"UNIQ_KEY\x01A2"]
    assert columns.flags == [0, 7] and columns.bodies == [b"one", b""]


def test_batch_columns_give_no_bytes_for_repeated_or_empty_items() -> None:
    body = batch_record(0, b"x", b"K\x01a\x02K\x01b") + batch_record(0, b"y", b"K\x01a\x02\x02L\x01b")
    body += batch_record(0, b"z", b"K\x01a\x01b") + batch_record(0, b"w", b"")
    columns = decode_batch_columns(body)
    assert columns.encoded == [None, None, None, b""]
    assert columns.property_maps()[0] == {"K": "b"}
