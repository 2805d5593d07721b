"""The frames of RocketMQ's classic HA link (ha-replication §1), sans-IO.

The link is a plain TCP connection to the master's HA port, outside the remoting protocol:
no magic, no version, no handshake. Integers are big-endian and signed, like Java's.

Slave -> master, the *offset report* (8 bytes)::

    pos  size  field
    0    8     slave CommitLog max offset

The first report on a connection asks the master to stream from that offset; every later one
acknowledges the bytes below it. A report is also the slave's keep-alive.

Master -> slave, the *transfer frame* (12-byte header + body)::

    pos  size  field
    0    8     phyOffset   CommitLog offset of the body's first byte
    8    4     bodySize    bytes that follow (0: a keep-alive, phyOffset = next offset to send)
    12   n     body        raw CommitLog bytes, never crossing a segment end, not record-aligned

This module owns the bytes and nothing else: no sockets, no clock, no store. The decoders
take whatever arrived (a whole buffer, one byte, several frames and a half) and return the
complete frames; what is left stays buffered for the next :meth:`feed`. Bytes that can never
be a valid frame raise RemoteProtocolError (the connection must then be closed: its framing
is lost), never struct.error or IndexError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from orbitmq.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "OFFSET_REPORT_BYTES",
    "TRANSFER_BODY_BYTES_MAX",
    "TRANSFER_HEADER_BYTES",
    "OffsetReportDecoder",
    "TransferDecoder",
    "TransferFrame",
    "encode_offset_report",
    "encode_transfer_header",
]

_LONG = struct.Struct(">q")
_HEADER = struct.Struct(">qi")

OFFSET_REPORT_BYTES = _LONG.size
TRANSFER_HEADER_BYTES = _HEADER.size
TRANSFER_BODY_BYTES_MAX = 4 * 1024 * 1024
"""A body larger than this is refused: RocketMQ's slave reads into a 4 MiB buffer, so no
master sends more (its haTransferBatchSize defaults to 32 KiB)."""


def encode_offset_report(commit_log_offset: int) -> bytes:
    """The 8-byte report of a slave's max offset.

    Raises:
        LocalProtocolError: the offset is negative or does not fit a signed long.
    """
    if not 0 <= commit_log_offset < 1 << 63:
        raise LocalProtocolError(f"offset report {commit_log_offset} is not a non-negative long")
    return _LONG.pack(commit_log_offset)


def encode_transfer_header(commit_log_offset: int, body_bytes: int) -> bytes:
    """The 12-byte header of a transfer frame (``body_bytes`` 0 makes a keep-alive).

    Raises:
        LocalProtocolError: a negative offset, or a body size outside 0..TRANSFER_BODY_BYTES_MAX.
    """
    if not 0 <= commit_log_offset < 1 << 63:
        raise LocalProtocolError(f"transfer offset {commit_log_offset} is not a non-negative long")
    if not 0 <= body_bytes <= TRANSFER_BODY_BYTES_MAX:
        raise LocalProtocolError(
            f"transfer body of {body_bytes} bytes is outside 0..{TRANSFER_BODY_BYTES_MAX}"
        )
    return _HEADER.pack(commit_log_offset, body_bytes)


class OffsetReportDecoder:
    """Master side: the slave's stream of 8-byte reports, split into offsets."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[int]:
        """Every complete report in the bytes received so far, oldest first.

        Raises:
            RemoteProtocolError: a report is negative (no CommitLog offset is).
        """
        self._buffer += data
        complete = len(self._buffer) - len(self._buffer) % OFFSET_REPORT_BYTES
        if not complete:
            return []
        offsets = [value for (value,) in _LONG.iter_unpack(memoryview(self._buffer)[:complete])]
        del self._buffer[:complete]
        for offset in offsets:
            if offset < 0:
                raise RemoteProtocolError(f"offset report {offset} is negative")
        return offsets


@dataclass(frozen=True, slots=True)
class TransferFrame:
    """One transfer frame: raw CommitLog bytes from ``commit_log_offset`` (none: a keep-alive)."""

    commit_log_offset: int
    body: bytes

    @property
    def is_heartbeat(self) -> bool:
        return not self.body

    @property
    def end_offset(self) -> int:
        return self.commit_log_offset + len(self.body)


class TransferDecoder:
    """Slave side: the master's stream of transfer frames.

    ``body_bytes_max`` bounds what one frame may announce, so a corrupt or hostile header
    cannot make the slave buffer without limit.
    """

    __slots__ = ("_body_bytes_max", "_buffer")

    def __init__(self, body_bytes_max: int = TRANSFER_BODY_BYTES_MAX) -> None:
        self._buffer = bytearray()
        self._body_bytes_max = body_bytes_max

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[TransferFrame]:
        """Every complete frame in the bytes received so far, oldest first.

        Raises:
            RemoteProtocolError: a header with a negative offset, or a body size below 0 or
                above ``body_bytes_max``.
        """
        self._buffer += data
        frames: list[TransferFrame] = []
        buffer = self._buffer
        position = 0
        while len(buffer) - position >= TRANSFER_HEADER_BYTES:
            commit_log_offset, body_bytes = _HEADER.unpack_from(buffer, position)
            if commit_log_offset < 0:
                raise RemoteProtocolError(f"transfer frame at negative offset {commit_log_offset}")
            if not 0 <= body_bytes <= self._body_bytes_max:
                raise RemoteProtocolError(
                    f"transfer frame at offset {commit_log_offset} announces {body_bytes} bytes, "
                    f"outside 0..{self._body_bytes_max}"
                )
            end = position + TRANSFER_HEADER_BYTES + body_bytes
            if end > len(buffer):
                break
            frames.append(
                TransferFrame(commit_log_offset, bytes(buffer[position + TRANSFER_HEADER_BYTES : end]))
            )
            position = end
        if position:
            del buffer[:position]
        return frames


# -- controller mode's slave handshake (ha-replication.md §5.7, first frame only) ----------------

HANDSHAKE_BYTES = 16
_HANDSHAKE = struct.Struct(">ihhq")
_HANDSHAKE_STATE = 1


def encode_handshake(broker_id: int) -> bytes:
    """The slave's first 16 bytes in controller mode: state 1, two flags (0), its broker id.

    OrbitMQ's controller-mode link uses only this frame of AutoSwitchHA: the epoch list comes
    over remoting (GET_BROKER_EPOCH_CACHE) and the classic offset reports follow it.
    """
    return _HANDSHAKE.pack(_HANDSHAKE_STATE, 0, 0, broker_id)


def decode_handshake(data: bytes | bytearray | memoryview) -> int:
    """The broker id of a 16-byte handshake.

    Raises:
        RemoteProtocolError: not a handshake (wrong state or a negative id).
    """
    state, _, _, broker_id = _HANDSHAKE.unpack_from(data)
    if state != _HANDSHAKE_STATE or broker_id < 0:
        raise RemoteProtocolError(f"not a controller-mode handshake (state {state}, broker id {broker_id})")
    return int(broker_id)
