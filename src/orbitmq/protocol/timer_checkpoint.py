"""GET_TIMER_CHECK_POINT's body: RocketMQ's ``TimerCheckpoint.encode`` (sans-IO).

Big-endian longs, as Java's ByteBuffer writes them::

    0   lastReadTimeMs           how far the master's timer has delivered (its dequeue time)
    8   lastTimerLogFlushPos     the master's timer log position (OrbitMQ: 0, it keeps no such log)
    16  lastTimerQueueOffset     how far the master has read the timer topic's queue
    24  masterTimerQueueOffset   the same, as a slave keeps it
    32  stateVersion  40 timestamp  48 counter    the checkpoint's data version (5.x; absent in 4.x)

A Java slave reads the first four longs and the data version when present (``decode`` stops at
32 bytes otherwise); anything shorter than 32 bytes fails its ``ByteBuffer.getLong``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from orbitmq.errors import RemoteProtocolError

__all__ = ["TimerCheckpointBody", "decode_timer_checkpoint", "encode_timer_checkpoint"]

_HEAD = struct.Struct(">qqqq")
_VERSION = struct.Struct(">qqq")


@dataclass(frozen=True, slots=True)
class TimerCheckpointBody:
    last_read_time_ms: int
    last_timer_log_flush_pos: int
    last_timer_queue_offset: int
    master_timer_queue_offset: int
    state_version: int = 0
    version_timestamp_ms: int = 0
    version_counter: int = 0


def encode_timer_checkpoint(checkpoint: TimerCheckpointBody) -> bytes:
    return _HEAD.pack(
        checkpoint.last_read_time_ms,
        checkpoint.last_timer_log_flush_pos,
        checkpoint.last_timer_queue_offset,
        checkpoint.master_timer_queue_offset,
    ) + _VERSION.pack(checkpoint.state_version, checkpoint.version_timestamp_ms, checkpoint.version_counter)


def decode_timer_checkpoint(data: bytes) -> TimerCheckpointBody:
    """The checkpoint in ``data`` (32 bytes, or 56 with the data version).

    Raises:
        RemoteProtocolError: fewer than 32 bytes.
    """
    if len(data) < _HEAD.size:
        raise RemoteProtocolError(
            f"timer checkpoint body of {len(data)} bytes, at least {_HEAD.size} expected"
        )
    head = _HEAD.unpack_from(data, 0)
    version = _VERSION.unpack_from(data, _HEAD.size) if len(data) >= _HEAD.size + _VERSION.size else (0, 0, 0)
    return TimerCheckpointBody(*head, *version)
