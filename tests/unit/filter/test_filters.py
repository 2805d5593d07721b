"""Compiled filters: parse errors name their position, Java's conversion rules, the caches.

Method: known expressions with known answers, including the corners where RocketMQ's Java
evaluation differs from a naive one (Integer parsing of a property, null and NOT, TRUE = 'x').
"""

from __future__ import annotations

import pytest

from orbitmq.errors import FilterExpressionError
from orbitmq.filter import compile_filter, compile_sql92, compiled_filter
from orbitmq.filter.properties import MEMO_MAX_ENTRIES, MEMO_MAX_KEY_BYTES, memoized_matcher
from orbitmq.protocol.properties import encode_properties
from orbitmq.protocol.tags import java_string_hash


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("a >", 1, 4, "ends too early"),
        ("a > 'x'", 1, 5, "cannot be compared"),
        ("a = NULL", 1, 5, "IS NULL"),
        ("a = 1 AND\n  b ! 2", 2, 5, "unexpected character '!'"),
        ("a BETWEEN 5 AND 1", 1, 11, "greater than its high bound"),
        ("'x' IN ('a')", 1, 1, "needs a property"),
        ("42", 1, 1, "boolean value"),
        ("a = 1 b", 1, 7, "unexpected"),
    ],
)
def test_sql92_parse_error_names_position(text: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(FilterExpressionError) as caught:
        compile_filter("SQL92", text)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert fragment in str(caught.value)
    assert f"line {line}, column {column}" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "properties", "matches"),
    [
        # A property compared with an Integer literal is parsed with Integer.valueOf.
        ("a > 5", {"a": "6"}, True),
        ("a > 5", {"a": "5.5"}, False),
        ("a > 5.0", {"a": "5.5"}, True),
        ("a = 5", {"a": "+5"}, True),
        ("a > 5", {"a": "3000000000"}, False),  # outside int: an error, so no match
        ("a > 5L", {"a": "3000000000"}, False),  # 5L fits an int, so it is an Integer too
        ("a > 2147483648", {"a": "3000000000"}, True),
        # An evaluation error anywhere fails the whole message, even under OR.
        ("a = 1 OR b = 2", {"a": "x", "b": "2"}, False),
        # Null: comparisons are unknown, NOT unknown is unknown, IS NULL is known.
        ("NOT (a > 1)", {}, False),
        ("a IS NULL AND NOT (b IS NULL)", {"b": ""}, True),
        ("a <> 'x'", {}, False),
        # A property used as a boolean is FALSE when set, unknown when absent.
        ("NOT a", {"a": "true"}, True),
        ("a", {"a": "true"}, False),
        ("a = TRUE", {"a": "True"}, True),
        ("TAGS IN ('x', 'y') AND region STARTSWITH 'eu'", {"TAGS": "y", "region": "eu-1"}, True),
        ("a > b", {"a": "2", "b": "1.5"}, True),  # two properties compare as doubles
        ("a BETWEEN -2 AND 2", {"a": "-2"}, True),
        ("a NOT IN ('x')", {}, False),
    ],
)
def test_sql92_java_evaluation_rules(text: str, properties: dict[str, str], matches: bool) -> None:
    assert compile_filter("SQL92", text).matches_properties(properties) is matches


def test_compiled_filter_compiles_each_expression_once() -> None:
    first = compiled_filter("SQL92", "k = 'v'")
    assert compiled_filter("SQL92", "k = 'v'") is first
    assert compiled_filter("SQL92", "k = 'w'") is not first


def test_tag_filter_decides_on_tags_code() -> None:
    message_filter = compile_filter(None, "a || b")
    assert not message_filter.needs_properties and not message_filter.matches_all
    assert message_filter.matches_tags_code(java_string_hash("a"))
    assert not message_filter.matches_tags_code(java_string_hash("c"))
    assert compile_filter("TAG", "*").matches_all


def test_unknown_expression_type_is_refused() -> None:
    with pytest.raises(FilterExpressionError, match="not supported"):
        compile_filter("JAVASCRIPT", "true")


def test_memoized_matcher_decides_once_per_value_tuple_and_stays_bounded() -> None:
    calls: list[dict[str, str]] = []

    def decide(values: dict[str, str]) -> bool:
        calls.append(values)
        return values.get("price") == "5"

    matches = memoized_matcher(("price", "region"), decide)
    records = [
        encode_properties({"UNIQ_KEY": f"K{index}", "price": str(index % 2 * 5), "region": "eu"}).encode()
        for index in range(10)
    ]
    assert [matches(record) for record in records] == [index % 2 == 1 for index in range(10)]
    assert calls == [{"price": "0", "region": "eu"}, {"price": "5", "region": "eu"}]
    # An absent property is part of the key (None), a later duplicate wins as in Java's HashMap.
    assert matches(b"region\x01eu") is False and calls[-1] == {"region": "eu"}
    assert matches(b"price\x011\x02price\x015") is True and calls[-1] == {"price": "5"}
    # A value that is not UTF-8 never matches and never reaches the expression.
    before = len(calls)
    assert matches(b"price\x01\xff") is False and len(calls) == before
    # Long values are evaluated every time rather than remembered; the memo starts over when full.
    long_value = b"price\x01" + b"9" * (MEMO_MAX_KEY_BYTES + 1)
    matches(long_value)
    matches(long_value)
    assert len(calls) == before + 2
    for index in range(MEMO_MAX_ENTRIES + 10):
        matches(b"price\x01x" + str(index).encode())
    before = len(calls)
    matches(records[0])
    assert len(calls) == before + 1  # forgotten when the memo started over


def test_sql92_raw_matcher_reads_only_named_properties() -> None:
    compiled = compile_sql92("price > 5 AND TAGS IN ('a') OR region IS NULL")
    assert compiled.property_names == ("price", "TAGS", "region")
    raw = encode_properties({"price": "7", "TAGS": "a", "region": "eu", "KEYS": "k"}).encode()
    assert compiled.raw_matcher()(raw) is True and compiled.matches_raw(raw) is True
    assert compiled.raw_matcher()(raw.replace(b"price\x017", b"price\x015")) is False
