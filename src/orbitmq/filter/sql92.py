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
per node. The common shape ``property OP constant`` gets a specialised closure. The broker's
per-record check reads only the properties the expression names from the raw property string
and remembers the answer per tuple of their values (``orbitmq.filter.properties``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput

from orbitmq.errors import FilterExpressionError
from orbitmq.filter._java_values import EvaluationError, compare, negate
from orbitmq.filter._sql_nodes import (
    LITERALS,
    Evaluator,
    Node,
    Properties,
    as_boolean,
    conjunction,
    describe,
    equal_values,
    equality,
    fail,
    lookup_reader,
    membership,
    negation,
    ordering,
    substring,
    unquote,
)
from orbitmq.filter.properties import PropertyBytes, PropertyMemo

__all__ = ["Sql92Expression", "compile_sql92"]


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
class Sql92Expression:
    """A compiled SQL92 expression.

    ``evaluate(properties)`` gives Java's three-valued answer; :meth:`matches` is what the
    broker asks: True only for TRUE, False for FALSE, null or an evaluation error.
    :meth:`evaluate_raw` and :meth:`matches_raw` take the raw property string instead; the
    latter remembers its answer per tuple of the named properties' values
    (:attr:`memo`, ``orbitmq.filter.properties.PropertyMemo``), so a pull over many messages evaluates
    the expression once per distinct tuple.
    """

    text: str
    evaluate: Evaluator
    property_names: tuple[str, ...]
    """The properties the expression reads (TAGS for the tag), in order of appearance."""
    memo: PropertyMemo = field(repr=False, compare=False)
    """The answers remembered per tuple of the named properties' raw values."""
    _match_raw: Callable[[bytes], bool] = field(repr=False, compare=False)

    def matches(self, properties: Properties) -> bool:
        try:
            return self.evaluate(properties) is True
        except EvaluationError:
            return False

    def evaluate_raw(self, property_bytes: bytes) -> Any:
        """:attr:`evaluate` over a raw property string (raises UnicodeDecodeError on bad UTF-8)."""
        lookup = PropertyBytes(property_bytes)
        values = {name: value for name in self.property_names if (value := lookup.get(name)) is not None}
        return self.evaluate(values)

    def matches_raw(self, property_bytes: bytes) -> bool:
        return self._match_raw(property_bytes)

    def raw_matcher(self) -> Callable[[bytes], bool]:
        """:meth:`matches_raw` as one closure (the broker calls it per record: no lookups)."""
        return self._match_raw


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
    compiler = _Compiler()
    root = as_boolean(compiler.build(tree))
    names = tuple(compiler.property_names)
    evaluate = root.evaluate

    def decide(values: dict[str, str]) -> bool:
        try:
            return evaluate(values) is True
        except EvaluationError:
            return False

    memo = PropertyMemo(names, decide)
    return Sql92Expression(text, evaluate, names, memo, memo.matcher())


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


class _Compiler:
    """Turns the lark tree into :class:`Node` closures, running Java's parse-time checks.

    It notes every property the expression reads (``property_names``, first appearance
    first): the raw-string matcher reads those and nothing else.
    """

    def __init__(self) -> None:
        self.property_names: dict[str, None] = {}

    def build(self, tree: Tree[Any] | Token) -> Node:
        if isinstance(tree, Token):  # pragma: no cover - every terminal is wrapped in a rule
            raise fail(tree, f"unexpected {tree!s}")
        data = str(tree.data)
        children: list[Any] = tree.children
        if data in LITERALS:
            return LITERALS[data](children[0])
        if data == "property":
            token: Token = children[0]
            name = str(token)
            self.property_names[name] = None
            return Node("property", lookup_reader(name), token.line or 1, token.column or 1, name=name)
        if data == "unary":  # unary plus: the operand itself
            return self.build(children[-1])
        method = getattr(self, f"_{data}", None)
        if method is None:  # pragma: no cover - the grammar names no other rule
            raise fail(tree, f"unsupported construct {data}")
        node: Node = method(tree, children)
        return node

    # -- logic --------------------------------------------------------------------------------

    def _or_(self, tree: Tree[Any], children: list[Any]) -> Node:
        left, right = as_boolean(self.build(children[0])), as_boolean(self.build(children[2]))
        left_eval, right_eval = left.evaluate, right.evaluate

        def evaluate(properties: Properties) -> bool | None:
            lv = left_eval(properties)
            if lv is True:
                return True
            rv = right_eval(properties)
            if rv is True:
                return True
            return None if lv is None or rv is None else False

        return Node("boolean", evaluate, left.line, left.column)

    def _and_(self, tree: Tree[Any], children: list[Any]) -> Node:
        left, right = as_boolean(self.build(children[0])), as_boolean(self.build(children[2]))
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

    def _not_(self, tree: Tree[Any], children: list[Any]) -> Node:
        operand = as_boolean(self.build(children[-1]))
        return negation(operand, children[0])

    def _neg(self, tree: Tree[Any], children: list[Any]) -> Node:
        operand = self.build(children[-1])
        operand_eval = operand.evaluate

        def evaluate(properties: Properties) -> Any:
            value = operand_eval(properties)
            if value is None or isinstance(value, bool | str):
                return None
            return negate(value)

        return Node("value", evaluate, operand.line, max(operand.column - 1, 1))

    # -- equality -----------------------------------------------------------------------------

    def _eq(self, tree: Tree[Any], children: list[Any]) -> Node:
        return equality(self.build(children[0]), self.build(children[1]))

    def _ne(self, tree: Tree[Any], children: list[Any]) -> Node:
        left = self.build(children[0])
        return negation(equality(left, self.build(children[1])), left)

    def _is_null(self, tree: Tree[Any], children: list[Any]) -> Node:
        operand = self.build(children[0])
        if operand.kind == "property":
            read = operand.evaluate
            return Node("boolean", lambda properties: read(properties) is None, operand.line, operand.column)
        operand_eval = operand.evaluate

        def evaluate(properties: Properties) -> bool:
            return equal_values(operand_eval(properties), None) is True

        return Node("boolean", evaluate, operand.line, operand.column)

    def _is_not_null(self, tree: Tree[Any], children: list[Any]) -> Node:
        operand = self.build(children[0])
        if operand.kind == "property":
            read = operand.evaluate
            return Node(
                "boolean", lambda properties: read(properties) is not None, operand.line, operand.column
            )
        operand_eval = operand.evaluate

        def evaluate(properties: Properties) -> bool | None:
            answer = equal_values(operand_eval(properties), None)
            return None if answer is None else not answer

        return Node("boolean", evaluate, operand.line, operand.column)

    # -- ordering -----------------------------------------------------------------------------

    def _gt(self, tree: Tree[Any], children: list[Any]) -> Node:
        return ordering(self.build(children[0]), self.build(children[1]), operator.gt)

    def _ge(self, tree: Tree[Any], children: list[Any]) -> Node:
        return ordering(self.build(children[0]), self.build(children[1]), operator.ge)

    def _lt(self, tree: Tree[Any], children: list[Any]) -> Node:
        return ordering(self.build(children[0]), self.build(children[1]), operator.lt)

    def _le(self, tree: Tree[Any], children: list[Any]) -> Node:
        return ordering(self.build(children[0]), self.build(children[1]), operator.le)

    def _between(self, tree: Tree[Any], children: list[Any]) -> Node:
        value, low, high = self.build(children[0]), self.build(children[2]), self.build(children[4])
        if low.kind == "constant" and high.kind == "constant":
            if low.value is None or high.value is None:
                raise fail(low, "the bounds of BETWEEN can not be NULL")
            try:
                reversed_bounds = compare(high.value, low.value) < 0
            except EvaluationError as exc:
                raise fail(low, f"the bounds of BETWEEN can not be compared: {exc}") from None
            if reversed_bounds:
                raise fail(
                    low,
                    f"BETWEEN's low bound {describe(low)} is greater than its high bound {describe(high)}",
                )
        return conjunction(ordering(value, low, operator.ge), ordering(value, high, operator.le))

    def _not_between(self, tree: Tree[Any], children: list[Any]) -> Node:
        value, low, high = self.build(children[0]), self.build(children[3]), self.build(children[5])
        return self._or_nodes(ordering(value, low, operator.lt), ordering(value, high, operator.gt))

    def _or_nodes(self, left: Node, right: Node) -> Node:
        left_eval, right_eval = left.evaluate, right.evaluate

        def evaluate(properties: Properties) -> bool | None:
            lv = left_eval(properties)
            if lv is True:
                return True
            rv = right_eval(properties)
            if rv is True:
                return True
            return None if lv is None or rv is None else False

        return Node("boolean", evaluate, left.line, left.column)

    # -- string sets and substrings -----------------------------------------------------------

    def _in_(self, tree: Tree[Any], children: list[Any]) -> Node:
        return membership(self.build(children[0]), children[2:], negated=False)

    def _not_in(self, tree: Tree[Any], children: list[Any]) -> Node:
        return membership(self.build(children[0]), children[3:], negated=True)

    def _contains(self, tree: Tree[Any], children: list[Any]) -> Node:
        return substring(self.build(children[0]), unquote(children[-1]), str.__contains__, False)

    def _not_contains(self, tree: Tree[Any], children: list[Any]) -> Node:
        return substring(self.build(children[0]), unquote(children[-1]), str.__contains__, True)

    def _startswith(self, tree: Tree[Any], children: list[Any]) -> Node:
        return substring(self.build(children[0]), unquote(children[-1]), str.startswith, False)

    def _not_startswith(self, tree: Tree[Any], children: list[Any]) -> Node:
        return substring(self.build(children[0]), unquote(children[-1]), str.startswith, True)

    def _endswith(self, tree: Tree[Any], children: list[Any]) -> Node:
        return substring(self.build(children[0]), unquote(children[-1]), str.endswith, False)

    def _not_endswith(self, tree: Tree[Any], children: list[Any]) -> Node:
        return substring(self.build(children[0]), unquote(children[-1]), str.endswith, True)
