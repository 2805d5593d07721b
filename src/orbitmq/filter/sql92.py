"""RocketMQ's SQL92 property filter: parse with lark, compile to closures, evaluate (pure).

Grammar (RocketMQ's ``SelectorParser.jj``, itself ActiveMQ's JMS selector without LIKE,
arithmetic, hex and octal literals), lowest precedence first; keywords are case-insensitive::

    or_expr   := and_expr (OR and_expr)*
    and_expr  := eq_expr (AND eq_expr)*
    eq_expr   := cmp_expr ( "=" cmp_expr | "<>" cmp_expr | IS NULL | IS NOT NULL )*
    cmp_expr  := unary ( (">" | ">=" | "<" | "<=") unary
                       | [NOT] BETWEEN unary AND unary
                       | [NOT] IN "(" string ("," string)* ")"
                       | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string )*
    unary     := "+" unary | "-" unary | NOT unary | literal | identifier | "(" or_expr ")"
    literal   := 'string' ('' escapes a quote) | decimal [L] | float | TRUE | FALSE | NULL
    identifier:= [a-zA-Z_$][a-zA-Z0-9_$]*   (a message property; TAGS is the tag)

Evaluation is three-valued as in Java: a missing property is null, a comparison with null is
null, ``NOT null`` is null, ``AND``/``OR`` follow SQL's tables, and only a final TRUE matches.
Values convert as ``orbitmq.filter._java_values`` describes; a conversion that fails in Java
(``a > 5`` where ``a`` is ``"x"``) makes the message not match. The parse-time checks Java
makes are made here too, each reported with the position of the offending expression:
``>``-style operands must be numbers or properties, NULL cannot be compared with ``=``, a
BETWEEN of constants needs low <= high, IN needs a property on its left, and the whole
expression must be boolean.

A compiled expression is a tree of closures built once; evaluating it is a few Python calls
per node. The common shape ``property OP constant`` gets a specialised closure.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput

from orbitmq.errors import FilterExpressionError
from orbitmq.filter._java_values import (
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    EvaluationError,
    JavaLong,
    compare,
    java_class,
    java_equals,
    negate,
    parse_double,
    parse_int,
    parse_long,
)
from orbitmq.filter.properties import PropertyLookup

__all__ = ["Sql92Expression", "compile_sql92"]

# What the closures read: a PropertyLookup, or in raw mode the raw property string (bytes).
Properties = PropertyLookup | bytes
Evaluator = Callable[[Any], Any]

_GRAMMAR = r"""
?start: or_expr
?or_expr: and_expr | or_expr OR and_expr -> or_
?and_expr: eq_expr | and_expr AND eq_expr -> and_
?eq_expr: cmp_expr
    | eq_expr "=" cmp_expr -> eq
    | eq_expr "<>" cmp_expr -> ne
    | eq_expr IS NULL -> is_null
    | eq_expr IS NOT NULL -> is_not_null
?cmp_expr: unary
    | cmp_expr ">" unary -> gt
    | cmp_expr ">=" unary -> ge
    | cmp_expr "<" unary -> lt
    | cmp_expr "<=" unary -> le
    | cmp_expr BETWEEN unary AND unary -> between
    | cmp_expr NOT BETWEEN unary AND unary -> not_between
    | cmp_expr IN "(" STRING ("," STRING)* ")" -> in_
    | cmp_expr NOT IN "(" STRING ("," STRING)* ")" -> not_in
    | cmp_expr CONTAINS STRING -> contains
    | cmp_expr NOT CONTAINS STRING -> not_contains
    | cmp_expr STARTSWITH STRING -> startswith
    | cmp_expr NOT STARTSWITH STRING -> not_startswith
    | cmp_expr ENDSWITH STRING -> endswith
    | cmp_expr NOT ENDSWITH STRING -> not_endswith
?unary: primary
    | "+" unary
    | "-" unary -> neg
    | NOT unary -> not_
?primary: STRING -> string
    | DECIMAL -> decimal
    | FLOAT -> float
    | TRUE -> true
    | FALSE -> false
    | NULL -> null
    | ID -> property
    | "(" or_expr ")"

