"""MessageSelector: what a consumer subscribes to on a topic, by tag or by SQL92 over properties.

``MessageSelector.by_tag("a || b")`` (``"*"`` for everything) is decided by the broker on the
tags hash and re-checked by the client; ``MessageSelector.by_sql("price > 100 AND TAGS IN
('a')")`` is evaluated by the broker over each message's properties (the broker needs
``enablePropertyFilter=true``). Consumers also take a plain string, meaning a tag expression,
as RocketMQ's ``subscribe(topic, "a || b")`` does. The expression is compiled when the selector
is made, so a bad one fails at once with its position.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orbitmq.filter import EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG, MessageFilter, compiled_filter
from orbitmq.model.heartbeat import SubscriptionData

__all__ = ["MessageSelector", "selector_of"]


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """A subscription expression and its type; build it with :meth:`by_tag` or :meth:`by_sql`."""

    expression_type: str
    expression: str
    message_filter: MessageFilter = field(compare=False, repr=False)

    @classmethod
    def by_tag(cls, expression: str = "*") -> MessageSelector:
        """Messages whose tag is one of ``"a || b"`` (``"*"`` or empty: every message)."""
        compiled = compiled_filter(EXPRESSION_TYPE_TAG, expression)
        return cls(EXPRESSION_TYPE_TAG, compiled.expression, compiled)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """Messages whose properties satisfy the SQL92 ``expression``.

        Raises:
            FilterExpressionError: the expression does not compile; the message names the
                line and column.
        """
        return cls(EXPRESSION_TYPE_SQL92, expression, compiled_filter(EXPRESSION_TYPE_SQL92, expression))

    @property
    def is_sql(self) -> bool:
        return self.expression_type == EXPRESSION_TYPE_SQL92

    def subscription_data(self, topic: str, sub_version: int = 0) -> SubscriptionData:
        """This selector as a heartbeat's SubscriptionData."""
        tags = frozenset[str]()
        codes = frozenset[int]()
        tag_filter = getattr(self.message_filter, "tag_filter", None)
        if tag_filter is not None:
            tags, codes = tag_filter.tags, tag_filter.codes
        return SubscriptionData(
            topic=topic,
            sub_string=self.expression,
            tags_set=tags,
            code_set=codes,
            sub_version=sub_version,
            expression_type=self.expression_type,
        )


def selector_of(expression: str | MessageSelector | None) -> MessageSelector:
    """A selector from what a consumer's ``subscribe`` takes (a string is a tag expression)."""
    if isinstance(expression, MessageSelector):
        return expression
    return MessageSelector.by_tag(expression or "*")
