"""The put of a batch send: messages of one queue that differ only in flag, body and properties.

A producer's batch shares its topic, queue, sysFlag, born timestamp, hosts and the broker's
stamps (CLUSTER, MSG_REGION, TRACE_ON); only each message's flag, body and properties differ. :class:`BatchPut` carries it that way, as
columns, so the broker builds no object per message and the store checks and packs the
shared fields once per batch rather than once per message:

1. :func:`prepare_batch` (no lock) runs :meth:`RecordBuilder.prepare`'s checks over whole
   columns, the shared fields once, and encodes each record's length and tail (topic +
   property string, taken as the caller encoded it when it did).
2. :meth:`PreparedBatch.pack` (store lock held) writes the records into the mapped segment
   with :func:`pack_records`, compiled in ``_record_pack.c`` when it built (see
   ``orbitmq/native.py``); the pure-Python :func:`pack_records_py` writes the same bytes.
3. :meth:`PreparedBatch.dispatch` (store lock held) buffers the ConsumeQueue entries and
   hands the batch's keys to the index, as :func:`~orbitmq.store.put_path.dispatch_new`.

The records are byte for byte those of :meth:`MessageStore.put_messages` over
:meth:`BatchPut.requests` (the same store timestamp given), and every refusal is one that
path gives too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain, compress
from struct import Struct
from typing import cast
from zlib import crc32

from orbitmq import native
from orbitmq.errors import LocalProtocolError
from orbitmq.model.message import MessageConst
from orbitmq.protocol.message_codec import (
    MAX_TOPIC_BYTES,
    MESSAGE_MAGIC_CODE,
    WritableBuffer,
    stored_message_size,
)
from orbitmq.protocol.names import is_legal_name
from orbitmq.protocol.properties import (
    MAX_PROPERTIES_BYTES,
    PROPERTY_SEPARATOR,
    decode_properties,
    encode_properties,
)
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
    HOST_V6_FLAGS,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    PREPARED_OR_ROLLBACK,
    Hosts,
    RecordBuilder,
)
from orbitmq.store.results import PutMessageRequest, PutResult, PutStatus, failed_put

_TAGS: str = MessageConst.TAGS
_DISPATCHED_KEYS = frozenset((_TAGS, KEYS, UNIQ_KEY))

# Values of UNIQ_KEY, TAGS and KEYS per message, one column each.
KeyColumns = tuple[list[str | None], list[str | None], list[str | None]]


@dataclass(slots=True)
class BatchPut:
    """Messages of one topic and queue sharing every field but flag, body and properties.

    ``flags``, ``bodies``, ``properties`` and ``encoded_properties`` are columns of one length,
    one entry per message; ``encoded_properties[i]`` is the property string as stored when
    the caller holds exactly ``encode_properties(properties[i])``, else None (see
    :attr:`PutMessageRequest.encoded_properties`). ``properties`` may be None when every
    message's string is encoded and its only keys are UNIQ_KEY, TAGS and KEYS (a plain batch,
    ``protocol/batch.py``); ``key_columns`` must then hold their values.
    """

    topic: str
    queue_id: int
    flags: list[int]
    bodies: list[bytes]
    properties: list[dict[str, str]] | None
    encoded_properties: list[bytes | None]
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]
    # Properties every message is stored with (the broker's CLUSTER, MSG_REGION, TRACE_ON):
    # as ``{**properties[i], **stamps}``, a key the message has keeps its place, takes the value.
    # Never TAGS, KEYS or UNIQ_KEY: the ConsumeQueue and the index read each message's own.
    stamps: dict[str, str] = field(default_factory=dict)
    # (UNIQ_KEY, TAGS, KEYS) values per message; read from ``properties`` when None.
    key_columns: KeyColumns | None = None

    def property_maps(self) -> list[dict[str, str]]:
        """Each message's own property mapping (decoded now when ``properties`` is None)."""
        if self.properties is not None:
            return self.properties
        return [
            decode_properties(encoded.decode("utf-8")) if encoded else {}
            for encoded in cast(list[bytes], self.encoded_properties)
        ]

    def dispatch_keys(self) -> KeyColumns:
        """The values of UNIQ_KEY, TAGS and KEYS, one column each."""
        if self.key_columns is not None:
            return self.key_columns
        maps = self.property_maps()
        return (
            [properties.get(UNIQ_KEY) for properties in maps],
            [properties.get(_TAGS) for properties in maps],
            [properties.get(KEYS) for properties in maps],
        )

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
                self.flags, self.bodies, self.property_maps(), self.encoded_properties, strict=True
            )
        ]  # fmt: skip


