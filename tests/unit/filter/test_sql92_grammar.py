"""The SQL92 filter against a plain Python evaluation of the same expressions.

Method: Hypothesis builds random expression trees over a fixed set of properties (numeric
ones holding decimal integers, string ones holding short strings, any of them possibly
absent), renders each tree as SQL text (keywords in random case, redundant parentheses,
comments), and evaluates the same tree directly in Python with SQL's three-valued logic.
The compiled filter must agree with that evaluation on random property maps. A second
property: any text either compiles or raises FilterExpressionError, nothing else.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.errors import FilterExpressionError
from orbitmq.filter import compile_filter, compile_sql92
from orbitmq.protocol.properties import encode_properties

NUMERIC = ("n0", "n1", "price")
STRINGS = ("s0", "s1", "TAGS")
_ALPHABET = "ab'_ x"
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "=": operator.eq,
    "<>": operator.ne,
}


@dataclass(frozen=True)
class Expr:
    """One node: ``kind`` and its parts; ``sql`` renders it, ``value`` evaluates it."""

    kind: str
    parts: tuple[Any, ...]


def _word(draw: st.DrawFn, keyword: str) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c.lower() for c in keyword)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _number_literal(value: int | float) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value) if value >= 0 else f"-{-value}"


numbers = st.one_of(
    st.integers(-100, 100),
    st.integers(-(2**40), 2**40),
    st.floats(0.5, 150.0, allow_nan=False).map(lambda v: round(v, 2)),
)
short_strings = st.text(_ALPHABET, max_size=3)


@st.composite
def leaf(draw: st.DrawFn) -> Expr:
    choice = draw(st.integers(0, 6))
    if choice == 0:
        return Expr("cmp", (draw(st.sampled_from(NUMERIC)), draw(st.sampled_from(list(_OPS))), draw(numbers)))
    if choice == 1:
        return Expr(
            "str_eq",
            (draw(st.sampled_from(STRINGS)), draw(st.sampled_from(["=", "<>"])), draw(short_strings)),
        )
    if choice == 2:
        low, high = sorted(draw(st.lists(st.integers(-50, 50), min_size=2, max_size=2)))
        return Expr("between", (draw(st.sampled_from(NUMERIC)), low, high, draw(st.booleans())))
    if choice == 3:
        values = draw(st.lists(short_strings, min_size=1, max_size=4))
        return Expr("in", (draw(st.sampled_from(STRINGS)), tuple(values), draw(st.booleans())))
    if choice == 4:
        return Expr("null", (draw(st.sampled_from(NUMERIC + STRINGS)), draw(st.booleans())))
    if choice == 5:
        return Expr("bool", (draw(st.booleans()),))
    return Expr(
        "str_op",
        (
            draw(st.sampled_from(STRINGS)),
            draw(st.sampled_from(["CONTAINS", "STARTSWITH", "ENDSWITH"])),
            draw(short_strings),
            draw(st.booleans()),
        ),
    )


def _tree(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    return st.one_of(
        st.tuples(st.sampled_from(["and", "or"]), children, children).map(lambda t: Expr(t[0], (t[1], t[2]))),
        children.map(lambda child: Expr("not", (child,))),
    )


expressions = st.recursive(leaf(), _tree, max_leaves=8)


def render(draw: st.DrawFn, expr: Expr) -> str:
    kind, parts = expr.kind, expr.parts
    if kind == "cmp":
        return f"{parts[0]} {parts[1]} {_number_literal(parts[2])}"
    if kind == "str_eq":
        return f"{parts[0]} {parts[1]} {_quote(parts[2])}"
    if kind == "between":
        negation = _word(draw, "NOT") + " " if parts[3] else ""
        return f"{parts[0]} {negation}{_word(draw, 'BETWEEN')} {parts[1]} {_word(draw, 'AND')} {parts[2]}"
    if kind == "in":
        negation = _word(draw, "NOT") + " " if parts[2] else ""
        return f"{parts[0]} {negation}{_word(draw, 'IN')} ({', '.join(_quote(v) for v in parts[1])})"
    if kind == "null":
        return f"{parts[0]} {_word(draw, 'IS')} {_word(draw, 'NOT') + ' ' if parts[1] else ''}{_word(draw, 'NULL')}"
    if kind == "bool":
        return _word(draw, "TRUE" if parts[0] else "FALSE")
    if kind == "str_op":
        negation = _word(draw, "NOT") + " " if parts[3] else ""
        return f"{parts[0]} {negation}{_word(draw, parts[1])} {_quote(parts[2])}"
    if kind == "not":
        return f"{_word(draw, 'NOT')} ({render(draw, parts[0])})"
    left, right = render(draw, parts[0]), render(draw, parts[1])
    comment = " /* c */ " if draw(st.booleans()) else " "
    return f"({left}){comment}{_word(draw, kind.upper())} ({right})"


def evaluate(expr: Expr, props: dict[str, str]) -> bool | None:
    """Plain Python: SQL's three-valued logic, None for unknown."""
    kind, parts = expr.kind, expr.parts
    if kind == "cmp":
        raw = props.get(parts[0])
        return None if raw is None else _OPS[parts[1]](int(raw), parts[2])
    if kind == "str_eq":
        raw = props.get(parts[0])
        return None if raw is None else _OPS[parts[1]](raw, parts[2])
    if kind == "between":
        raw = props.get(parts[0])
        if raw is None:
            return None
        inside = parts[1] <= int(raw) <= parts[2]
        return not inside if parts[3] else inside
    if kind == "in":
        raw = props.get(parts[0])
        return None if raw is None else (raw in parts[1]) != parts[2]
    if kind == "null":
        present = props.get(parts[0]) is not None
        return present if parts[1] else not present
    if kind == "bool":
        return bool(parts[0])
    if kind == "str_op":
        raw = props.get(parts[0])
        if raw is None:
            return None
        test = {"CONTAINS": str.__contains__, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith}[
            parts[1]
        ]
        return test(raw, parts[2]) != parts[3]
    if kind == "not":
        inner = evaluate(parts[0], props)
        return None if inner is None else not inner
    left, right = evaluate(parts[0], props), evaluate(parts[1], props)
    if kind == "and":
        if left is False or right is False:
            return False
        return None if left is None or right is None else True
    if left is True or right is True:
        return True
    return None if left is None or right is None else False


