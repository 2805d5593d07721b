"""Send requests and results, sans-IO: validation, compression, batch splitting, response parsing.

What a producer puts on the wire for one message (SEND_MESSAGE_V2, code 310, header fields
under one-letter names as the Java client sends them):

=================  ==========================================================================
header field       value
=================  ==========================================================================
producerGroup      the producer's group
topic, queueId     the chosen queue
defaultTopic       the auto-create template (``TBW102``) and ``defaultTopicQueueNums``
sysFlag            bit 0 when the body is zlib-compressed, bit 2 for a transactional half
bornTimestamp      ms since epoch when the request was built
flag               the message's user flag
properties         the message's properties plus ``UNIQ_KEY`` and ``WAIT=true``
batch              ``true`` for SEND_BATCH_MESSAGE (320), whose body is ``protocol.batch``
=================  ==========================================================================
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from orbitmq.errors import LocalProtocolError, MessageValidationError, RemoteProtocolError, error_for_code
from orbitmq.model.message import Message, MessageConst, MessageQueue, SysFlag
from orbitmq.protocol.batch import BatchBodyBuilder, batch_item_size
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import SendMessageRequestHeader
from orbitmq.protocol.message_id import UniqKeyGenerator
from orbitmq.protocol.properties import MAX_PROPERTIES_BYTES, NAME_VALUE_SEPARATOR, encode_properties

__all__ = [
    "PreparedBatch",
    "PreparedMessage",
    "SendResult",
    "SendStatus",
    "batch_send_results",
    "build_send_request",
    "parse_send_response",
    "prepare_batches",
    "prepare_message",
    "validate_message",
    "validate_topic",
]

TOPIC_NAME_MAX_CHARS = 127
_TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
_NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)


class SendStatus(Enum):
    """How a stored message fared with durability (every one of these means "stored")."""

    OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


_STATUS_BY_CODE: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass(slots=True)
class SendResult:
    """The broker's answer to one stored message.

    ``msg_id`` is the UNIQ_KEY the producer set (what consumers see as the message id);
    ``offset_msg_id`` is the broker's id, which encodes its address and commit-log offset.
    Not frozen: a batch makes one per message, and a frozen dataclass costs three times as
    much to construct.
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None
    trace_on: bool = True


# -- validation ---------------------------------------------------------------------------------


def validate_topic(topic: str) -> None:
    """RocketMQ's topic rules for sending.

    Raises:
        MessageValidationError: blank, longer than 127 characters, outside
            ``[%|a-zA-Z0-9_-]``, or a topic only brokers write to.
    """
    if not topic or not topic.strip():
        raise MessageValidationError("the topic is blank")
    if len(topic) > TOPIC_NAME_MAX_CHARS:
        raise MessageValidationError(
            f"topic {topic[:40]!r}... is longer than {TOPIC_NAME_MAX_CHARS} characters"
        )
    if not _TOPIC_PATTERN.match(topic):
        raise MessageValidationError(f"topic {topic!r} contains characters outside [%|a-zA-Z0-9_-]")
    if topic in _NOT_ALLOWED_SEND_TOPICS:
        raise MessageValidationError(f"sending to topic {topic!r} is not allowed (the broker owns it)")


def validate_message(message: Message, max_message_size_bytes: int) -> None:
    """Check ``message`` before any network work.

    Raises:
        MessageValidationError: bad topic, empty body, or body over ``max_message_size_bytes``.
    """
    validate_topic(message.topic)
    if not message.body:
        raise MessageValidationError(f"message to topic {message.topic} has an empty body")
    if len(message.body) > max_message_size_bytes:
        raise MessageValidationError(
            f"message body of {len(message.body)} bytes to topic {message.topic} exceeds "
            f"max_message_size_bytes {max_message_size_bytes}"
        )


# -- preparing ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PreparedMessage:
    """One message as it goes on the wire."""

    topic: str
    body: bytes
    flag: int
    sys_flag: int
    properties: str
    uniq_key: str