_PATCHED = Struct(">iiiiiqq")  # TOTALSIZE .. PHYSICALOFFSET, as _record_pack.c patches them
_PATCHED_BYTES = _PATCHED.size


def pack_records_py(
    buffer: WritableBuffer,
    position: int,
    template: bytes,
    base_offset: int,
    queue_offset: int,
    step: int,
    flags: list[int],
    bodies: list[bytes],
    topic_head: bytes,
    properties: list[bytes],
) -> tuple[int, list[int], list[int]]:
    """Write a batch's records at ``position`` of a segment starting at commit-log ``base_offset``.

    ``template`` is the first record's fixed part (TOTALSIZE..BODYLEN) with every shared field
    packed; each record is it with TOTALSIZE, BODYCRC, FLAG, QUEUEOFFSET (``queue_offset``,
    advanced by ``step``), PHYSICALOFFSET and BODYLEN set, then its body, ``topic_head``
    (TOPICLEN + topic), PROPERTIESLEN and its property string. Returns the position after the
    last record, each record's commit-log offset and its length. The pure-Python twin of
    ``_record_pack.pack_records``, which writes the same bytes.

    Raises:
        ValueError: the records do not fit the buffer (nothing is written), or a bad argument.
    """
    fixed_size = len(template)
    topic_size = len(topic_head)
    if fixed_size < _PATCHED_BYTES + 4 or step not in (0, 1) or position < 0:
        raise ValueError("pack_records: bad template, step or position")
    if not len(flags) == len(bodies) == len(properties):
        raise ValueError("pack_records: flags, bodies and properties differ in length")
    if max(map(len, properties), default=0) > MAX_PROPERTIES_BYTES:
        raise ValueError("pack_records: a property string exceeds 32767 bytes")
    base_size = fixed_size + topic_size + 2
    total = base_size * len(bodies) + sum(map(len, bodies)) + sum(map(len, properties))
    if position > len(buffer) or total > len(buffer) - position:
        raise ValueError(f"pack_records: {total} bytes at {position} do not fit a buffer of {len(buffer)}")
    _, magic, _, queue_id, _, _, _ = _PATCHED.unpack_from(template)
    shared = template[_PATCHED_BYTES : fixed_size - 4]
    offsets: list[int] = []
    sizes: list[int] = []
    for flag, body, text in zip(flags, bodies, properties, strict=True):
        body_size = len(body)
        size = base_size + body_size + len(text)
        commit_log_offset = base_offset + position
        offsets.append(commit_log_offset)
        sizes.append(size)
        _PATCHED.pack_into(
            buffer, position, size, magic, crc32(body) & 0x7FFFFFFF, queue_id, flag,
            queue_offset if step else 0, commit_log_offset,
        )  # fmt: skip
        body_position = position + fixed_size
        buffer[position + _PATCHED_BYTES : body_position] = shared + body_size.to_bytes(4, "big")
        tail_position = body_position + body_size
        buffer[body_position:tail_position] = body
        position += size
        buffer[tail_position:position] = topic_head + len(text).to_bytes(2, "big") + text
        queue_offset += step
    return position, offsets, sizes


PackRecords = Callable[
    [WritableBuffer, int, bytes, int, int, int, list[int], list[bytes], bytes, list[bytes]],
    tuple[int, list[int], list[int]],
]
_pack_module = native.load("orbitmq.store._record_pack")
pack_records: PackRecords = _pack_module.pack_records if _pack_module is not None else pack_records_py


