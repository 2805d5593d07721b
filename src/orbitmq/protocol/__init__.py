"""The remoting protocol, sans-IO: bytes in, values out. No sockets, no files, no asyncio."""

from orbitmq.protocol.batch import BatchItem, decode_batch, encode_batch
from orbitmq.protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.frame import MAX_FRAME_BYTES, FrameDecoder
from orbitmq.protocol.message_id import (
    OffsetMsgId,
    UniqKeyGenerator,
    decode_offset_msg_id,
    encode_offset_msg_id,
)

__all__ = [
    "MAX_FRAME_BYTES",
    "BatchItem",
    "FrameDecoder",
    "LanguageCode",
    "OffsetMsgId",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "UniqKeyGenerator",
    "decode_batch",
    "decode_command",
    "decode_offset_msg_id",
    "encode_batch",
    "encode_offset_msg_id",
]
