"""GET_TIMER_CHECK_POINT's body in RocketMQ's binary TimerCheckpoint layout."""

from __future__ import annotations

import struct

import pytest

from orbitmq.errors import RemoteProtocolError
from orbitmq.protocol.timer_checkpoint import (
    TimerCheckpointBody,
    decode_timer_checkpoint,
    encode_timer_checkpoint,
)


def test_timer_checkpoint_encodes_java_layout_and_round_trips() -> None:
    checkpoint = TimerCheckpointBody(1_700_000_000_000, 0, 12, 12, 1, 1_700_000_000_001, 3)
    data = encode_timer_checkpoint(checkpoint)
    assert data == struct.pack(">7q", 1_700_000_000_000, 0, 12, 12, 1, 1_700_000_000_001, 3)
    assert decode_timer_checkpoint(data) == checkpoint


def test_timer_checkpoint_reads_4x_body_without_data_version_and_refuses_short_one() -> None:
    assert decode_timer_checkpoint(struct.pack(">4q", 5, 6, 7, 8)) == TimerCheckpointBody(5, 6, 7, 8)
    with pytest.raises(RemoteProtocolError, match="timer checkpoint body of 16 bytes"):
        decode_timer_checkpoint(bytes(16))