NOT: "NOT"i
AND: "AND"i
OR: "OR"i
BETWEEN: "BETWEEN"i
IN: "IN"i
IS: "IS"i
TRUE: "TRUE"i
FALSE: "FALSE"i
NULL: "NULL"i
CONTAINS: "CONTAINS"i
STARTSWITH: "STARTSWITH"i
ENDSWITH: "ENDSWITH"i
ID: /[a-z_$][a-z0-9_$]*/i
FLOAT.2: /[0-9]+\.[0-9]*(e[+-]?[0-9]+)?|\.[0-9]+(e[+-]?[0-9]+)?|[0-9]+e[+-]?[0-9]+/i
DECIMAL: /(0|[1-9][0-9]*)l?/i
STRING: /'(''|[^'])*'/
LINE_COMMENT: /--[^\n\r]*/
BLOCK_COMMENT: /\/\*(.|\n|\r)*?\*\//
%ignore /[ \t\n\r\f]+/
%ignore LINE_COMMENT
%ignore BLOCK_COMMENT
"""

_PARSER = Lark(_GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=False)


@dataclass(frozen=True, slots=True)
class _Node:
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


@dataclass(frozen=True, slots=True)
class Sql92Expression:
    """A compiled SQL92 expression.

    ``evaluate(properties)`` gives Java's three-valued answer; :meth:`matches` is what the
    broker asks: True only for TRUE, False for FALSE, null or an evaluation error.
    ``evaluate_raw`` and :meth:`matches_raw` take the raw property string instead.
    """

    text: str
    evaluate: Evaluator
    evaluate_raw: Callable[[bytes], Any]

    def matches(self, properties: Properties) -> bool:
        try:
            return self.evaluate(properties) is True
        except EvaluationError:
            return False

    def matches_raw(self, property_bytes: bytes) -> bool:
        try:
            return self.evaluate_raw(property_bytes) is True
        except (EvaluationError, UnicodeDecodeError):
            return False


def compile_sql92(text: str) -> Sql92Expression:
    """Parse and compile ``text``.

    Raises:
        FilterExpressionError: a syntax error or a failed parse-time check; ``line`` and
            ``column`` point at it.
    """
    if not text or not text.strip():
        raise FilterExpressionError("the SQL92 expression is empty", 1, 1)
    try:
        tree = _PARSER.parse(text)
    except UnexpectedCharacters as exc:
        raise FilterExpressionError(
            f"invalid SQL92 expression: unexpected character {text[exc.pos_in_stream or 0]!r}",
            exc.line,
            exc.column,
        ) from None
    except UnexpectedEOF as exc:
        line, column = _end_position(text)
        raise FilterExpressionError("invalid SQL92 expression: it ends too early", line, column) from exc
    except UnexpectedInput as exc:
        token = getattr(exc, "token", None)
        if token is not None and token.type == "$END":
            line, column = _end_position(text)
            raise FilterExpressionError("invalid SQL92 expression: it ends too early", line, column) from None
        found = f"{str(token)!r}" if token is not None else "input"
        raise FilterExpressionError(
            f"invalid SQL92 expression: unexpected {found}", exc.line, exc.column
        ) from None
    except LarkError as exc:  # pragma: no cover - lark's other errors are grammar bugs
        raise FilterExpressionError(f"invalid SQL92 expression: {exc}", 1, 1) from None
    root = _as_boolean(_Compiler(raw=False).build(tree))
    raw_root = _as_boolean(_Compiler(raw=True).build(tree))
    return Sql92Expression(text, root.evaluate, raw_root.evaluate)


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


# -- building ---------------------------------------------------------------------------------


def _fail(node: _Node | Token | Tree[Any], message: str) -> FilterExpressionError:
    if isinstance(node, _Node):
        return FilterExpressionError(f"invalid SQL92 expression: {message}", node.line, node.column)
    if isinstance(node, Token):
        return FilterExpressionError(f"invalid SQL92 expression: {message}", node.line or 1, node.column or 1)
    meta = node.meta
    return FilterExpressionError(
        f"invalid SQL92 expression: {message}", getattr(meta, "line", 1), getattr(meta, "column", 1)
    )


def _constant(value: Any, token: Token, *, boolean: bool = False) -> _Node:
    return _Node(
        "constant", lambda _: value, token.line or 1, token.column or 1, value=value, boolean_constant=boolean
    )


def _describe(node: _Node) -> str:
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


def _as_boolean(node: _Node) -> _Node:
    """Java's ``asBooleanExpression``: booleans pass, a property is cast, anything else fails."""
    if node.is_boolean:
        return node
    if node.kind == "property":
        read = node.evaluate

        def cast(properties: Properties) -> bool | None:
            # A property is a String, never a Boolean: the cast answers FALSE when it is set.
            return None if read(properties) is None else False

        return _Node("boolean", cast, node.line, node.column)
    raise _fail(node, f"{_describe(node)} will not result in a boolean value")


