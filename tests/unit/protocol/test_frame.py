"""FrameDecoder: splitting a byte stream into frames.

Method: h11-style, every input goes in whole, one byte at a time, and followed by the
start of another frame that must stay buffered; Hypothesis splits streams at random
points and feeds arbitrary bytes to check that only RemoteProtocolError escapes.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.errors import RemoteProtocolError
from orbitmq.protocol.frame import MAX_FRAME_BYTES, FrameDecoder

_settings = settings(max_examples=80, deadline=None)


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


FRAME_A = _frame(b"\x00\x00\x00\x02{}body-a")
FRAME_B = _frame(b"\x00\x00\x00\x00")


def test_frame_decoder_whole_buffer_yields_every_frame() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(FRAME_A + FRAME_B) == [FRAME_A[4:], FRAME_B[4:]]
    assert decoder.buffered_bytes == 0


def test_frame_decoder_byte_by_byte_yields_frame_on_last_byte() -> None:
    decoder = FrameDecoder()
    frames: list[bytes] = []
    for index in range(len(FRAME_A)):
        out = decoder.feed(FRAME_A[index : index + 1])
        if index < len(FRAME_A) - 1:
            assert out == []
        frames += out
    assert frames == [FRAME_A[4:]]
    assert decoder.buffered_bytes == 0


def test_frame_decoder_trailing_partial_frame_stays_buffered() -> None:
    decoder = FrameDecoder()
    trailing = FRAME_B[:5]
    assert decoder.feed(FRAME_A + trailing) == [FRAME_A[4:]]
    assert decoder.buffered_bytes == len(trailing)
    assert decoder.feed(FRAME_B[5:]) == [FRAME_B[4:]]
    assert decoder.buffered_bytes == 0


def test_frame_decoder_accepts_bytearray_and_memoryview() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(bytearray(FRAME_A)) == [FRAME_A[4:]]
    assert decoder.feed(memoryview(FRAME_B)) == [FRAME_B[4:]]


@pytest.mark.parametrize("length", [-1, 0, 3, MAX_FRAME_BYTES + 1])
def test_frame_decoder_rejects_length_out_of_bounds(length: int) -> None:
    decoder = FrameDecoder()
    with pytest.raises(RemoteProtocolError, match=str(length)):
        decoder.feed(struct.pack(">i", length) + b"\x00" * 8)


def test_frame_decoder_honours_custom_max_frame_bytes() -> None:
    decoder = FrameDecoder(max_frame_bytes=16)
    assert decoder.feed(_frame(b"\x00" * 16)) == [b"\x00" * 16]
    with pytest.raises(RemoteProtocolError):
        decoder.feed(_frame(b"\x00" * 17))


def test_frame_decoder_is_unusable_after_a_framing_error() -> None:
    decoder = FrameDecoder()
    with pytest.raises(RemoteProtocolError):
        decoder.feed(struct.pack(">i", -5))
    with pytest.raises(RemoteProtocolError, match="after a framing error"):
        decoder.feed(FRAME_A)


@_settings
@given(
    payloads=st.lists(st.binary(min_size=4, max_size=64), max_size=6),
    cuts=st.lists(st.integers(min_value=0, max_value=500), max_size=8),
)
def test_frame_decoder_any_split_yields_same_frames(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(_frame(payload) for payload in payloads)
    points = sorted({0, len(stream), *(cut for cut in cuts if cut < len(stream))})
    decoder = FrameDecoder()
    frames: list[bytes] = []
    for start, end in zip(points, points[1:], strict=False):
        frames += decoder.feed(stream[start:end])
    assert frames == payloads
    assert decoder.buffered_bytes == 0


def test_frame_decoder_large_frames_among_small_ones_split_anywhere() -> None:
    """Frames of 16 KiB and more are copied out another way than small ones; both must agree."""
    payloads = [b"s" * 10, bytes(range(256)) * 1024, b"t" * 4, b"u" * (16 * 1024), b"v" * (16 * 1024 - 1)]
    stream = b"".join(_frame(payload) for payload in payloads)
    for chunk in (1000, 65536, 16 * 1024 + 3, len(stream)):
        decoder = FrameDecoder()
        frames: list[bytes] = []
        for start in range(0, len(stream), chunk):
            frames += decoder.feed(stream[start : start + chunk])
        assert frames == payloads and all(type(frame) is bytes for frame in frames)
        assert decoder.buffered_bytes == 0
        assert decoder.feed(_frame(b"next")) == [b"next"]  # the buffer still resizes after a view


@_settings
@given(data=st.binary(max_size=200))
def test_frame_decoder_arbitrary_bytes_raise_only_remote_protocol_error(data: bytes) -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    try:
        frames = decoder.feed(data)
    except RemoteProtocolError:
        return
    consumed = sum(4 + len(frame) for frame in frames)
    assert consumed + decoder.buffered_bytes == len(data)
