"""Row schema of the ``orbitmq`` source and the Arrow batches its readers yield.

One row per message, in the spirit of Spark's Kafka source:

============== ====================== =====================================================
column         Spark type             meaning
============== ====================== =====================================================
topic          string                 topic the message was read from
queue_id       int                    queue id within the broker
queue_offset   bigint                 the message's logical position in its queue
broker_name    string                 broker hosting the queue
msg_id         string                 UNIQ_KEY when the producer set one, else offsetMsgId
tags           string (nullable)      TAGS property
keys           string (nullable)      KEYS property (space-separated as on the wire)
properties     map<string,string>     every property, including TAGS, KEYS and UNIQ_KEY
body           binary                 the body, decompressed
born_timestamp timestamp              when the producer built the message
store_timestamp timestamp             when the broker stored it
reconsume_times int                   delivery attempts so far (0 for a fresh message)
============== ====================== =====================================================

``read()`` yields ``pyarrow.RecordBatch`` objects: Spark checks them against the declared
schema with a strict equality, so the Arrow schema is derived from the Spark one by
PySpark's own converter rather than written twice.

Read tasks fill the columns straight from pull bodies (:class:`ColumnBuilder`): a body is a
run of stored-message records (layout in ``orbitmq.protocol.message_codec``), and building
one ``MessageExt`` per record only to copy its fields into column lists again cost a read task
about a third of its time. The common record (IPv4 hosts) is parsed with one ``unpack_from``
of its 88 fixed bytes; anything else goes through the reference decoder, which also raises
the precise error for malformed bytes. Either path yields the same row.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from functools import lru_cache

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from orbitmq.model.message import MessageConst, MessageExt, SysFlag
from orbitmq.protocol.message_codec import MESSAGE_MAGIC_CODE, decode_stored_message
from orbitmq.protocol.properties import decode_properties
from orbitmq.protocol.tags import TagFilter

SOURCE_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("queue_id", IntegerType(), False),
        StructField("queue_offset", LongType(), False),
        StructField("broker_name", StringType(), False),
        StructField("msg_id", StringType(), False),
        StructField("tags", StringType(), True),
        StructField("keys", StringType(), True),
        StructField("properties", MapType(StringType(), StringType(), False), False),
        StructField("body", BinaryType(), False),
        StructField("born_timestamp", TimestampType(), False),
        StructField("store_timestamp", TimestampType(), False),
        StructField("reconsume_times", IntegerType(), False),
    ]
)

_US_PER_MS = 1000

# TOTALSIZE .. BODYLEN of a record whose born and store hosts are IPv4 (88 bytes).
_FIXED_V4 = struct.Struct(">iiiiiqqiq4siq4siiqi")
_FIXED_BYTES = _FIXED_V4.size
_HOST_V6_FLAGS = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6
_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX


@lru_cache(maxsize=1)
def source_arrow_schema() -> pa.Schema:
    """The Arrow schema Spark expects from ``read()`` (timestamps in UTC microseconds)."""
    return to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")


def messages_to_batch(messages: Sequence[MessageExt], broker_name: str) -> pa.RecordBatch:
    """One Arrow record batch of ``messages`` (all from queues of ``broker_name``)."""
    builder = ColumnBuilder(broker_name, TagFilter.parse("*"), 2**63 - 1)
    builder.add_messages(messages)
    return builder.flush()


def _properties_array(properties: Sequence[dict[str, str]], map_type: pa.DataType) -> pa.Array:
    """The map column from flat key and value lists plus offsets.

    Building it from one list of (key, value) pairs per row allocates a container per row and
    per pair; at tens of thousands of rows per batch that wakes Python's cyclic garbage
    collector over and over, which cost more than all other columns together.
    """
    offsets = [0]
    keys: list[str] = []
    values: list[str] = []
    for props in properties:
        keys.extend(props)
        values.extend(props.values())
        offsets.append(len(keys))
    return pa.MapArray.from_arrays(
        pa.array(offsets, type=pa.int32()),
        pa.array(keys, type=pa.string()),
        pa.array(values, type=pa.string()),
        type=map_type,
    )


class ColumnBuilder:
    """Accumulates rows of one queue, from pull bodies or messages, into Arrow batches.

    Records at or beyond ``end_offset`` and records whose tag does not match ``tag_filter``
    (the broker filters by tag hash, which can collide) are skipped.
    """

    def __init__(self, broker_name: str, tag_filter: TagFilter, end_offset: int) -> None:
        self.broker_name = broker_name
        self.tag_filter = tag_filter
        self.end_offset = end_offset
        self._topics: dict[bytes, str] = {}
        self._reset()

    def _reset(self) -> None:
        self.topic: list[str] = []
        self.queue_id: list[int] = []
        self.queue_offset: list[int] = []
        self.msg_id: list[str] = []
        self.properties: list[dict[str, str]] = []
        self.body: list[bytes] = []
        self.born_us: list[int] = []
        self.store_us: list[int] = []
        self.reconsume_times: list[int] = []

    def __len__(self) -> int:
        return len(self.queue_offset)

    def add_pull_body(self, body: bytes) -> None:
        """Add every record of a pull body.

        Raises:
            RemoteProtocolError: a record is malformed or truncated.
        """
        unpack = _FIXED_V4.unpack_from
        length = len(body)
        position = 0
        while position < length:
            if position + _FIXED_BYTES > length:
                position = self._add_decoded(body, position)
                continue
            (
                total_size, magic, _crc, queue_id, _flag, queue_offset, commit_log_offset, sys_flag,
                born_ms, _born_ip, _born_port, store_ms, store_ip, store_port,
                reconsume_times, _prepared, body_len,
            ) = unpack(body, position)  # fmt: skip
            end = position + total_size
            topic_at = position + _FIXED_BYTES + body_len
            malformed = magic != MESSAGE_MAGIC_CODE or body_len < 0 or end > length or topic_at >= end
            if malformed or sys_flag & _HOST_V6_FLAGS:
                position = self._add_decoded(body, position)
                continue
            properties_at = topic_at + 3 + body[topic_at]
            if (
                properties_at > end
                or properties_at + int.from_bytes(body[properties_at - 2 : properties_at], "big") != end
            ):
                position = self._add_decoded(body, position)
                continue
            position = end
            if queue_offset >= self.end_offset:
                continue
            properties = decode_properties(body[properties_at:end].decode())
            if not self.tag_filter.matches_tag(properties.get(MessageConst.TAGS)):
                continue
            payload = body[topic_at - body_len : topic_at]
            if sys_flag & SysFlag.COMPRESSED:
                payload = zlib.decompress(payload)
            topic_bytes = body[topic_at + 1 : properties_at - 2]
            topic = self._topics.get(topic_bytes)
            if topic is None:
                topic = self._topics[topic_bytes] = topic_bytes.decode()
            msg_id = properties.get(_UNIQ_KEY)
            if msg_id is None:  # the broker's offsetMsgId: store IPv4, port, commit-log offset
                msg_id = (store_ip + store_port.to_bytes(4) + commit_log_offset.to_bytes(8)).hex().upper()
            self.topic.append(topic)
            self.queue_id.append(queue_id)
            self.queue_offset.append(queue_offset)
            self.msg_id.append(msg_id)
            self.properties.append(properties)
            self.body.append(payload)
            self.born_us.append(born_ms * _US_PER_MS)
            self.store_us.append(store_ms * _US_PER_MS)
            self.reconsume_times.append(reconsume_times)

    def _add_decoded(self, body: bytes, position: int) -> int:
        message, position = decode_stored_message(body, position, decompress=True)
        self.add_messages([message])
        return position

    def add_messages(self, messages: Sequence[MessageExt]) -> None:
        """Add decoded messages (the same filters apply)."""
        for msg in messages:
            if msg.queue_offset >= self.end_offset or not self.tag_filter.matches_tag(msg.tags):
                continue
            self.topic.append(msg.topic)
            self.queue_id.append(msg.queue_id)
            self.queue_offset.append(msg.queue_offset)
            self.msg_id.append(msg.msg_id)
            self.properties.append(msg.properties)
            self.body.append(msg.body)
            self.born_us.append(msg.born_timestamp * _US_PER_MS)
            self.store_us.append(msg.store_timestamp * _US_PER_MS)
            self.reconsume_times.append(msg.reconsume_times)

    def flush(self) -> pa.RecordBatch:
        """The rows added since the last flush, as one batch (then start empty)."""
        schema = source_arrow_schema()
        props = self.properties
        tags_key, keys_key = MessageConst.TAGS, MessageConst.KEYS
        columns = [
            pa.array(self.topic, type=pa.string()),
            pa.array(self.queue_id, type=pa.int32()),
            pa.array(self.queue_offset, type=pa.int64()),
            pa.array([self.broker_name] * len(props), type=pa.string()),
            pa.array(self.msg_id, type=pa.string()),
            pa.array([p.get(tags_key) for p in props], type=pa.string()),
            pa.array([p.get(keys_key) for p in props], type=pa.string()),
            _properties_array(props, schema.field("properties").type),
            pa.array(self.body, type=pa.binary()),
            pa.array(self.born_us, type=schema.field("born_timestamp").type),
            pa.array(self.store_us, type=schema.field("store_timestamp").type),
            pa.array(self.reconsume_times, type=pa.int32()),
        ]
        self._reset()
        return pa.RecordBatch.from_arrays(columns, schema=schema)


def check_write_schema(names: Sequence[str]) -> None:
    """Reject a DataFrame the sink cannot send.

    Raises:
        ConfigError: no ``body`` column.
    """
    from orbitmq.errors import ConfigError

    if "body" not in names:
        raise ConfigError(f"writing to orbitmq needs a body column (got columns {sorted(names)})")
