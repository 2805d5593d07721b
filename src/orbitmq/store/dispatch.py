"""Dispatch ("reput"): carry each CommitLog record to its ConsumeQueue and the IndexService.

The put path dispatches the records it has just written, with the values it already
holds (no decoding). Recovery and replicated appends dispatch records decoded back from
the log through :meth:`Dispatcher.redispatch`, which is idempotent: an entry already in
place is skipped, so re-dispatching from a conservative point is always safe.

What gets dispatched, as in RocketMQ: only transaction types NOT and COMMIT reach a
ConsumeQueue (PREPARED and ROLLBACK records take no queue offset), and every type except
ROLLBACK is indexed under ``UNIQ_KEY`` and each ``KEYS`` token.
"""

from __future__ import annotations

import logging
from enum import Enum

from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageConst, MessageExt, SysFlag
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.protocol.names import shorten
from orbitmq.protocol.properties import decimal_value
from orbitmq.protocol.tags import tags_code
from orbitmq.store.consume_queue import ConsumeQueueTable, queue_is_legal
from orbitmq.store.index_service import IndexService

_log = logging.getLogger(__name__)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
_TAG_CODE_CACHE_MAX = 65_536


class Redispatch(Enum):
    """What :meth:`Dispatcher.redispatch` did with one record."""

    APPENDED = "APPENDED"  # the entry was missing and is now in place
    PRESENT = "PRESENT"  # the entry was already there (or the record takes none)
    GAP = "GAP"  # entries before this one are missing: the queue needs a full rebuild


def takes_queue_offset(sys_flag: int) -> bool:
    """Whether a record of this sysFlag goes to a ConsumeQueue (transaction NOT or COMMIT)."""
    kind = sys_flag & SysFlag.TRANSACTION_MASK
    return kind == SysFlag.TRANSACTION_NOT_TYPE or kind == SysFlag.TRANSACTION_COMMIT_TYPE


def is_indexed(sys_flag: int) -> bool:
    return sys_flag & SysFlag.TRANSACTION_MASK != SysFlag.TRANSACTION_ROLLBACK_TYPE


# Plain values for the put path's per-message checks.
UNIQ_KEY: str = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
KEYS: str = MessageConst.KEYS
TRANSACTION_MASK = int(SysFlag.TRANSACTION_MASK)
ROLLBACK = int(SysFlag.TRANSACTION_ROLLBACK_TYPE)


def add_key_tokens(user_keys: str, commit_log_offset: int, tokens: list[str], offsets: list[int]) -> None:
    """Append each space-separated token of a KEYS value, with ``commit_log_offset`` beside it."""
    for token in user_keys.split(" ") if " " in user_keys else (user_keys,):
        if token:
            tokens.append(token)
            offsets.append(commit_log_offset)


def index_keys(properties: dict[str, str]) -> list[str]:
    """UNIQ_KEY and the KEYS string (the index splits it into tokens); [] when neither is set."""
    keys = []
    unique_key = properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if unique_key:
        keys.append(unique_key)
    user_keys = properties.get(MessageConst.KEYS)
    if user_keys:
        keys.append(user_keys)
    return keys


