"""QUERY_CONSUME_QUEUE (321): a queue's consume-queue entries, read by admin tools.

RocketMQ's ``mqadmin queryCq`` request. It reads a queue's entries (commit-log offset, size,
tags code) whatever the topic's permission, which is how tools look into a write-only topic
such as a ``%DLQ%`` group's (perm 2): the messages themselves are then read by commit-log
offset (VIEW_MESSAGE_BY_ID). The answer body is RocketMQ's ``QueryConsumeQueueResponseBody``
JSON: ``queueData`` (``physicOffset``, ``physicSize``, ``tagsCode``), ``minQueueIndex``,
``maxQueueIndex``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orbitmq.protocol import fastjson
from orbitmq.protocol.header_fields import (
    HeaderBase,
    Int32,
    NonNegativeInt32,
    NonNegativeInt64,
    OptionalGroup,
    Topic,
)

__all__ = [
    "QUERY_CONSUME_QUEUE",
    "QUERY_CONSUME_QUEUE_COUNT_MAX",
    "ConsumeQueueEntry",
    "QueryConsumeQueueRequestHeader",
    "decode_consume_queue_body",
    "encode_consume_queue_body",
]

QUERY_CONSUME_QUEUE = 321
QUERY_CONSUME_QUEUE_COUNT_MAX = 1024
"""Entries one request answers at most."""


@dataclass(frozen=True, slots=True)
class QueryConsumeQueueRequestHeader(HeaderBase):
    """``index``: the first queue offset wanted; ``count``: how many entries (at most
    :data:`QUERY_CONSUME_QUEUE_COUNT_MAX` are answered)."""

    topic: Topic
    queue_id: Int32
    index: NonNegativeInt64
    count: NonNegativeInt32
    consumer_group: OptionalGroup | None = None


@dataclass(frozen=True, slots=True)
class ConsumeQueueEntry:
    queue_offset: int
    commit_log_offset: int
    size: int
    tags_code: int


def encode_consume_queue_body(entries: list[ConsumeQueueEntry], min_offset: int, max_offset: int) -> bytes:
    document: dict[str, Any] = {
        "queueData": [
            {"physicOffset": e.commit_log_offset, "physicSize": e.size, "tagsCode": e.tags_code}
            for e in entries
        ],
        "minQueueIndex": min_offset,
        "maxQueueIndex": max_offset,
    }
    return fastjson.dumps(document)


def decode_consume_queue_body(
    body: bytes, first_queue_offset: int
) -> tuple[list[ConsumeQueueEntry], int, int]:
    """(entries numbered from ``first_queue_offset``, min queue offset, max queue offset)."""
    document = fastjson.loads(body, "QueryConsumeQueueResponseBody")
    if not isinstance(document, dict):
        return [], 0, 0
    entries = [
        ConsumeQueueEntry(
            first_queue_offset + index,
            int(item.get("physicOffset", 0)),
            int(item.get("physicSize", 0)),
            int(item.get("tagsCode", 0)),
        )
        for index, item in enumerate(document.get("queueData") or [])
        if isinstance(item, dict)
    ]
    return entries, int(document.get("minQueueIndex", 0)), int(document.get("maxQueueIndex", 0))
