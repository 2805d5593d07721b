"""Length-prefixed framing of the remoting protocol (sans-IO).

Every command travels as one frame::

    offset  size  field
    0       4     length      int, bytes that follow this field (= 4 + header_len + body_len)
    4       4     header_word top byte: serialization type; low 24 bits: header_len
    8       H     header      JSON (type 0) or binary "ROCKETMQ" layout (type 1)
    8+H     rest  body        opaque bytes, length derived from the frame length

:class:`FrameDecoder` owns only the outer length field: it is fed whatever bytes the
socket produced and hands out complete frames (the bytes after the length field),
leaving a partial frame buffered. It never looks inside a frame.
"""

from __future__ import annotations

import struct

from orbitmq.errors import RemoteProtocolError

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Frames larger than this close the connection (RocketMQ's ``frameMaxLength``)."""

_LENGTH = struct.Struct(">i")
_VIEW_COPY_MIN_BYTES = 16 * 1024


class FrameDecoder:
    """Splits a byte stream into frames.

    Bytes go in with :meth:`feed`; complete frames come out of :meth:`frames`.
    A length that is negative, too small to hold the header word, or larger than
    ``max_frame_bytes`` raises :class:`RemoteProtocolError`; the decoder is unusable
    afterwards because the stream has lost its framing.
    """

    __slots__ = ("_buffer", "_max_frame_bytes", "_broken")

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max_frame_bytes = max_frame_bytes
        self._broken = False

    @property
    def buffered_bytes(self) -> int:
        """Bytes held back because they do not make a whole frame yet."""
        return len(self._buffer)

    @property
    def header_buffered(self) -> bool:
        """Whether the buffered partial frame's length, header word and header have all arrived."""
        buffer = self._buffer
        if len(buffer) < 8:
            return False
        header_word: int = _LENGTH.unpack_from(buffer, 4)[0]
        return len(buffer) >= 8 + (header_word & 0xFFFFFF)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add bytes from the stream and return every frame they complete, in order."""
        if self._broken:
            raise RemoteProtocolError("frame decoder used after a framing error")
        self._buffer += data
        frames: list[bytes] = []
        buffer = self._buffer
        position = 0
        end = len(buffer)
        while end - position >= 4:
            (length,) = _LENGTH.unpack_from(buffer, position)
            if length < 4 or length > self._max_frame_bytes:
                self._broken = True
                raise RemoteProtocolError(f"frame length {length} outside [4, {self._max_frame_bytes}]")
            if end - position - 4 < length:
                break
            start = position + 4
            if length < _VIEW_COPY_MIN_BYTES:
                frames.append(bytes(buffer[start : start + length]))
            else:
                # One copy through a view, not a bytearray slice and then bytes (a pull answer
                # is 256 KiB); the view is released at once, as the buffer is resized below.
                with memoryview(buffer) as view:
                    frames.append(view[start : start + length].tobytes())
            position = start + length
        if position:
            del buffer[:position]
        return frames