class Dispatcher:
    """Computes tags codes and writes ConsumeQueue entries and index keys for records."""

    def __init__(self, queues: ConsumeQueueTable, index: IndexService | None, delay_levels_ms: list[int]):
        self.queues = queues
        self.index = index
        self._delay_levels_ms = delay_levels_ms
        self._tag_codes: dict[str, int] = {}  # Java hashCode is a Python loop: remember it
        self._illegal_seen: set[tuple[str, int]] = set()  # queues refused by redispatch (logged once)

    def tags_code_for(self, topic: str, properties: dict[str, str], store_timestamp_ms: int) -> int:
        """The consume-queue tags code: the TAGS hash, or the delivery time for delayed messages.

        For SCHEDULE_TOPIC_XXXX the code is store time + delay(DELAY level), levels clamped
        to the configured range; rebuilding from the log recomputes exactly this.
        """
        if topic == SCHEDULE_TOPIC:
            level_value = decimal_value(properties.get(MessageConst.DELAY_TIME_LEVEL, ""), 9)
            if level_value and self._delay_levels_ms:
                level = min(level_value, len(self._delay_levels_ms))
                return store_timestamp_ms + self._delay_levels_ms[level - 1]
            return store_timestamp_ms
        return self.tag_code(properties.get(MessageConst.TAGS))

    def tag_code(self, tag: str | None) -> int:
        """The consume-queue tags code of a message with this TAGS value (0 without one)."""
        if not tag:
            return 0
        code = self._tag_codes.get(tag)
        if code is None:
            if len(self._tag_codes) > _TAG_CODE_CACHE_MAX:
                self._tag_codes.clear()
            code = self._tag_codes[tag] = tags_code(tag)
        return code

    def redispatch(self, message: MessageExt, commit_log_offset: int, size: int) -> Redispatch:
        """Dispatch a record decoded from the log (recovery, rebuild, replication); idempotent."""
        outcome = Redispatch.PRESENT
        if takes_queue_offset(message.sys_flag):
            outcome = self._redispatch_queue(message, commit_log_offset, size)
        # Indexed even on a GAP: the queue rebuild that follows skips already indexed records.
        self.index_new(message, commit_log_offset)
        return outcome

    def index_new(self, message: MessageExt, commit_log_offset: int) -> None:
        """Index a decoded record's keys, unless the index already reaches its offset."""
        index = self.index
        if (
            index is not None
            and is_indexed(message.sys_flag)
            and commit_log_offset > index.max_commit_log_offset
        ):
            keys = index_keys(message.properties)
            if keys:
                index.put_keys(message.topic, keys, commit_log_offset, message.store_timestamp)

    def _redispatch_queue(self, message: MessageExt, commit_log_offset: int, size: int) -> Redispatch:
        if not queue_is_legal(message.topic, message.queue_id):
            # Written by a store that did not check names: the name could be a path. Its
            # record stays in the log; it gets no queue.
            if (message.topic, message.queue_id) not in self._illegal_seen:
                self._illegal_seen.add((message.topic, message.queue_id))
                _log.warning(
                    "record at commit-log offset %d names queue %r/%d, not a legal queue; not dispatched",
                    commit_log_offset,
                    shorten(message.topic),
                    message.queue_id,
                )
            return Redispatch.PRESENT
        queue = self.queues.get_or_create(message.topic, message.queue_id)
        queue_offset = message.queue_offset
        if queue_offset < queue.max_queue_offset:
            if queue_offset < queue.min_queue_offset:
                return Redispatch.PRESENT
            if queue.entry(queue_offset)[:2] == (commit_log_offset, size):
                return Redispatch.PRESENT
            # The queue disagrees with the log from here on; the log wins.
            queue.truncate(queue_offset)
        elif queue_offset > queue.max_queue_offset:
            if queue.max_queue_offset or queue.file_starts():
                return Redispatch.GAP
            # An empty queue rebuilt after retention starts at its first surviving record.
            queue.min_queue_offset = queue.max_queue_offset = queue.written_queue_offset = queue_offset
        tags = self.tags_code_for(message.topic, message.properties, message.store_timestamp)
        queue.put(queue_offset, commit_log_offset, size, tags)
        self.queues.dirty.add(queue)
        return Redispatch.APPENDED


def record_has_key(record: bytes, topic: str, key: str) -> bool:
    """Whether a raw record belongs to ``topic`` and carries ``key`` (index matches are by hash)."""
    try:
        message, _ = decode_stored_message(record, decode_body=False)
    except RemoteProtocolError:
        return False
    if message.topic != topic:
        return False
    properties = message.properties
    if properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key:
        return True
    return key in properties.get(MessageConst.KEYS, "").split(" ")
