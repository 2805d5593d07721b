"""Subscription filters of POP consumption, and the seam where expression filters plug in.

A pop checks a message twice: first the consume-queue entry's tags code
(:meth:`MessageFilter.matches_code`, cheap, may pass a hash collision), then the decoded
message (:meth:`MessageFilter.matches`). A message that fails either is filtered out: done
for the group without being delivered.

TAG expressions (``*``, ``a||b``) are built in. Other expression types are looked up in
:data:`EXPRESSION_FILTERS`, factories ``expression text -> MessageFilter`` by type name. SQL92
is registered here over ``orbitmq.filter`` (the grammar the pull path evaluates, compiled once
per expression and cached there); its ``matches_code`` answers True, since a consume-queue
entry holds no properties. A type with no factory, or an expression that does not compile, is
refused with :class:`FilterExpressionError` (its text names the position). Whether the broker
accepts SQL92 at all (``enablePropertyFilter``) is the handler's decision, as on the pull path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from orbitmq import errors
from orbitmq.filter import EXPRESSION_TYPE_SQL92, compiled_filter
from orbitmq.filter import MessageFilter as ExpressionFilter
from orbitmq.protocol.tags import TagFilter


class FilterExpressionError(ValueError):
    """A subscription expression that cannot be used (its text names the type and the reason)."""


class MessageFilter(Protocol):
    """What a pop asks of a subscription filter."""

    def matches_code(self, tags_code: int) -> bool:
        """The consume-queue level check on a message's tags hash code."""
        ...

    def matches(self, tags: str | None, properties: dict[str, str]) -> bool:
        """The exact check on a decoded message."""
        ...


@dataclass(frozen=True, slots=True)
class TagMessageFilter:
    """A TAG expression: ``*`` or tags joined by ``||``."""

    tag_filter: TagFilter

    def matches_code(self, tags_code: int) -> bool:
        return self.tag_filter.matches_code(tags_code)

    def matches(self, tags: str | None, properties: dict[str, str]) -> bool:
        return self.tag_filter.matches_tag(tags)

    @property
    def matches_all(self) -> bool:
        return self.tag_filter.matches_all


def _tag_filter(expression: str) -> MessageFilter:
    return TagMessageFilter(TagFilter.parse(expression))


@dataclass(frozen=True, slots=True)
class Sql92MessageFilter:
    """A SQL92 expression over the decoded message's properties (TAGS among them)."""

    expression_filter: ExpressionFilter

    def matches_code(self, tags_code: int) -> bool:
        return True

    def matches(self, tags: str | None, properties: dict[str, str]) -> bool:
        return self.expression_filter.matches_properties(properties)

    @property
    def matches_all(self) -> bool:
        return False


def _sql92_filter(expression: str) -> MessageFilter:
    try:
        return Sql92MessageFilter(compiled_filter(EXPRESSION_TYPE_SQL92, expression))
    except errors.FilterExpressionError as exc:
        raise FilterExpressionError(f"SQL92 expression {expression!r}: {exc}") from exc


EXPRESSION_FILTERS: dict[str, Callable[[str], MessageFilter]] = {
    "TAG": _tag_filter,
    EXPRESSION_TYPE_SQL92: _sql92_filter,
}
"""Factories by expression type (upper case); see the module docstring."""


def build_filter(expression_type: str | None, expression: str | None) -> MessageFilter:
    """The filter for a subscription; an absent type means TAG, an absent expression ``*``.

    Raises:
        FilterExpressionError: no filter is registered for the type, or the expression is bad.
    """
    kind = (expression_type or "TAG").strip().upper()
    factory = EXPRESSION_FILTERS.get(kind)
    if factory is None:
        raise FilterExpressionError(f"{kind} filter expressions are not supported by this broker")
    return factory(expression or "*")
