"""The append half of a put: validate and pre-encode messages, then pack them into the log.

A put runs in two steps so that the store lock covers memory work only:

1. :meth:`RecordBuilder.prepare` (no lock) checks sizes and names and encodes what does not
   depend on offsets: each record's length, sysFlag and tail (topic + property string).
   Every size and flag it writes is derived from the bytes it writes: the IPv6 host bits of
   sysFlag come from the width of the address bytes, never from the caller's sysFlag, so
   TOTALSIZE always agrees with the record. A value the record's fixed-width fields cannot
   hold, or a topic or queue id that is not a safe directory name, is refused
   (MESSAGE_ILLEGAL) before anything is written: the store defends its files itself, whatever
   its caller checked.
2. :meth:`RecordBuilder.pack` (store lock held) writes every record of the batch straight into
   the mapped segment, in one pass, patching in the offsets and the store time.

3. :func:`dispatch_new` (store lock held) buffers the ConsumeQueue entries and hands the
   whole batch's keys to the index in one call, rather than one call per message; the index
   queues them and writes many puts' keys at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from struct import Struct
from zlib import crc32

from orbitmq.errors import LocalProtocolError
from orbitmq.model.message import SysFlag
from orbitmq.protocol.message_codec import (
    MAX_TOPIC_BYTES,
    MESSAGE_MAGIC_CODE,
    STORED_FIXED_BYTES_IPV4,
    WritableBuffer,
    fixed_part_struct,
    host_bytes,
    stored_message_size,
)
from orbitmq.protocol.names import NAME_CHARSET, is_legal_name, shorten
from orbitmq.protocol.properties import MAX_PROPERTIES_BYTES, encode_properties
from orbitmq.store._fs import failpoints
from orbitmq.store.consume_queue import ConsumeQueue
from orbitmq.store.dispatch import KEYS, ROLLBACK, TRANSACTION_MASK, UNIQ_KEY, Dispatcher, add_key_tokens
from orbitmq.store.results import PutMessageRequest, PutResult, PutStatus, failed_put

# Java's int and long ranges: header fields outside them are refused.
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

# PREPARED (0x4) and ROLLBACK (0xC) share bit 0x4; NOT (0) and COMMIT (0x8) lack it.
PREPARED_OR_ROLLBACK = SysFlag.TRANSACTION_PREPARED_TYPE
HOST_V6_FLAGS = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6
_HOST_CACHE_MAX = 4096

# (born host bytes, store host bytes, IPv6 sysFlag bits, struct of the fixed fields up to
# BODYLEN for these host widths) of one host pair.
Hosts = tuple[bytes, bytes, int, Struct]


# One validated message, encoded up to its offsets: (request, record length in bytes,
# tail = TOPICLEN + topic + PROPERTIESLEN + properties, sysFlag, hosts). A plain tuple:
# one is built per message on the hot path.
Prepared = tuple[PutMessageRequest, int, bytes, int, Hosts]


class RecordBuilder:
    """Validates, pre-encodes and packs the records of puts (one per store)."""

    def __init__(self, max_message_size_bytes: int) -> None:
        self._body_max = max_message_size_bytes
        self._hosts: dict[tuple[tuple[str, int], tuple[str, int]], Hosts] = {}

    def prepare(self, requests: Sequence[PutMessageRequest]) -> list[Prepared] | PutResult:
        """The batch encoded up to its offsets, or a refusal (MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED)."""
        first = requests[0]
        topic, queue_id = first.topic, first.queue_id
        if not is_legal_name(topic, MAX_TOPIC_BYTES):
            return failed_put(
                PutStatus.MESSAGE_ILLEGAL,
                f"topic {shorten(topic)!r} must be 1..127 characters from {NAME_CHARSET}",
            )
        if not 0 <= queue_id <= INT_MAX:
            return failed_put(
                PutStatus.MESSAGE_ILLEGAL, f"queue id {queue_id} of {topic} is not 0..{INT_MAX}"
            )
        topic_bytes = topic.encode("ascii")
        topic_len = len(topic_bytes)
        topic_head = bytes((topic_len,)) + topic_bytes
        # Record size without IPv6 hosts: the fixed part, then the body and the tail (the
        # tail's own length fields included).
        base_size = STORED_FIXED_BYTES_IPV4 + 1 + topic_len + 2
        prepared: list[Prepared] = []
        append = prepared.append
        body_max = self._body_max
        # A batch's messages nearly always share one host pair: reuse it by identity.
        last_pair: tuple[tuple[str, int], tuple[str, int]] | None = None
        hosts: Hosts | None = None
        for request in requests:
            if request.topic != topic or request.queue_id != queue_id:
                return failed_put(PutStatus.MESSAGE_ILLEGAL, f"a batch must target one queue ({topic})")
            body_len = len(request.body)
            if body_len > body_max:
                return failed_put(
                    PutStatus.MESSAGE_ILLEGAL,
                    f"body of {body_len} bytes exceeds {body_max} ({topic}/{queue_id})",
                )
            if not (
                INT_MIN <= request.flag <= INT_MAX
                and INT_MIN <= request.sys_flag <= INT_MAX
                and INT_MIN <= request.reconsume_times <= INT_MAX
                and LONG_MIN <= request.born_timestamp <= LONG_MAX
                and LONG_MIN <= request.prepared_transaction_offset <= LONG_MAX
                and (request.tags_code is None or LONG_MIN <= request.tags_code <= LONG_MAX)
            ):
                return failed_put(PutStatus.MESSAGE_ILLEGAL, f"{topic}/{queue_id}: {_range_problem(request)}")
            try:
                properties_bytes = request.encoded_properties
                if properties_bytes is None:
                    properties_bytes = encode_properties(request.properties).encode("utf-8")
                pair = (request.born_host, request.store_host)
                if hosts is None or pair != last_pair:
                    last_pair = pair
                    hosts = self._hosts.get(pair)
                    if hosts is None:
                        hosts = self._resolve_hosts(request.born_host, request.store_host)
            except (LocalProtocolError, UnicodeEncodeError) as exc:
                return failed_put(PutStatus.MESSAGE_ILLEGAL, f"{topic}: {shorten(str(exc))}")
            properties_len = len(properties_bytes)
            if properties_len > MAX_PROPERTIES_BYTES:
                return failed_put(
                    PutStatus.PROPERTIES_SIZE_EXCEEDED,
                    f"properties of {properties_len} bytes exceed {MAX_PROPERTIES_BYTES} ({topic})",
                )
            # The host bits describe the address bytes written below, whatever the caller said.
            sys_flag = (request.sys_flag & ~HOST_V6_FLAGS) | hosts[2]
            append(
                (
                    request,
                    stored_message_size(body_len, topic_len, properties_len, sys_flag)
                    if sys_flag & HOST_V6_FLAGS
                    else base_size + body_len + properties_len,
                    topic_head + properties_len.to_bytes(2, "big") + properties_bytes,
                    sys_flag,
                    hosts,
                )
            )
        return prepared

    @property
    def body_max(self) -> int:
        """The largest body a record may carry (bytes)."""
        return self._body_max

    def hosts(self, born_host: tuple[str, int], store_host: tuple[str, int]) -> Hosts:
        """The encoded host pair (cached).

        Raises:
            LocalProtocolError: a host is not a numeric address or a port is not 0..65535.
        """
        hosts = self._hosts.get((born_host, store_host))
        if hosts is None:
            hosts = self._resolve_hosts(born_host, store_host)
        return hosts

    def _resolve_hosts(self, born_host: tuple[str, int], store_host: tuple[str, int]) -> Hosts:
        for _, port in (born_host, store_host):
            if not 0 <= port <= 0xFFFF:
                raise LocalProtocolError(f"port {port} is not 0..65535")
        born_bytes, store_bytes = host_bytes(born_host[0]), host_bytes(store_host[0])
        flags = (SysFlag.BORNHOST_V6 if len(born_bytes) == 16 else 0) | (
            SysFlag.STOREHOST_V6 if len(store_bytes) == 16 else 0
        )
        hosts = (born_bytes, store_bytes, flags, fixed_part_struct(len(born_bytes), len(store_bytes)))
        if len(self._hosts) > _HOST_CACHE_MAX:
            self._hosts.clear()
        self._hosts[(born_host, store_host)] = hosts
        return hosts


def _range_problem(request: PutMessageRequest) -> str:
    """Which numeric field of ``request`` does not fit its fixed-width record field."""
    for name, value, low, high in (
        ("flag", request.flag, INT_MIN, INT_MAX),
        ("sysFlag", request.sys_flag, INT_MIN, INT_MAX),
        ("reconsumeTimes", request.reconsume_times, INT_MIN, INT_MAX),
        ("bornTimestamp", request.born_timestamp, LONG_MIN, LONG_MAX),
        ("preparedTransactionOffset", request.prepared_transaction_offset, LONG_MIN, LONG_MAX),
        ("tagsCode", request.tags_code or 0, LONG_MIN, LONG_MAX),
    ):
        if not low <= value <= high:
            return f"{name} {value} does not fit [{low}, {high}]"
    return "a field is out of range"


class PreparedRequests:
    """Records :meth:`RecordBuilder.prepare` encoded, with :class:`PreparedBatch`'s interface.

    The store's put runs either under its lock: ``pack`` then ``dispatch``.
    """

    __slots__ = ("last_size", "records", "total_bytes")

    def __init__(self, records: list[Prepared]) -> None:
        self.records = records
        self.total_bytes = sum([record[1] for record in records]) if len(records) > 1 else records[0][1]
        self.last_size = records[-1][1]

    def pack(
        self, buffer: WritableBuffer, position: int, base_offset: int, queue_offset: int, store_timestamp: int
    ) -> tuple[int, list[int]]:
        """:func:`pack`."""
        return pack(buffer, position, base_offset, self.records, queue_offset, store_timestamp)

    def dispatch(
        self, dispatcher: Dispatcher, queue: ConsumeQueue, commit_log_offsets: list[int], store_timestamp: int
    ) -> None:
        """:func:`dispatch_new`."""
        dispatch_new(dispatcher, queue, self.records, commit_log_offsets, store_timestamp)


def pack_one(
    buffer: WritableBuffer,
    position: int,
    commit_log_offset: int,
    record: Prepared,
    queue_offset: int,
    store_timestamp: int,
) -> int:
    """:func:`pack` for a single record at ``commit_log_offset``; returns the position after it."""
    request, size, tail, sys_flag, hosts = record
    body = request.body
    fixed = hosts[3]
    fixed.pack_into(
        buffer, position, size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, request.queue_id,
        request.flag, 0 if sys_flag & PREPARED_OR_ROLLBACK else queue_offset, commit_log_offset,
        sys_flag, request.born_timestamp, hosts[0], request.born_host[1], store_timestamp, hosts[1],
        request.store_host[1], request.reconsume_times, request.prepared_transaction_offset,
        len(body),
    )  # fmt: skip
    body_position = position + fixed.size
    tail_position = body_position + len(body)
    buffer[body_position:tail_position] = body
    end_position = tail_position + len(tail)
    buffer[tail_position:end_position] = tail
    return end_position


def pack(
    buffer: WritableBuffer,
    position: int,
    base_offset: int,
    prepared: list[Prepared],
    queue_offset: int,
    store_timestamp: int,
) -> tuple[int, list[int]]:
    """Write the records at ``position`` of a segment starting at commit-log ``base_offset``.

    Records that take a queue offset get consecutive ones from ``queue_offset``. Returns the
    position after the last record and each record's commit-log offset.
    """
    commit_log_offsets: list[int] = []
    add_offset = commit_log_offsets.append
    # pack_stored_message_into inlined: one call less per record on the hottest loop.
    for request, size, tail, sys_flag, hosts in prepared:
        commit_log_offset = base_offset + position
        add_offset(commit_log_offset)
        body = request.body
        fixed = hosts[3]
        in_queue = not sys_flag & PREPARED_OR_ROLLBACK
        fixed.pack_into(
            buffer, position, size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, request.queue_id,
            request.flag, queue_offset if in_queue else 0, commit_log_offset, sys_flag,
            request.born_timestamp, hosts[0], request.born_host[1], store_timestamp, hosts[1],
            request.store_host[1], request.reconsume_times, request.prepared_transaction_offset,
            len(body),
        )  # fmt: skip
        body_position = position + fixed.size
        tail_position = body_position + len(body)
        buffer[body_position:tail_position] = body
        position = tail_position + len(tail)
        buffer[tail_position:position] = tail
        if in_queue:
            queue_offset += 1
    return position, commit_log_offsets


def dispatch_new(
    dispatcher: Dispatcher,
    queue: ConsumeQueue,
    prepared: list[Prepared],
    commit_log_offsets: list[int],
    store_timestamp: int,
) -> None:
    """Buffer the ConsumeQueue entries and index the keys of records :func:`pack` just wrote.

    Entries take consecutive queue offsets from the queue's current maximum, as ``pack``
    assigned them. The whole batch's keys go to the index in one call (one lock round trip),
    already split into tokens.
    """
    topic = queue.topic
    if len(prepared) == 1:
        _dispatch_one(dispatcher, queue, prepared[0], commit_log_offsets[0], store_timestamp)
        return
    tokens: list[str] = []
    token_offsets: list[int] = []
    fields: list[int] = []
    add_fields = fields.extend
    tags_code_for = dispatcher.tags_code_for
    for (request, size, _, sys_flag, _), commit_log_offset in zip(prepared, commit_log_offsets, strict=True):
        properties = request.properties
        if not sys_flag & PREPARED_OR_ROLLBACK:
            tags = request.tags_code
            if tags is None:
                tags = tags_code_for(topic, properties, store_timestamp)
            add_fields((commit_log_offset, size, tags))
        if sys_flag & TRANSACTION_MASK != ROLLBACK:
            unique_key = properties.get(UNIQ_KEY)
            if unique_key:
                tokens.append(unique_key)
                token_offsets.append(commit_log_offset)
            user_keys = properties.get(KEYS)
            if user_keys:
                add_key_tokens(user_keys, commit_log_offset, tokens, token_offsets)
    if len(fields) == 3:
        queue.put(queue.max_queue_offset, fields[0], fields[1], fields[2])
    elif fields:
        queue.put_many(queue.max_queue_offset, fields)
    failpoints.hit("dispatch.after_cq_write")
    index = dispatcher.index
    if tokens and index is not None:
        index.put_tokens(topic, tokens, token_offsets, store_timestamp)


def _dispatch_one(
    dispatcher: Dispatcher,
    queue: ConsumeQueue,
    record: Prepared,
    commit_log_offset: int,
    store_timestamp: int,
) -> None:
    """:func:`dispatch_new` for a single record (put_message), without the batch bookkeeping."""
    request, size, _, sys_flag, _ = record
    properties = request.properties
    if not sys_flag & PREPARED_OR_ROLLBACK:
        tags = request.tags_code
        if tags is None:
            tags = dispatcher.tags_code_for(queue.topic, properties, store_timestamp)
        queue.put(queue.max_queue_offset, commit_log_offset, size, tags)
    failpoints.hit("dispatch.after_cq_write")
    index = dispatcher.index
    if index is None or sys_flag & TRANSACTION_MASK == ROLLBACK:
        return
    unique_key = properties.get(UNIQ_KEY)
    user_keys = properties.get(KEYS)
    if user_keys:
        tokens = [unique_key] if unique_key else []
        offsets = [commit_log_offset] * len(tokens)
        add_key_tokens(user_keys, commit_log_offset, tokens, offsets)
        if tokens:
            index.put_tokens(queue.topic, tokens, offsets, store_timestamp)
    elif unique_key:
        index.put_tokens(queue.topic, [unique_key], [commit_log_offset], store_timestamp)
