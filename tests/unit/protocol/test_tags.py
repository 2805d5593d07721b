"""Tag hash codes and TAG subscription expressions.

Method: hash values computed by Java's ``String.hashCode()`` (known constants, including
overflow and non-BMP characters), then expression parsing and matching.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.protocol.tags import (
    SUB_ALL,
    TagFilter,
    java_string_hash,
    java_string_hash_concat,
    java_string_hash_unsigned,
    tags_code,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("tagA", 3552231),
        ("TagA", 2598919),
        ("hello world", 1794106052),
        ("polygenelubricants", -2147483648),
        ("\U0001f600", 1772899),  # a surrogate pair: two UTF-16 code units
    ],
)
def test_java_string_hash_matches_java(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_tags_code_is_zero_without_tags() -> None:
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("tagA") == 3552231


@settings(max_examples=80, deadline=None)
@given(text=st.text(max_size=30))
def test_java_string_hash_is_signed_32_bit_and_matches_reference(text: str) -> None:
    units = text.encode("utf-16-be")
    value = 0
    for index in range(0, len(units), 2):
        value = (value * 31 + int.from_bytes(units[index : index + 2], "big")) % (1 << 32)
    expected = value - (1 << 32) if value >= 1 << 31 else value
    assert java_string_hash(text) == expected


@pytest.mark.parametrize("expression", [None, "", "  ", "*", " * ", "||", " || "])
def test_tag_filter_match_all_forms(expression: str | None) -> None:
    tag_filter = TagFilter.parse(expression)
    assert tag_filter.matches_all
    assert tag_filter.expression == SUB_ALL
    assert tag_filter.matches_tag(None)
    assert tag_filter.matches_code(12345)


def test_tag_filter_parses_or_list_with_spaces() -> None:
    tag_filter = TagFilter.parse(" tagA || tagB ||  ")
    assert tag_filter.tags == {"tagA", "tagB"}
    assert tag_filter.codes == {java_string_hash("tagA"), java_string_hash("tagB")}
    assert tag_filter.matches_tag("tagA")
    assert not tag_filter.matches_tag("tagC")
    assert not tag_filter.matches_tag(None)
    assert tag_filter.matches_code(java_string_hash("tagB"))
    assert not tag_filter.matches_code(0)


def _reference_hash(text: str) -> int:
    """Java's loop, h = 31*h + unit over UTF-16 code units, wrapped to a signed 32-bit int."""
    units = text.encode("utf-16-be")
    value = 0
    for index in range(0, len(units), 2):
        value = (value * 31 + int.from_bytes(units[index : index + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


@settings(max_examples=120, deadline=None)
@given(prefix=st.text(max_size=20), suffix=st.text(max_size=60))
def test_java_string_hash_concat_matches_reference_loop(prefix: str, suffix: str) -> None:
    assert java_string_hash_concat(java_string_hash_unsigned(prefix), suffix) == _reference_hash(
        prefix + suffix
    )
    assert java_string_hash_unsigned(prefix) == _reference_hash(prefix) & 0xFFFFFFFF


@pytest.mark.parametrize("length", [0, 1, 31, 32, 4096, 4097, 10_000])
def test_java_string_hash_long_text_matches_reference_loop(length: int) -> None:
    text = "".join(chr(33 + index % 90) for index in range(length))
    assert java_string_hash(text) == _reference_hash(text)
    assert java_string_hash(text + "\u00e9") == _reference_hash(text + "\u00e9")
