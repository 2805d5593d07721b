"""Java value semantics of RocketMQ's SQL92 filter, in plain Python (pure, no I/O).

RocketMQ evaluates a selector over Java objects: message properties are ``String``s, literals
are ``Integer`` (a decimal that fits 32 bits), ``Long``, ``Double``, ``String``, ``Boolean`` or
null. Comparisons convert between them the way ``ComparisonExpression.__compare`` does, with
string conversion switched on (the broker always parses with it):

==================  =====================================================================
left \\ right        what happens before ``compareTo``
==================  =====================================================================
same class          nothing
Integer             Long: left widens; Double: left widens; String: right is parsed with
                    ``Integer.valueOf``; Boolean: the answer is "less" (-1)
Long                Integer or Double: widened; String: ``Long.valueOf``; Boolean: -1
Double              Integer or Long: right widens; String: ``Double.valueOf``; Boolean: -1
String              Boolean: ``Boolean.valueOf`` (never fails); Integer, Long, Double: the
                    left is parsed as that type
Boolean             String: a ClassCastException in Java (an evaluation error); else -1
==================  =====================================================================

A failed parse is a Java ``RuntimeException``: it aborts the whole evaluation, and the broker
treats the message as not matching. Here that is :class:`EvaluationError`.

Python values stand for Java ones: ``bool`` for Boolean, :class:`JavaLong` for Long, other
``int`` for Integer, ``float`` for Double, ``str`` for String and ``None`` for null.
"""

from __future__ import annotations

import math
import re
from typing import Any

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
# Double.valueOf: optional sign, NaN, Infinity, or a decimal with an optional exponent and an
# optional f/F/d/D suffix, after String.trim() (which removes every char <= U+0020).
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_TRIMMED = "".join(chr(code) for code in range(0x21))


class JavaLong(int):
    """A Java ``Long`` (a plain ``int`` is a Java ``Integer``)."""

    __slots__ = ()


class EvaluationError(Exception):
    """What Java throws while evaluating: the message does not match."""


def java_class(value: Any) -> str:
    """The Java class letter of a value: B(oolean), I(nteger), L(ong), D(ouble), S(tring)."""
    if isinstance(value, bool):
        return "B"
    if isinstance(value, JavaLong):
        return "L"
    if isinstance(value, int):
        return "I"
    if isinstance(value, float):
        return "D"
    return "S"


def parse_int(text: str) -> int:
    """``Integer.valueOf``; raises EvaluationError like a NumberFormatException."""
    if text.isdigit() and text.isascii() and len(text) < 10:
        return int(text)  # the common case, fast: fewer than 10 digits always fit
    if _JAVA_INTEGER.fullmatch(text):
        value = int(text)
        if INT_MIN <= value <= INT_MAX:
            return value
    raise EvaluationError(f"For input string: {text!r} (not an Integer)")


def parse_long(text: str) -> JavaLong:
    """``Long.valueOf``; raises EvaluationError like a NumberFormatException."""
    if text.isdigit() and text.isascii() and len(text) < 19:
        return JavaLong(text)
    if _JAVA_INTEGER.fullmatch(text):
        value = int(text)
        if LONG_MIN <= value <= LONG_MAX:
            return JavaLong(value)
    raise EvaluationError(f"For input string: {text!r} (not a Long)")


def parse_double(text: str) -> float:
    """``Double.valueOf``; raises EvaluationError like a NumberFormatException."""
    trimmed = text.strip(_TRIMMED)
    if not _JAVA_DOUBLE.fullmatch(trimmed):
        raise EvaluationError(f"For input string: {text!r} (not a Double)")
    body = trimmed.rstrip("fFdD") if trimmed[-1:] in "fFdD" and "Infinity" not in trimmed else trimmed
    if body.lstrip("+-") == "NaN":
        return math.nan
    if body.lstrip("+-") == "Infinity":
        return -math.inf if body.startswith("-") else math.inf
    return float(body)


def parse_boolean(text: str) -> bool:
    """``Boolean.valueOf``: true exactly for "true" in any case."""
    return text.lower() == "true"


def _compare_doubles(left: float, right: float) -> int:
    """``Double.compareTo``: NaN is above everything and equal to itself; -0.0 < 0.0."""
    if left < right:
        return -1
    if left > right:
        return 1
    left_nan, right_nan = math.isnan(left), math.isnan(right)
    if left_nan or right_nan:
        return (left_nan > right_nan) - (left_nan < right_nan)
    left_negative_zero = left == 0.0 and math.copysign(1.0, left) < 0
    right_negative_zero = right == 0.0 and math.copysign(1.0, right) < 0
    return (right_negative_zero > left_negative_zero) - (right_negative_zero < left_negative_zero)


def _compare_same(left: Any, right: Any) -> int:
    if isinstance(left, float):
        return _compare_doubles(left, float(right))
    answer: int = (left > right) - (left < right)
    return answer


_PARSERS = {"I": parse_int, "L": parse_long, "D": parse_double, "B": parse_boolean}


def compare(left: Any, right: Any) -> int:
    """``ComparisonExpression.__compare`` with string conversion on (see the module table)."""
    left_class, right_class = java_class(left), java_class(right)
    if left_class == right_class:
        return _compare_same(left, right)
    if left_class == "B":
        if right_class == "S":
            raise EvaluationError("java.lang.ClassCastException: Boolean cannot be cast to String")
        return -1
    if left_class == "S":
        return _compare_same(_PARSERS[right_class](left), right)
    if right_class == "B":
        return -1
    if right_class == "S":
        return _compare_same(left, _PARSERS[left_class](right))
    # Both numbers of different classes: the narrower one widens (Integer < Long < Double).
    if "D" in (left_class, right_class):
        return _compare_doubles(float(left), float(right))
    return _compare_same(int(left), int(right))


def java_equals(left: Any, right: Any) -> bool:
    """``left.equals(right)``: same class and same value (so Integer 1 never equals Long 1)."""
    return java_class(left) == java_class(right) and left == right


def negate(value: Any) -> Any:
    """``UnaryExpression.negate`` of a number, wrapping like Java's two's complement."""
    if isinstance(value, JavaLong):
        result = -int(value)
        return JavaLong(result if result <= LONG_MAX else LONG_MIN)
    if isinstance(value, float):
        return -value
    result = -value
    return result if result <= INT_MAX else INT_MIN
