"""The pieces a compiled SQL92 expression is made of: nodes, readers and their builders (pure).

``orbitmq.filter.sql92`` parses; this module holds what it builds from the parse tree: a
:class:`Node` per sub-expression (a closure plus what Java's parse-time checks need to know),
the property reader (over a dict-like lookup), and the builders that implement each operator
with RocketMQ's semantics (see the sql92 docstring).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lark import Token, Tree

from orbitmq.errors import FilterExpressionError
from orbitmq.filter._java_values import (
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    JavaLong,
    compare,
    java_class,
    java_equals,
    parse_double,
    parse_int,
    parse_long,
)
from orbitmq.filter.properties import PropertyLookup

# What the closures read: a dict of properties, or anything with its ``get``.
Properties = PropertyLookup
Evaluator = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Node:
    """A compiled sub-expression and what Java's parse-time checks need to know about it.

    ``kind`` is ``constant`` (a literal; ``value`` holds it), ``property`` (``name``),
    ``boolean`` (a BooleanExpression that is not a literal) or ``value`` (a negation).
    ``boolean_constant`` marks TRUE, FALSE and NULL, which Java types as both.
    """

    kind: str
    evaluate: Evaluator
    line: int
    column: int
    value: Any = None
    name: str = ""
    boolean_constant: bool = False

    @property
    def is_boolean(self) -> bool:
        return self.kind == "boolean" or self.boolean_constant


# -- building ---------------------------------------------------------------------------------


def fail(node: Node | Token | Tree[Any], message: str) -> FilterExpressionError:
    if isinstance(node, Node):
        return FilterExpressionError(f"invalid SQL92 expression: {message}", node.line, node.column)
    if isinstance(node, Token):
        return FilterExpressionError(f"invalid SQL92 expression: {message}", node.line or 1, node.column or 1)
    meta = node.meta
    return FilterExpressionError(
        f"invalid SQL92 expression: {message}", getattr(meta, "line", 1), getattr(meta, "column", 1)
    )


def _constant(value: Any, token: Token, *, boolean: bool = False) -> Node:
    return Node(
        "constant", lambda _: value, token.line or 1, token.column or 1, value=value, boolean_constant=boolean
    )


def describe(node: Node) -> str:
    if node.kind == "property":
        return node.name
    if node.kind == "constant":
        value = node.value
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return str(value)
    return "the expression"


def as_boolean(node: Node) -> Node:
    """Java's ``asBooleanExpression``: booleans pass, a property is cast, anything else fails."""
    if node.is_boolean:
        return node
    if node.kind == "property":
        read = node.evaluate

        def cast(properties: Properties) -> bool | None:
            # A property is a String, never a Boolean: the cast answers FALSE when it is set.
            return None if read(properties) is None else False

        return Node("boolean", cast, node.line, node.column)
    raise fail(node, f"{describe(node)} will not result in a boolean value")


def lookup_reader(name: str) -> Evaluator:
    return lambda properties: properties.get(name)


def unquote(token: Token) -> str:
    return str(token)[1:-1].replace("''", "'")


# -- literals ---------------------------------------------------------------------------------


def _decimal(token: Token) -> Node:
    digits = str(token).rstrip("lL")
    value = int(digits)
    if value > LONG_MAX:
        raise fail(token, f"{token!s} is outside the range of a Java long")
    return _constant(value if INT_MIN <= value <= INT_MAX else JavaLong(value), token)


def _float(token: Token) -> Node:
    value = float(str(token))
    # Java's createFloat refuses what is below Double.MIN_VALUE, so 0.0 itself (a RocketMQ quirk).
    if value == float("inf"):
        raise fail(token, f"{token!s} is greater than the largest Java double")
    if value < 5e-324:
        raise fail(token, f"{token!s} is less than Double.MIN_VALUE (4.9E-324)")
    return _constant(value, token)


LITERALS: dict[str, Callable[[Token], Node]] = {
    "string": lambda token: _constant(unquote(token), token),
    "decimal": _decimal,
    "float": _float,
    "true": lambda token: _constant(True, token, boolean=True),
    "false": lambda token: _constant(False, token, boolean=True),
    "null": lambda token: _constant(None, token, boolean=True),
}


# -- node builders ----------------------------------------------------------------------------


def negation(operand: Node, where: Node | Token) -> Node:
    operand_eval = operand.evaluate

    def evaluate(properties: Properties) -> bool | None:
        value = operand_eval(properties)
        return None if value is None else not value

    line = where.line if isinstance(where, Node) else (where.line or 1)
    column = where.column if isinstance(where, Node) else (where.column or 1)
    return Node("boolean", evaluate, line, column)


