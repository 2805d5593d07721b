"""Heartbeat values: which producer and consumer groups a client belongs to, and what it subscribes.

The enums are wire values: Java clients send their names, the C++ client their ordinals,
so each member's value is its Java ordinal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum


class ConsumeType(IntEnum):
    CONSUME_ACTIVELY = 0
    """Pull consumer."""
    CONSUME_PASSIVELY = 1
    """Push consumer."""


class MessageModel(IntEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(IntEnum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


EXPRESSION_TYPE_TAG = "TAG"
EXPRESSION_TYPE_SQL92 = "SQL92"


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """One topic subscription of a consumer group.

    ``code_set`` holds the Java hash of each tag; decoders recompute it from the tags
    because the C++ client sends zeros.
    """

    topic: str
    sub_string: str = "*"
    tags_set: frozenset[str] = frozenset()
    code_set: frozenset[int] = frozenset()
    sub_version: int = 0
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False
    filter_class_source: str | None = None


@dataclass(frozen=True, slots=True)
class ProducerData:
    group_name: str


@dataclass(slots=True)
class ConsumerData:
    """A consumer group as one client sees it."""

    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False


@dataclass(slots=True)
class HeartbeatData:
    """Body of HEART_BEAT: one client and all of its groups."""

    client_id: str
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)
