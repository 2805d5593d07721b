"""The remoting protocol, sans-IO: bytes in, values out. No sockets, no files, no asyncio."""

from orbitmq.protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.frame import MAX_FRAME_BYTES, FrameDecoder

__all__ = [
    "MAX_FRAME_BYTES",
    "FrameDecoder",
    "LanguageCode",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "decode_command",
]