class PreparedBatch:
    """A :class:`BatchPut` checked and encoded up to its offsets, ready for the store lock."""

    __slots__ = (
        "batch",
        "hosts",
        "last_size",
        "properties",
        "sizes",
        "sys_flag",
        "topic_head",
        "total_bytes",
    )

    def __init__(
        self, batch: BatchPut, sys_flag: int, hosts: Hosts, topic_head: bytes, properties: list[bytes]
    ) -> None:
        self.batch = batch
        self.sys_flag = sys_flag
        self.hosts = hosts
        self.topic_head = topic_head
        self.properties = properties
        base_size = stored_message_size(0, len(topic_head) - 1, 0, sys_flag)
        bodies = batch.bodies
        self.total_bytes = base_size * len(bodies) + sum(map(len, bodies)) + sum(map(len, properties))
        self.last_size = base_size + len(bodies[-1]) + len(properties[-1])
        self.sizes: list[int] = []  # each record's length, set by pack

    def pack(
        self, buffer: WritableBuffer, position: int, base_offset: int, queue_offset: int, store_timestamp: int
    ) -> tuple[int, list[int]]:
        """Write the records at ``position`` of a segment starting at commit-log ``base_offset``.

        Returns the position after the last record and each record's commit-log offset.
        """
        batch = self.batch
        born_bytes, store_bytes, _, fixed = self.hosts
        template = fixed.pack(
            0, MESSAGE_MAGIC_CODE, 0, batch.queue_id, 0, 0, 0, self.sys_flag, batch.born_timestamp,
            born_bytes, batch.born_host[1], store_timestamp, store_bytes, batch.store_host[1], 0, 0, 0,
        )  # fmt: skip
        step = 0 if self.sys_flag & PREPARED_OR_ROLLBACK else 1
        end, commit_log_offsets, self.sizes = pack_records(
            buffer, position, template, base_offset, queue_offset, step, batch.flags, batch.bodies,
            self.topic_head, self.properties,
        )  # fmt: skip
        return end, commit_log_offsets

    def dispatch(
        self, dispatcher: Dispatcher, queue: ConsumeQueue, commit_log_offsets: list[int], store_timestamp: int
    ) -> None:
        """Buffer the ConsumeQueue entries and index the keys of the records :meth:`pack` wrote."""
        batch = self.batch
        sys_flag = self.sys_flag
        topic = queue.topic
        unique_keys, tags, user_keys = batch.dispatch_keys()
        # Whole-column steps (map, zip, compress run in C); the per-message loops below serve
        # the batches that need them: messages with TAGS or KEYS, SCHEDULE_TOPIC_XXXX.
        if not sys_flag & PREPARED_OR_ROLLBACK:
            if topic == SCHEDULE_TOPIC:
                tags_code_for = dispatcher.tags_code_for
                codes = [
                    tags_code_for(topic, properties, store_timestamp) for properties in batch.property_maps()
                ]
            elif any(tags):
                codes = list(map(dispatcher.tag_code, tags))
            else:
                codes = [0] * len(tags)
            fields = list(chain.from_iterable(zip(commit_log_offsets, self.sizes, codes, strict=True)))
            queue.put_many(queue.max_queue_offset, fields)
        failpoints.hit("dispatch.after_cq_write")
        index = dispatcher.index
        if index is None or sys_flag & TRANSACTION_MASK == ROLLBACK:
            return
        if any(user_keys):
            tokens: list[str] = []
            token_offsets: list[int] = []
            for unique_key, keys, commit_log_offset in zip(
                unique_keys, user_keys, commit_log_offsets, strict=True
            ):
                if unique_key:
                    tokens.append(unique_key)
                    token_offsets.append(commit_log_offset)
                if keys:
                    add_key_tokens(keys, commit_log_offset, tokens, token_offsets)
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
    properties = batch.properties
    if (
        not count
        or not count == len(flags) == len(batch.encoded_properties)
        or (len(properties) != count if properties is not None else batch.key_columns is None)
    ):
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
    if max(map(len, encoded)) > MAX_PROPERTIES_BYTES:
        return _refusal(builder, batch)
    topic_bytes = topic.encode("ascii")
    # The host bits describe the address bytes written, whatever the caller said (as prepare).
    sys_flag = (batch.sys_flag & ~HOST_V6_FLAGS) | hosts[2]
    return PreparedBatch(batch, sys_flag, hosts, bytes((len(topic_bytes),)) + topic_bytes, encoded)


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
    if batch.properties is None:
        # Every string encoded, with keys the stamps never name (checked below).
        encoded = cast(list[bytes], batch.encoded_properties)
        if not stamps:
            return encoded
    elif not stamps:
        return [
            properties_bytes
            if properties_bytes is not None
            else encode_properties(properties).encode("utf-8")
            for properties, properties_bytes in zip(batch.properties, batch.encoded_properties, strict=True)
        ]
    if not _DISPATCHED_KEYS.isdisjoint(stamps):
        raise ValueError(f"batch stamps {sorted(stamps)} name a key the dispatch reads per message")
    stamp_tail = (PROPERTY_SEPARATOR + encode_properties(stamps)).encode("utf-8")
    if batch.properties is None:
        return [text + stamp_tail if text else stamp_tail[1:] for text in encoded]
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