def prepare_message(
    message: Message,
    keys: UniqKeyGenerator,
    *,
    compress_over_bytes: int,
    compress_level: int = 5,
) -> PreparedMessage:
    """Stamp UNIQ_KEY (kept if already set) and WAIT, and compress a large body.

    The message's ``properties`` gain ``UNIQ_KEY`` (so the caller sees the id), its body is
    left as given; the compressed body lives only in the result.

    Raises:
        MessageValidationError: the property string is longer than 32767 bytes or contains a
            separator character.
    """
    properties = message.properties
    uniq_key = properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if not uniq_key:
        uniq_key = keys.next_key()
        properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq_key
    properties.setdefault(MessageConst.WAIT_STORE_MSG_OK, "true")
    body = message.body
    sys_flag = 0
    if len(body) > compress_over_bytes:
        compressed = zlib.compress(body, compress_level)
        if len(compressed) < len(body):
            body = compressed
            sys_flag |= SysFlag.COMPRESSED
    if properties.get(MessageConst.TRANSACTION_PREPARED, "").lower() == "true":
        sys_flag |= SysFlag.TRANSACTION_PREPARED_TYPE
    return PreparedMessage(message.topic, body, message.flag, sys_flag, _properties_text(message), uniq_key)


def _properties_text(message: Message) -> str:
    try:
        text = encode_properties(message.properties)
    except LocalProtocolError as exc:
        raise MessageValidationError(f"message to topic {message.topic}: {exc}") from exc
    if len(text.encode()) > MAX_PROPERTIES_BYTES:
        raise MessageValidationError(
            f"message properties to topic {message.topic} exceed {MAX_PROPERTIES_BYTES} bytes"
        )
    return text


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """Messages that travel in one SEND_BATCH_MESSAGE request."""

    topic: str
    body: bytes
    uniq_keys: list[str]


def prepare_batches(
    messages: Sequence[Message], keys: UniqKeyGenerator, max_request_bytes: int
) -> list[PreparedBatch]:
    """Encode ``messages`` (one topic) into batch bodies of at most ``max_request_bytes`` each.

    Batched bodies are never compressed and carry no WAIT property (the broker waits by
    default), as the Java client's batches. A message without properties (the common case)
    gets its UNIQ_KEY from one run of keys made for the whole list, and its property string
    written directly; any other is checked and encoded from its mapping.

    Raises:
        MessageValidationError: the list is empty, mixes topics, holds a delayed or retry
            message, or a message alone is larger than ``max_request_bytes``.
    """
    if not messages:
        raise MessageValidationError("a batch needs at least one message")
    topic = messages[0].topic
    validate_topic(topic)
    if topic.startswith("%RETRY%"):
        raise MessageValidationError(f"batch to retry topic {topic} is not supported")
    uniq_property = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    stamped = f"{uniq_property}{NAME_VALUE_SEPARATOR}"
    fresh_keys = keys.next_keys(len(messages))
    batches: list[PreparedBatch] = []
    builder = BatchBodyBuilder()
    batch_keys: list[str] = []
    for index, message in enumerate(messages):
        body = message.body
        properties = message.properties
        if properties or message.topic != topic or not body or len(body) > max_request_bytes:
            _check_batch_member(message, topic, index, max_request_bytes)
        if properties:
            uniq_key = properties.get(uniq_property)
            if not uniq_key:
                uniq_key = properties[uniq_property] = fresh_keys[index]
            try:
                text = encode_properties(properties)
            except LocalProtocolError as exc:
                raise MessageValidationError(f"batch message {index} to topic {topic}: {exc}") from exc
        else:
            uniq_key = properties[uniq_property] = fresh_keys[index]
            text = stamped + uniq_key
        encoded = text.encode()
        if builder.count and builder.size + batch_item_size(body, encoded) > max_request_bytes:
            batches.append(PreparedBatch(topic, builder.body(), batch_keys))
            builder, batch_keys = BatchBodyBuilder(), []
        try:
            builder.add(message.flag, body, encoded)
        except LocalProtocolError as exc:
            raise MessageValidationError(f"batch message {index} to topic {topic}: {exc}") from exc
        batch_keys.append(uniq_key)
    batches.append(PreparedBatch(topic, builder.body(), batch_keys))
    return batches


def _check_batch_member(message: Message, topic: str, index: int, max_request_bytes: int) -> None:
    if message.topic != topic:
        raise MessageValidationError(
            f"batch message {index} goes to topic {message.topic}, not {topic}; a batch has one topic"
        )
    if not message.body:
        raise MessageValidationError(f"batch message {index} to topic {topic} has an empty body")
    if len(message.body) > max_request_bytes:
        raise MessageValidationError(
            f"batch message {index} to topic {topic} has a body of {len(message.body)} bytes, "
            f"over {max_request_bytes}"
        )
    if message.properties.get(MessageConst.DELAY_TIME_LEVEL, "0") not in ("", "0"):
        raise MessageValidationError(f"batch message {index} to topic {topic} has a delay level")
    if topic.startswith("%RETRY%"):
        raise MessageValidationError(f"batch to retry topic {topic} is not supported")


