"""The message property string (remoting-protocol §3.3).

Method: the Java form (no trailing separator), the C++ form (trailing 0x02), lenient
skipping of malformed items, Hypothesis round-trips, arbitrary bytes.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.errors import LocalProtocolError, RemoteProtocolError
from orbitmq.protocol.properties import (
    decode_properties,
    decode_properties_bytes,
    decode_properties_canonical,
    encode_properties,
)

_settings = settings(max_examples=80, deadline=None)


def test_properties_encode_writes_java_form() -> None:
    assert encode_properties({"TAGS": "a", "KEYS": "k1 k2"}) == "TAGS\x01a\x02KEYS\x01k1 k2"
    assert encode_properties({}) == ""


def test_properties_decode_accepts_cpp_trailing_separator() -> None:
    assert decode_properties("UNIQ_KEY\x01X\x02WAIT\x01true\x02") == {"UNIQ_KEY": "X", "WAIT": "true"}


def test_properties_decode_skips_empty_and_separatorless_items() -> None:
    assert decode_properties("\x02\x02A\x011\x02junk\x02B\x01\x02") == {"A": "1", "B": ""}


def test_properties_decode_splits_at_first_name_value_separator() -> None:
    assert decode_properties("A\x01x\x01y") == {"A": "x\x01y"}


def test_properties_decode_empty_text() -> None:
    assert decode_properties("") == {}


@pytest.mark.parametrize("bad", [{"A\x01": "v"}, {"A": "v\x02"}, {"A\x02": "v"}, {"A": "\x01"}])
def test_properties_encode_refuses_separators(bad: dict[str, str]) -> None:
    with pytest.raises(LocalProtocolError):
        encode_properties(bad)


def test_properties_bytes_rejects_invalid_utf8() -> None:
    with pytest.raises(RemoteProtocolError, match="UTF-8"):
        decode_properties_bytes(b"A\x01\xff")


def test_properties_bytes_decodes_memoryview() -> None:
    assert decode_properties_bytes(memoryview("K\x01ü".encode())) == {"K": "ü"}


_safe = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), max_size=10
)


@_settings
@given(properties=st.dictionaries(_safe.filter(bool), _safe, max_size=6), trailing=st.booleans())
def test_properties_roundtrip(properties: dict[str, str], trailing: bool) -> None:
    text = encode_properties(properties) + ("\x02" if trailing and properties else "")
    assert decode_properties(text) == properties
    assert decode_properties_bytes(text.encode()) == properties


@_settings
@given(data=st.binary(max_size=60))
def test_properties_arbitrary_bytes_raise_only_remote_protocol_error(data: bytes) -> None:
    try:
        properties = decode_properties_bytes(data)
    except RemoteProtocolError:
        return
    assert all("\x02" not in key and "\x01" not in key for key in properties)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab\x01\x02", max_size=30))
def test_properties_canonical_decode_agrees_and_flags_exact_reencodings(text: str) -> None:
    properties, canonical = decode_properties_canonical(text)
    assert properties == decode_properties(text)
    try:
        reencoded: str | None = encode_properties(properties)
    except LocalProtocolError:
        reencoded = None
    # Canonical exactly when encoding the mapping gives back the text (one trailing 0x02 aside).
    assert canonical == (reencoded == text.removesuffix("\x02"))


def test_properties_canonical_decode_refuses_repeats_and_extra_separators() -> None:
    assert decode_properties_canonical("K\x01a\x02K\x01b") == ({"K": "b"}, False)
    assert decode_properties_canonical("K\x01a\x01b") == ({"K": "a\x01b"}, False)
    assert decode_properties_canonical("K\x01a\x02\x02") == ({"K": "a"}, False)
    assert decode_properties_canonical("K\x01a\x02") == ({"K": "a"}, True)
    assert decode_properties_canonical("") == ({}, True)
