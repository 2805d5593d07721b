"""Subscription filters: TAG and SQL92 expressions compiled once, then applied to messages (pure).

This package does no I/O and knows nothing of brokers: the broker's pull path uses it, and so
can any other delivery path (a POP engine, a proxy). One call compiles an expression::

    message_filter = compile_filter("SQL92", "a > 5 AND TAGS IN ('x', 'y')")

and a :class:`MessageFilter` answers in two steps, as RocketMQ's ``MessageFilter`` does:

* :meth:`MessageFilter.matches_tags_code` on the consume-queue entry's tags hash (cheap; a
  TAG filter decides here, modulo hash collisions, which clients re-check);
* :meth:`MessageFilter.matches_properties` on the stored message's properties (a dict, or
  :class:`PropertyBytes` over the raw property string), only when
  :attr:`MessageFilter.needs_properties` (SQL92 decides here).

A store's read path asks :meth:`MessageFilter.stored_record_filter`, the same check over stored
records, many at a time where they lie (``orbitmq.filter.records``).

:func:`compiled_filter` caches compilations by (type, expression), so a subscription is
compiled once per version however many pulls carry it. A bad expression raises
:class:`~orbitmq.errors.FilterExpressionError` naming the line and column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from orbitmq.errors import FilterExpressionError
from orbitmq.filter.properties import PropertyBytes, PropertyLookup
from orbitmq.filter.records import StoredRecordFilter
from orbitmq.filter.sql92 import Sql92Expression, compile_sql92
from orbitmq.protocol.tags import TagFilter

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "MessageFilter",
    "PropertyBytes",
    "PropertyLookup",
    "Sql92Expression",
    "Sql92Filter",
    "StoredRecordFilter",
    "TagExpressionFilter",
    "compile_filter",
    "compile_sql92",
    "compiled_filter",
]

EXPRESSION_TYPE_TAG = "TAG"
EXPRESSION_TYPE_SQL92 = "SQL92"


class MessageFilter(Protocol):
    """A compiled subscription expression (see the module docstring)."""

    @property
    def expression_type(self) -> str: ...

    @property
    def expression(self) -> str: ...

    @property
    def matches_all(self) -> bool:
        """True when every message passes (``*``): callers may skip filtering altogether."""
        ...

    @property
    def needs_properties(self) -> bool:
        """True when :meth:`matches_properties` must be asked (the tags code is not enough)."""
        ...

    def matches_tags_code(self, code: int) -> bool: ...

    def matches_properties(self, properties: PropertyLookup) -> bool: ...

    def matches_property_bytes(self, property_bytes: bytes) -> bool:
        """:meth:`matches_properties` over a raw property string (a stored record's)."""
        ...

    def property_bytes_matcher(self) -> Callable[[bytes], bool]:
        """:meth:`matches_property_bytes` as a plain function, for per-record loops."""
        ...

    def stored_record_filter(self) -> StoredRecordFilter:
        """:meth:`matches_property_bytes` over stored records (a store's read path asks it)."""
        ...


@dataclass(frozen=True, slots=True)
class TagExpressionFilter:
    """A TAG expression (``*`` or ``a || b``): decided by the consume queue's tags hash."""

    tag_filter: TagFilter
    expression_type: str = EXPRESSION_TYPE_TAG
    needs_properties: bool = False

    @property
    def expression(self) -> str:
        return self.tag_filter.expression

    @property
    def matches_all(self) -> bool:
        return self.tag_filter.matches_all

    def matches_tags_code(self, code: int) -> bool:
        return self.tag_filter.matches_code(code)

    def matches_properties(self, properties: PropertyLookup) -> bool:
        return self.tag_filter.matches_tag(properties.get("TAGS"))

    def matches_property_bytes(self, property_bytes: bytes) -> bool:
        try:
            return self.matches_properties(PropertyBytes(property_bytes))
        except UnicodeDecodeError:
            return False

    def property_bytes_matcher(self) -> Callable[[bytes], bool]:
        return self.matches_property_bytes

    def stored_record_filter(self) -> StoredRecordFilter:
        return StoredRecordFilter(self.matches_property_bytes)


@dataclass(frozen=True, slots=True)
class Sql92Filter:
    """A SQL92 expression over the message's properties (TAGS among them)."""

    compiled: Sql92Expression
    expression_type: str = EXPRESSION_TYPE_SQL92
    needs_properties: bool = True
    matches_all: bool = False

    @property
    def expression(self) -> str:
        return self.compiled.text

    def matches_tags_code(self, code: int) -> bool:
        return True

    def matches_properties(self, properties: PropertyLookup) -> bool:
        return self.compiled.matches(properties)

    def matches_property_bytes(self, property_bytes: bytes) -> bool:
        return self.compiled.matches_raw(property_bytes)

    def property_bytes_matcher(self) -> Callable[[bytes], bool]:
        return self.compiled.raw_matcher()

    def stored_record_filter(self) -> StoredRecordFilter:
        return StoredRecordFilter(self.compiled.raw_matcher(), self.compiled.memo)


def compile_filter(expression_type: str | None, expression: str | None) -> MessageFilter:
    """Compile a subscription expression; an absent type means TAG, as in RocketMQ.

    Raises:
        FilterExpressionError: an unknown expression type, or an expression that does not
            compile (the message names the position).
    """
    kind = (expression_type or EXPRESSION_TYPE_TAG).upper()
    if kind == EXPRESSION_TYPE_TAG:
        return TagExpressionFilter(TagFilter.parse(expression))
    if kind == EXPRESSION_TYPE_SQL92:
        return Sql92Filter(compile_sql92(expression or ""))
    raise FilterExpressionError(
        f"expression type {expression_type!r} is not supported (use {EXPRESSION_TYPE_TAG} or "
        f"{EXPRESSION_TYPE_SQL92})"
    )


@lru_cache(maxsize=1024)
def compiled_filter(expression_type: str | None, expression: str | None) -> MessageFilter:
    """:func:`compile_filter`, cached (failures are not cached: they raise each time)."""
    return compile_filter(expression_type, expression)
