"""The POP engine: server-side consumption state for RocketMQ 5.x clients (both protocols).

``state`` (pure: what is in flight, visible when), ``selection`` (pure: what one pop
delivers), ``journal`` (pure: the durable formats), ``renew`` (pure: the auto-renew policy the
gRPC proxy drives), ``filter`` (subscription filters and the expression-filter seam),
``persistence`` (loading at start), ``revive`` (expired deliveries into the pop retry topic),
``results`` (what a pop asks and answers), ``waiting`` (parked pops) and ``service`` (the I/O
shell the handlers call).
"""

from orbitmq.broker.pop.filter import FilterExpressionError, MessageFilter, build_filter
from orbitmq.broker.pop.results import PopJournalError, PopRequest, PopResult, PopStatus
from orbitmq.broker.pop.service import PopService
from orbitmq.broker.pop.state import HandleStatus

__all__ = [
    "FilterExpressionError",
    "HandleStatus",
    "MessageFilter",
    "PopJournalError",
    "PopRequest",
    "PopResult",
    "PopService",
    "PopStatus",
    "build_filter",
]
