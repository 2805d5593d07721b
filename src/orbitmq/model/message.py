"""Messages as values.

:class:`Message` is what a producer builds (topic, body, flag, properties);
:class:`MessageExt` adds what the broker assigns when it stores one (queue, offsets,
hosts, timestamps). Tags, keys, delay level and the unique key are properties, as in
RocketMQ, with typed accessors here.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field


class MessageConst:
    """Property keys with a meaning to the broker or clients (remoting-protocol §3.3)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME = "RECONSUME_TIME"
    MSG_REGION = "MSG_REGION"
    TRACE_SWITCH = "TRACE_ON"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIME = "CONSUME_START_TIME"
    TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    CLUSTER = "CLUSTER"
    SHARDING_KEY = "__SHARDINGKEY"  # FIFO message group (RocketMQ 5 PROPERTY_SHARDING_KEY)
    START_DELIVER_TIME = "__STARTDELIVERTIME"
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    CORRELATION_ID = "CORRELATION_ID"
    MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    MESSAGE_TTL = "TTL"
    MESSAGE_TYPE = "MSG_TYPE"
    REPLY_MESSAGE_FLAG = "reply"
    REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"  # a recall marker: cancels the timed message it names
    POP_CK = "POP_CK"  # receipt handle of a popped message (set by the client from the pop answer)
    BORN_HOST = "__BORNHOST"  # born host of a message sent through the gRPC proxy
    BORN_TIMESTAMP = "BORN_TIMESTAMP"
    TRACE_CONTEXT = "TRACE_CONTEXT"


class SysFlag:
    """Message sysFlag bits (remoting-protocol §3.2)."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    TRANSACTION_MASK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20


@dataclass(slots=True)
class Message:
    """A message as a producer builds it."""

    topic: str
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        self._set(MessageConst.TAGS, value)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(MessageConst.KEYS, "")
        return [key for key in raw.split(" ") if key]

    @keys.setter
    def keys(self, value: str | list[str] | None) -> None:
        if isinstance(value, list):
            value = " ".join(value)
        self._set(MessageConst.KEYS, value or None)

    @property
    def delay_level(self) -> int:
        raw = self.properties.get(MessageConst.DELAY_TIME_LEVEL)
        try:
            return int(raw) if raw else 0
        except ValueError:
            return 0

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        self._set(MessageConst.DELAY_TIME_LEVEL, str(level) if level > 0 else None)

    @property
    def deliver_time_ms(self) -> int | None:
        """Absolute delivery time (``TIMER_DELIVER_MS``, epoch ms) of a timed message."""
        raw = self.properties.get(MessageConst.TIMER_DELIVER_MS)
        return int(raw) if raw and len(raw) < 20 and raw.isascii() and raw.isdigit() else None

    @deliver_time_ms.setter
    def deliver_time_ms(self, epoch_ms: int | None) -> None:
        self._set(MessageConst.TIMER_DELIVER_MS, str(epoch_ms) if epoch_ms is not None else None)

    @property
    def delay_ms(self) -> int | None:
        """Delivery delay counted from the broker's receipt (``TIMER_DELAY_MS``)."""
        raw = self.properties.get(MessageConst.TIMER_DELAY_MS)
        return int(raw) if raw and len(raw) < 20 and raw.isascii() and raw.isdigit() else None

    @delay_ms.setter
    def delay_ms(self, delay_ms: int | None) -> None:
        self._set(MessageConst.TIMER_DELAY_MS, str(delay_ms) if delay_ms is not None else None)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def _set(self, key: str, value: str | None) -> None:
        if value is None:
            self.properties.pop(key, None)
        else:
            self.properties[key] = value


@dataclass(slots=True)
class MessageExt(Message):
    """A stored message: a :class:`Message` plus what the broker assigned.

    ``decode_error`` is set when the consumer could not decode the body (its sysFlag says
    compressed, but it does not inflate): the message is still delivered, with ``body`` the
    stored bytes as they are, so a consumer can dead-letter or skip it and go on.
    """

    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    store_size: int = 0
    decode_error: str | None = None

    @property
    def msg_id(self) -> str:
        """What clients show as the message id: UNIQ_KEY when present, else the offsetMsgId."""
        return self.uniq_key or self.offset_msg_id

    @property
    def offset_msg_id(self) -> str:
        """Broker id: store host address, port and commit-log offset in uppercase hex.

        32 digits for an IPv4 store host, 56 for an IPv6 one (remoting-protocol §4.2).
        """
        host, port = self.store_host
        octets = ipaddress.ip_address(host).packed
        return (octets + port.to_bytes(4, "big") + self.commit_log_offset.to_bytes(8, "big")).hex().upper()


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker."""

    topic: str
    broker_name: str
    queue_id: int