def conjunction(left: Node, right: Node) -> Node:
    left_eval, right_eval = left.evaluate, right.evaluate

    def evaluate(properties: Properties) -> bool | None:
        lv = left_eval(properties)
        if lv is False:
            return False
        rv = right_eval(properties)
        if rv is False:
            return False
        return None if lv is None or rv is None else True

    return Node("boolean", evaluate, left.line, left.column)


def equal_values(left: Any, right: Any) -> bool | None:
    """Java's equality: null only equals null (a null left answers null), then equals/compare."""
    if left is None or right is None:
        if left is None and right is None:
            return True
        return None if left is None else False
    if java_equals(left, right):
        return True
    return compare(left, right) == 0


def equality(left: Node, right: Node) -> Node:
    for operand in (left, right):
        if operand.kind == "constant" and operand.value is None:
            raise fail(operand, "NULL cannot be compared with '='; use IS NULL")
    if (
        left.kind == "constant"
        and right.kind == "constant"
        and left.boolean_constant
        and not right.boolean_constant
    ):
        raise fail(left, f"{describe(left)} cannot be compared with {describe(right)}")
    if left.kind == "property" and right.kind == "constant":
        return _property_equals(left, right)
    left_eval, right_eval = left.evaluate, right.evaluate
    return Node(
        "boolean",
        lambda properties: equal_values(left_eval(properties), right_eval(properties)),
        left.line,
        left.column,
    )


_STRING_PARSERS: dict[str, Callable[[str], Any]] = {"I": parse_int, "L": parse_long, "D": parse_double}


def _property_equals(prop: Node, constant: Node) -> Node:
    """``property = constant``, specialised: no class dispatch per message."""
    read, value = prop.evaluate, constant.value
    value_class = java_class(value)
    evaluate: Evaluator
    if value_class == "S":

        def evaluate(properties: Properties) -> bool | None:
            text = read(properties)
            return None if text is None else text == value

    elif value_class == "B":

        def evaluate(properties: Properties) -> bool | None:
            text = read(properties)
            return None if text is None else (text.lower() == "true") == value

    else:
        parse = _STRING_PARSERS[value_class]

        def evaluate(properties: Properties) -> bool | None:
            text = read(properties)
            return None if text is None else compare(parse(text), value) == 0

    return Node("boolean", evaluate, prop.line, prop.column)


def _check_orderable(operand: Node) -> None:
    """Java's ``checkLessThanOperand``: literals must be numbers, and no boolean expressions."""
    if operand.kind == "constant":
        value = operand.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise fail(operand, f"value {describe(operand)} cannot be compared with '<', '>', '<=' or '>='")
    elif operand.is_boolean:
        raise fail(operand, "a boolean expression cannot be compared with '<', '>', '<=' or '>='")


def _ordered(left: Any, right: Any, test: Callable[[int, int], bool]) -> bool | None:
    if left is None or right is None:
        return None
    if isinstance(left, str) and isinstance(right, str):
        # Two strings (two properties) are compared as doubles, or not at all.
        return test(compare(parse_double(left), parse_double(right)), 0)
    return test(compare(left, right), 0)


def ordering(left: Node, right: Node, test: Callable[[int, int], bool]) -> Node:
    _check_orderable(left)
    _check_orderable(right)
    evaluate: Evaluator
    if left.kind == "property" and right.kind == "constant":
        read, value = left.evaluate, right.value
        value_class = java_class(value)
        parse = _STRING_PARSERS[value_class]
        if value_class == "D":

            def evaluate(properties: Properties) -> bool | None:
                text = read(properties)
                return None if text is None else test(compare(parse(text), value), 0)

        else:
            # Integer or Long on both sides: Java's compareTo is Python's ordering.
            def evaluate(properties: Properties) -> bool | None:
                text = read(properties)
                return None if text is None else test(parse(text), value)

    else:
        left_eval, right_eval = left.evaluate, right.evaluate

        def evaluate(properties: Properties) -> bool | None:
            return _ordered(left_eval(properties), right_eval(properties), test)

    return Node("boolean", evaluate, left.line, left.column)


def membership(operand: Node, tokens: list[Token], *, negated: bool) -> Node:
    if operand.kind != "property":
        raise fail(operand, f"IN needs a property on its left, not {describe(operand)}")
    read = operand.evaluate
    values = frozenset(unquote(token) for token in tokens)

    def evaluate(properties: Properties) -> bool | None:
        text = read(properties)
        return None if text is None else (text in values) != negated

    return Node("boolean", evaluate, operand.line, operand.column)


def substring(operand: Node, needle: str, test: Callable[[str, str], bool], negated: bool) -> Node:
    operand_eval = operand.evaluate

    def evaluate(properties: Properties) -> bool | None:
        value = operand_eval(properties)
        if value is None:
            return None
        if not isinstance(value, str):
            return False
        return test(value, needle) != negated

    return Node("boolean", evaluate, operand.line, operand.column)