# -- requests and responses ---------------------------------------------------------------------


_REPLY_MARKER = f"{MessageConst.MESSAGE_TYPE}\x01{MessageConst.REPLY_MESSAGE_FLAG}"


def build_send_request(
    group: str,
    queue: MessageQueue,
    *,
    body: bytes,
    flag: int = 0,
    sys_flag: int = 0,
    properties: str = "",
    batch: bool = False,
    default_topic: str = "TBW102",
    default_topic_queue_nums: int = 4,
    oneway: bool = False,
) -> RemotingCommand:
    """SEND_MESSAGE_V2, SEND_BATCH_MESSAGE when ``batch``, or SEND_REPLY_MESSAGE_V2 for a reply."""
    header = SendMessageRequestHeader(
        producer_group=group,
        topic=queue.topic,
        queue_id=queue.queue_id,
        default_topic=default_topic,
        default_topic_queue_nums=default_topic_queue_nums,
        sys_flag=sys_flag,
        born_timestamp=time.time_ns() // 1_000_000,
        flag=flag,
        properties=properties if not batch else f"{MessageConst.WAIT_STORE_MSG_OK}\x01true",
        reconsume_times=0,
        unit_mode=False,
        batch=batch,
    )
    if batch:
        code = RequestCode.SEND_BATCH_MESSAGE
    elif _REPLY_MARKER in properties and _REPLY_MARKER in properties.split("\x02"):
        # A reply of request-reply (MSG_TYPE=reply): the broker pushes it to the requester.
        code = RequestCode.SEND_REPLY_MESSAGE_V2
    else:
        code = RequestCode.SEND_MESSAGE_V2
    return RemotingCommand.request(code, header.to_v2_ext(), body, oneway=oneway)


def parse_send_response(response: RemotingCommand, queue: MessageQueue, uniq_key: str) -> SendResult:
    """The SendResult of a stored message, or the fault the response code stands for.

    Raises:
        BrokerResponseError: the broker did not store the message (its subclass by code).
        RemoteProtocolError: a success response lacks its header fields.
    """
    status = _STATUS_BY_CODE.get(response.code)
    if status is None:
        raise error_for_code(
            response.code,
            f"send to {queue.broker_name} queue {queue.topic}:{queue.queue_id}: {response.remark}",
        )
    ext = response.ext_fields
    try:
        queue_id = int(ext["queueId"])
        queue_offset = int(ext["queueOffset"])
        offset_msg_id = ext["msgId"]
    except (KeyError, ValueError) as exc:
        raise RemoteProtocolError(
            f"send response from {queue.broker_name} for topic {queue.topic} lacks {exc}"
        ) from None
    return SendResult(
        status=status,
        msg_id=uniq_key,
        offset_msg_id=offset_msg_id,
        message_queue=MessageQueue(queue.topic, queue.broker_name, queue_id),
        queue_offset=queue_offset,
        transaction_id=ext.get("transactionId"),
        region_id=ext.get(MessageConst.MSG_REGION),
        trace_on=ext.get(MessageConst.TRACE_SWITCH, "true").lower() != "false",
    )


def batch_send_results(result: SendResult, uniq_keys: list[str]) -> list[SendResult]:
    """One SendResult per message of a stored batch (stored consecutively in one queue)."""
    offset_ids = result.offset_msg_id.split(",")
    if len(offset_ids) != len(uniq_keys):
        offset_ids = [result.offset_msg_id] * len(uniq_keys)
    status, queue, first = result.status, result.message_queue, result.queue_offset
    transaction_id, region_id, trace_on = result.transaction_id, result.region_id, result.trace_on
    # Positional arguments, in SendResult's field order: a list of 1,000 is built per batch.
    return [
        SendResult(status, uniq_key, offset_id, queue, first + index, transaction_id, region_id, trace_on)
        for index, (uniq_key, offset_id) in enumerate(zip(uniq_keys, offset_ids, strict=True))
    ]
