"""The put of a batch send: messages of one queue that differ only in flag, body and properties.

A producer's batch shares its topic, queue, sysFlag, born timestamp, hosts and the broker's
stamps (CLUSTER, MSG_REGION, TRACE_ON); only each message's flag, body and properties differ. :class:`BatchPut` carries it that way, as
columns, so the broker builds no object per message and the store checks and packs the
shared fields once per batch rather than once per message:

1. :func:`prepare_batch` (no lock) runs :meth:`RecordBuilder.prepare`'s checks over whole
   columns, the shared fields once, and encodes each record's length and tail (topic +
   property string, taken as the caller encoded it when it did).
2. :meth:`PreparedBatch.pack` (store lock held) writes the records into the mapped segment.
3. :meth:`PreparedBatch.dispatch` (store lock held) buffers the ConsumeQueue entries and
   hands the batch's keys to the index, as :func:`~orbitmq.store.put_path.dispatch_new`.

The records are byte for byte those of :meth:`MessageStore.put_messages` over
:meth:`BatchPut.requests` (the same store timestamp given), and every refusal is one that
path gives too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from typing import cast
from zlib import crc32

from orbitmq.errors import LocalProtocolError
from orbitmq.model.message import MessageConst
from orbitmq.protocol.message_codec import MAX_TOPIC_BYTES, MESSAGE_MAGIC_CODE, WritableBuffer
from orbitmq.protocol.names import is_legal_name
from orbitmq.protocol.properties import MAX_PROPERTIES_BYTES, PROPERTY_SEPARATOR, encode_properties
from orbitmq.store._fs import failpoints
from orbitmq.store.consume_queue import ConsumeQueue
from orbitmq.store.dispatch import (
    KEYS,
    ROLLBACK,
    SCHEDULE_TOPIC,
    TRANSACTION_MASK,
    UNIQ_KEY,
    Dispatcher,
    add_key_tokens,
)
from orbitmq.store.put_path import (
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    PREPARED_OR_ROLLBACK,
    Hosts,
    RecordBuilder,
    record_sizes,
)
from orbitmq.store.results import PutMessageRequest, PutResult, PutStatus, failed_put

_TAGS: str = MessageConst.TAGS
_DISPATCHED_KEYS = frozenset((_TAGS, KEYS, UNIQ_KEY))


@dataclass(slots=True)
class BatchPut:
    """Messages of one topic and queue sharing every field but flag, body and properties.

    ``flags``, ``bodies``, ``properties`` and ``encoded_properties`` are columns of one length,
    one entry per message; ``encoded_properties[i]`` is the property string as stored when
    the caller holds exactly ``encode_properties(properties[i])``, else None (see
    :attr:`PutMessageRequest.encoded_properties`).
    """

    topic: str
    queue_id: int
    flags: list[int]
    bodies: list[bytes]
    properties: list[dict[str, str]]
    encoded_properties: list[bytes | None]
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]
    # Properties every message is stored with (the broker's CLUSTER, MSG_REGION, TRACE_ON):
    # as ``{**properties[i], **stamps}``, a key the message has keeps its place, takes the value.
    # Never TAGS, KEYS or UNIQ_KEY: the ConsumeQueue and the index read each message's own.
    stamps: dict[str, str] = field(default_factory=dict)

    def requests(self) -> list[PutMessageRequest]:
        """The same messages one request each, stamped (for the per-message paths: timer routing)."""
        stamps = self.stamps
        return [
            PutMessageRequest(
                self.topic, self.queue_id, body, flag, {**properties, **stamps} if stamps else properties,
                self.sys_flag, self.born_timestamp, self.born_host, self.store_host,
                encoded_properties=None if stamps else encoded,
            )
            for flag, body, properties, encoded in zip(
                self.flags, self.bodies, self.properties, self.encoded_properties, strict=True
            )
        ]  # fmt: skip


class PreparedBatch:
    """A :class:`BatchPut` checked and encoded up to its offsets, ready for the store lock."""

    __slots__ = ("batch", "hosts", "last_size", "sizes", "sys_flag", "tails", "total_bytes")

    def __init__(self, batch: BatchPut, sys_flag: int, hosts: Hosts, sizes: list[int], tails: list[bytes]):
        self.batch = batch
        self.sys_flag = sys_flag
        self.hosts = hosts
        self.sizes = sizes
        self.tails = tails
        self.total_bytes = sum(sizes)
        self.last_size = sizes[-1]

    def pack(
        self, buffer: WritableBuffer, position: int, base_offset: int, queue_offset: int, store_timestamp: int
    ) -> tuple[int, list[int]]:
        """Write the records at ``position`` of a segment starting at commit-log ``base_offset``.

        Returns the position after the last record and each record's commit-log offset.
        """
        batch = self.batch
        born_bytes, store_bytes, _, fixed = self.hosts
        fixed_size = fixed.size
        pack_into = fixed.pack_into
        sys_flag, queue_id, born_timestamp = self.sys_flag, batch.queue_id, batch.born_timestamp
        born_port, store_port = batch.born_host[1], batch.store_host[1]
        step = 0 if sys_flag & PREPARED_OR_ROLLBACK else 1
        if not step:
            queue_offset = 0
        commit_log_offsets: list[int] = []
        add_offset = commit_log_offsets.append
        for body, flag, size, tail in zip(batch.bodies, batch.flags, self.sizes, self.tails, strict=True):
            commit_log_offset = base_offset + position
            add_offset(commit_log_offset)
            pack_into(
                buffer, position, size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, queue_id, flag,
                queue_offset, commit_log_offset, sys_flag, born_timestamp, born_bytes, born_port,
                store_timestamp, store_bytes, store_port, 0, 0, len(body),
            )  # fmt: skip
            body_position = position + fixed_size
            tail_position = body_position + len(body)
            buffer[body_position:tail_position] = body
            position = tail_position + len(tail)
            buffer[tail_position:position] = tail
            queue_offset += step
        return position, commit_log_offsets

    def dispatch(
        self, dispatcher: Dispatcher, queue: ConsumeQueue, commit_log_offsets: list[int], store_timestamp: int
    ) -> None:
        """Buffer the ConsumeQueue entries and index the keys of the records :meth:`pack` wrote."""
        properties_column = self.batch.properties
        sys_flag = self.sys_flag
        topic = queue.topic
        # Whole-column steps (map, zip, compress run in C); the per-message loops below serve
        # the batches that need them: messages with TAGS or KEYS, SCHEDULE_TOPIC_XXXX.
        if not sys_flag & PREPARED_OR_ROLLBACK:
            if topic == SCHEDULE_TOPIC or any(map(dict.__contains__, properties_column, repeat(_TAGS))):
                tags_code_for = dispatcher.tags_code_for
                codes = [
                    tags_code_for(topic, properties, store_timestamp)
                    if _TAGS in properties or topic == SCHEDULE_TOPIC
                    else 0
                    for properties in properties_column
                ]
            else:
                codes = [0] * len(properties_column)
            fields = list(chain.from_iterable(zip(commit_log_offsets, self.sizes, codes, strict=True)))
            queue.put_many(queue.max_queue_offset, fields)
        failpoints.hit("dispatch.after_cq_write")
        index = dispatcher.index
        if index is None or sys_flag & TRANSACTION_MASK == ROLLBACK:
            return
        unique_keys = list(map(dict.get, properties_column, repeat(UNIQ_KEY)))
        if any(map(dict.__contains__, properties_column, repeat(KEYS))):
            tokens: list[str] = []
            token_offsets: list[int] = []
            for properties, unique_key, commit_log_offset in zip(
                properties_column, unique_keys, commit_log_offsets, strict=True
            ):
                if unique_key:
                    tokens.append(unique_key)
                    token_offsets.append(commit_log_offset)
                user_keys = properties.get(KEYS)
                if user_keys:
                    add_key_tokens(user_keys, commit_log_offset, tokens, token_offsets)
        elif all(unique_keys):
            tokens, token_offsets = cast(list[str], unique_keys), list(commit_log_offsets)
        else:
            tokens, token_offsets = (
                cast(list[str], list(compress(unique_keys, unique_keys))),
                list(compress(commit_log_offsets, unique_keys)),
            )
        if tokens:
            index.put_tokens(topic, tokens, token_offsets, store_timestamp)


def prepare_batch(builder: RecordBuilder, batch: BatchPut) -> PreparedBatch | PutResult:
    """The batch checked and encoded up to its offsets, or the refusal ``prepare`` would give.

    The checks run over whole columns; when one fails, :meth:`RecordBuilder.prepare` of the
    batch's requests words the refusal, so it names the same first fault, in the same words.
    """
    topic, queue_id = batch.topic, batch.queue_id
    bodies, flags = batch.bodies, batch.flags
    count = len(bodies)
    if not count or not count == len(flags) == len(batch.properties) == len(batch.encoded_properties):
        return failed_put(
            PutStatus.MESSAGE_ILLEGAL, f"a batch for {topic} needs one flag, body and properties each"
        )
    try:
        if not (
            is_legal_name(topic, MAX_TOPIC_BYTES)
            and 0 <= queue_id <= INT_MAX
            and INT_MIN <= batch.sys_flag <= INT_MAX
            and LONG_MIN <= batch.born_timestamp <= LONG_MAX
            and max(map(len, bodies)) <= builder.body_max
            and INT_MIN <= min(flags) <= max(flags) <= INT_MAX
        ):
            return _refusal(builder, batch)
        hosts = builder.hosts(batch.born_host, batch.store_host)
        encoded = _stamped_property_strings(batch)
    except (LocalProtocolError, UnicodeEncodeError):
        return _refusal(builder, batch)
    properties_lengths = list(map(len, encoded))
    if max(properties_lengths) > MAX_PROPERTIES_BYTES:
        return _refusal(builder, batch)
    topic_bytes = topic.encode("ascii")
    topic_head = bytes((len(topic_bytes),)) + topic_bytes
    sys_flag, sizes = record_sizes(batch.sys_flag, hosts, len(topic_bytes), bodies, properties_lengths)
    # TOPICLEN + topic + PROPERTIESLEN per distinct property length (a batch has few).
    heads = {length: topic_head + length.to_bytes(2, "big") for length in set(properties_lengths)}
    tails = [
        heads[properties_len] + properties_bytes
        for properties_len, properties_bytes in zip(properties_lengths, encoded, strict=True)
    ]
    return PreparedBatch(batch, sys_flag, hosts, sizes, tails)


def _stamped_property_strings(batch: BatchPut) -> list[bytes]:
    """Each message's stored property string: its own, stamped (see :attr:`BatchPut.stamps`).

    A message whose string the caller encoded and that has none of the stamps' keys is that
    string with the encoded stamps appended; any other is encoded from its stamped mapping.

    Raises:
        LocalProtocolError: a key or value holds a separator.
        UnicodeEncodeError: a key or value is not encodable (a lone surrogate).
        ValueError: the stamps name TAGS, KEYS or UNIQ_KEY (a caller's mistake).
    """
    stamps = batch.stamps
    if not stamps:
        return [
            properties_bytes
            if properties_bytes is not None
            else encode_properties(properties).encode("utf-8")
            for properties, properties_bytes in zip(batch.properties, batch.encoded_properties, strict=True)
        ]
    if not _DISPATCHED_KEYS.isdisjoint(stamps):
        raise ValueError(f"batch stamps {sorted(stamps)} name a key the dispatch reads per message")
    stamp_tail = (PROPERTY_SEPARATOR + encode_properties(stamps)).encode("utf-8")
    stamp_keys = frozenset(stamps)
    return [
        (properties_bytes + stamp_tail if properties_bytes else stamp_tail[1:])
        if properties_bytes is not None and stamp_keys.isdisjoint(properties)
        else encode_properties({**properties, **stamps}).encode("utf-8")
        for properties, properties_bytes in zip(batch.properties, batch.encoded_properties, strict=True)
    ]


def _refusal(builder: RecordBuilder, batch: BatchPut) -> PutResult:
    """The refusal :meth:`RecordBuilder.prepare` gives the batch's requests (a check failed)."""
    refused = builder.prepare(batch.requests())
    if isinstance(refused, PutResult):
        return refused
    # Unreachable while the column checks are those of prepare; refuse rather than guess.
    return failed_put(PutStatus.MESSAGE_ILLEGAL, f"{batch.topic}/{batch.queue_id}: the batch failed a check")