properties = st.fixed_dictionaries(
    {},
    optional={
        **{name: st.integers(-(2**31), 2**31 - 1).map(str) for name in NUMERIC},
        **{name: short_strings for name in STRINGS},
    },
)


@settings(max_examples=400, deadline=None)
@given(st.data(), expressions, st.lists(properties, min_size=1, max_size=6))
def test_sql92_agrees_with_plain_python_evaluation(
    data: st.DataObject, expr: Expr, samples: list[dict[str, str]]
) -> None:
    text = render(data.draw, expr)
    compiled = compile_sql92(text)
    for props in samples:
        expected = evaluate(expr, props)
        assert compiled.evaluate(props) is expected, (text, props)
        # The broker's path reads the raw property string (noise properties around).
        raw = encode_properties({"UNIQ_KEY": "ABC", **props, "CLUSTER": "c"}).encode()
        assert compiled.evaluate_raw(raw) is expected, (text, props)
        # The memoized per-record matcher: the first call evaluates, the second remembers.
        assert compiled.raw_matcher()(raw) is (expected is True), (text, props)
        assert compiled.raw_matcher()(raw) is (expected is True), (text, props)
        assert compile_filter("sql92", text).matches_properties(props) is (expected is True)
        assert compile_filter("sql92", text).matches_property_bytes(raw) is (expected is True)


_PIECES = [*"ab01 ()'<>=!-+.,*/%$_\n", " AND ", " OR ", " NOT ", " IN ", " IS ", " NULL ", " BETWEEN ", "1.5"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=25).map("".join))
def test_sql92_any_text_compiles_or_raises_filter_expression_error(text: str) -> None:
    try:
        compiled = compile_sql92(text)
    except FilterExpressionError as exc:
        assert exc.line >= 1 and exc.column >= 1
        return
    compiled.matches({"a": "1", "b": "x"})