def _lookup_reader(name: str) -> Evaluator:
    return lambda properties: properties.get(name)


def _raw_reader(name: str) -> Evaluator:
    """A reader of ``name`` in a raw property string (see ``orbitmq.filter.properties``)."""
    head = name.encode("utf-8") + b"\x01"
    inner = b"\x02" + head
    head_len, inner_len = len(head), len(inner)

    def read(data: bytes) -> str | None:
        index = data.rfind(inner)
        if index >= 0:
            start = index + inner_len
        elif data.startswith(head):
            start = head_len
        else:
            return None
        end = data.find(b"\x02", start)
        return (data[start:end] if end >= 0 else data[start:]).decode("utf-8")

    return read


def _unquote(token: Token) -> str:
    return str(token)[1:-1].replace("''", "'")


class _Compiler:
    """Turns the lark tree into :class:`_Node` closures, running Java's parse-time checks.

    With ``raw`` the closures take the raw property string (bytes) instead of a lookup: each
    property node searches the bytes itself, which saves a method call per property read on
    the broker's pull path.
    """

    def __init__(self, *, raw: bool) -> None:
        self.raw = raw

    def build(self, tree: Tree[Any] | Token) -> _Node:
        if isinstance(tree, Token):  # pragma: no cover - every terminal is wrapped in a rule
            raise _fail(tree, f"unexpected {tree!s}")
        data = str(tree.data)
        children: list[Any] = tree.children
        if data in _LITERALS:
            return _LITERALS[data](children[0])
        if data == "property":
            token: Token = children[0]
            name = str(token)
            reader = _raw_reader(name) if self.raw else _lookup_reader(name)
            return _Node("property", reader, token.line or 1, token.column or 1, name=name)
        if data == "unary":  # unary plus: the operand itself
            return self.build(children[-1])
        method = getattr(self, f"_{data}", None)
        if method is None:  # pragma: no cover - the grammar names no other rule
            raise _fail(tree, f"unsupported construct {data}")
        node: _Node = method(tree, children)
        return node

    # -- logic --------------------------------------------------------------------------------

    def _or_(self, tree: Tree[Any], children: list[Any]) -> _Node:
        left, right = _as_boolean(self.build(children[0])), _as_boolean(self.build(children[2]))
        left_eval, right_eval = left.evaluate, right.evaluate

        def evaluate(properties: Properties) -> bool | None:
            lv = left_eval(properties)
            if lv is True:
                return True
            rv = right_eval(properties)
            if rv is True:
                return True
            return None if lv is None or rv is None else False

        return _Node("boolean", evaluate, left.line, left.column)

    def _and_(self, tree: Tree[Any], children: list[Any]) -> _Node:
        left, right = _as_boolean(self.build(children[0])), _as_boolean(self.build(children[2]))
        left_eval, right_eval = left.evaluate, right.evaluate

        def evaluate(properties: Properties) -> bool | None:
            lv = left_eval(properties)
            if lv is False:
                return False
            rv = right_eval(properties)
            if rv is False:
                return False
            return None if lv is None or rv is None else True

        return _Node("boolean", evaluate, left.line, left.column)

    def _not_(self, tree: Tree[Any], children: list[Any]) -> _Node:
        operand = _as_boolean(self.build(children[-1]))
        return _negated(operand, children[0])

    def _neg(self, tree: Tree[Any], children: list[Any]) -> _Node:
        operand = self.build(children[-1])
        operand_eval = operand.evaluate

        def evaluate(properties: Properties) -> Any:
            value = operand_eval(properties)
            if value is None or isinstance(value, bool | str):
                return None
            return negate(value)

        return _Node("value", evaluate, operand.line, max(operand.column - 1, 1))

    # -- equality -----------------------------------------------------------------------------

    def _eq(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _equality(self.build(children[0]), self.build(children[1]))

    def _ne(self, tree: Tree[Any], children: list[Any]) -> _Node:
        left = self.build(children[0])
        return _negated(_equality(left, self.build(children[1])), left)

    def _is_null(self, tree: Tree[Any], children: list[Any]) -> _Node:
        operand = self.build(children[0])
        if operand.kind == "property":
            read = operand.evaluate
            return _Node("boolean", lambda properties: read(properties) is None, operand.line, operand.column)
        operand_eval = operand.evaluate

        def evaluate(properties: Properties) -> bool:
            return _equal_values(operand_eval(properties), None) is True

        return _Node("boolean", evaluate, operand.line, operand.column)

    def _is_not_null(self, tree: Tree[Any], children: list[Any]) -> _Node:
        operand = self.build(children[0])
        if operand.kind == "property":
            read = operand.evaluate
            return _Node(
                "boolean", lambda properties: read(properties) is not None, operand.line, operand.column
            )
        operand_eval = operand.evaluate

        def evaluate(properties: Properties) -> bool | None:
            answer = _equal_values(operand_eval(properties), None)
            return None if answer is None else not answer

        return _Node("boolean", evaluate, operand.line, operand.column)

    # -- ordering -----------------------------------------------------------------------------

    def _gt(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _ordering(self.build(children[0]), self.build(children[1]), operator.gt)

    def _ge(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _ordering(self.build(children[0]), self.build(children[1]), operator.ge)

    def _lt(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _ordering(self.build(children[0]), self.build(children[1]), operator.lt)

    def _le(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _ordering(self.build(children[0]), self.build(children[1]), operator.le)

    def _between(self, tree: Tree[Any], children: list[Any]) -> _Node:
        value, low, high = self.build(children[0]), self.build(children[2]), self.build(children[4])
        if low.kind == "constant" and high.kind == "constant":
            if low.value is None or high.value is None:
                raise _fail(low, "the bounds of BETWEEN can not be NULL")
            try:
                reversed_bounds = compare(high.value, low.value) < 0
            except EvaluationError as exc:
                raise _fail(low, f"the bounds of BETWEEN can not be compared: {exc}") from None
            if reversed_bounds:
                raise _fail(
                    low,
                    f"BETWEEN's low bound {_describe(low)} is greater than its high bound {_describe(high)}",
                )
        return _conjunction(_ordering(value, low, operator.ge), _ordering(value, high, operator.le))

    def _not_between(self, tree: Tree[Any], children: list[Any]) -> _Node:
        value, low, high = self.build(children[0]), self.build(children[3]), self.build(children[5])
        return self._or_nodes(_ordering(value, low, operator.lt), _ordering(value, high, operator.gt))

    def _or_nodes(self, left: _Node, right: _Node) -> _Node:
        left_eval, right_eval = left.evaluate, right.evaluate

        def evaluate(properties: Properties) -> bool | None:
            lv = left_eval(properties)
            if lv is True:
                return True
            rv = right_eval(properties)
            if rv is True:
                return True
            return None if lv is None or rv is None else False

        return _Node("boolean", evaluate, left.line, left.column)

    # -- string sets and substrings -----------------------------------------------------------

    def _in_(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _membership(self.build(children[0]), children[2:], negated=False)

    def _not_in(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _membership(self.build(children[0]), children[3:], negated=True)

    def _contains(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _substring(self.build(children[0]), _unquote(children[-1]), str.__contains__, False)

    def _not_contains(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _substring(self.build(children[0]), _unquote(children[-1]), str.__contains__, True)

    def _startswith(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _substring(self.build(children[0]), _unquote(children[-1]), str.startswith, False)

    def _not_startswith(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _substring(self.build(children[0]), _unquote(children[-1]), str.startswith, True)

    def _endswith(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _substring(self.build(children[0]), _unquote(children[-1]), str.endswith, False)

    def _not_endswith(self, tree: Tree[Any], children: list[Any]) -> _Node:
        return _substring(self.build(children[0]), _unquote(children[-1]), str.endswith, True)


# -- literals ---------------------------------------------------------------------------------


def _decimal(token: Token) -> _Node:
    digits = str(token).rstrip("lL")
    value = int(digits)
    if value > LONG_MAX:
        raise _fail(token, f"{token!s} is outside the range of a Java long")
    return _constant(value if INT_MIN <= value <= INT_MAX else JavaLong(value), token)


def _float(token: Token) -> _Node:
    value = float(str(token))
    # Java's createFloat refuses what is below Double.MIN_VALUE, so 0.0 itself (a RocketMQ quirk).
    if value == float("inf"):
        raise _fail(token, f"{token!s} is greater than the largest Java double")
    if value < 5e-324:
        raise _fail(token, f"{token!s} is less than Double.MIN_VALUE (4.9E-324)")
    return _constant(value, token)


_LITERALS: dict[str, Callable[[Token], _Node]] = {
    "string": lambda token: _constant(_unquote(token), token),
    "decimal": _decimal,
    "float": _float,
    "true": lambda token: _constant(True, token, boolean=True),
    "false": lambda token: _constant(False, token, boolean=True),
    "null": lambda token: _constant(None, token, boolean=True),
}


# -- node builders ----------------------------------------------------------------------------


def _negated(operand: _Node, where: _Node | Token) -> _Node:
    operand_eval = operand.evaluate

    def evaluate(properties: Properties) -> bool | None:
        value = operand_eval(properties)
        return None if value is None else not value

    line = where.line if isinstance(where, _Node) else (where.line or 1)
    column = where.column if isinstance(where, _Node) else (where.column or 1)
    return _Node("boolean", evaluate, line, column)


def _conjunction(left: _Node, right: _Node) -> _Node:
    left_eval, right_eval = left.evaluate, right.evaluate

    def evaluate(properties: Properties) -> bool | None:
        lv = left_eval(properties)
        if lv is False:
            return False
        rv = right_eval(properties)
        if rv is False:
            return False
        return None if lv is None or rv is None else True

    return _Node("boolean", evaluate, left.line, left.column)


def _equal_values(left: Any, right: Any) -> bool | None:
    """Java's equality: null only equals null (a null left answers null), then equals/compare."""
    if left is None or right is None:
        if left is None and right is None:
            return True
        return None if left is None else False
    if java_equals(left, right):
        return True
    return compare(left, right) == 0


def _equality(left: _Node, right: _Node) -> _Node:
    for operand in (left, right):
        if operand.kind == "constant" and operand.value is None:
            raise _fail(operand, "NULL cannot be compared with '='; use IS NULL")
    if (
        left.kind == "constant"
        and right.kind == "constant"
        and left.boolean_constant
        and not right.boolean_constant
    ):
        raise _fail(left, f"{_describe(left)} cannot be compared with {_describe(right)}")
    if left.kind == "property" and right.kind == "constant":
        return _property_equals(left, right)
    left_eval, right_eval = left.evaluate, right.evaluate
    return _Node(
        "boolean",
        lambda properties: _equal_values(left_eval(properties), right_eval(properties)),
        left.line,
        left.column,
    )


_STRING_PARSERS: dict[str, Callable[[str], Any]] = {"I": parse_int, "L": parse_long, "D": parse_double}


def _property_equals(prop: _Node, constant: _Node) -> _Node:
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

    return _Node("boolean", evaluate, prop.line, prop.column)


def _check_orderable(operand: _Node) -> None:
    """Java's ``checkLessThanOperand``: literals must be numbers, and no boolean expressions."""
    if operand.kind == "constant":
        value = operand.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _fail(operand, f"value {_describe(operand)} cannot be compared with '<', '>', '<=' or '>='")
    elif operand.is_boolean:
        raise _fail(operand, "a boolean expression cannot be compared with '<', '>', '<=' or '>='")


def _ordered(left: Any, right: Any, test: Callable[[int, int], bool]) -> bool | None:
    if left is None or right is None:
        return None
    if isinstance(left, str) and isinstance(right, str):
        # Two strings (two properties) are compared as doubles, or not at all.
        return test(compare(parse_double(left), parse_double(right)), 0)
    return test(compare(left, right), 0)


def _ordering(left: _Node, right: _Node, test: Callable[[int, int], bool]) -> _Node:
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

    return _Node("boolean", evaluate, left.line, left.column)


def _membership(operand: _Node, tokens: list[Token], *, negated: bool) -> _Node:
    if operand.kind != "property":
        raise _fail(operand, f"IN needs a property on its left, not {_describe(operand)}")
    read = operand.evaluate
    values = frozenset(_unquote(token) for token in tokens)

    def evaluate(properties: Properties) -> bool | None:
        text = read(properties)
        return None if text is None else (text in values) != negated

    return _Node("boolean", evaluate, operand.line, operand.column)


def _substring(operand: _Node, needle: str, test: Callable[[str, str], bool], negated: bool) -> _Node:
    operand_eval = operand.evaluate

    def evaluate(properties: Properties) -> bool | None:
        value = operand_eval(properties)
        if value is None:
            return None
        if not isinstance(value, str):
            return False
        return test(value, needle) != negated

    return _Node("boolean", evaluate, operand.line, operand.column)
