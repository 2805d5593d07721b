"""Compiled filters: parse errors name their position, Java's conversion rules, the cache.

Method: known expressions with known answers, including the corners where RocketMQ's Java
evaluation differs from a naive one (Integer parsing of a property, null and NOT, TRUE = 'x').
"""

from __future__ import annotations

import pytest

from orbitmq.errors import FilterExpressionError
from orbitmq.filter import compile_filter, compiled_filter
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
