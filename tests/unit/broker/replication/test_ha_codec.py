"""The HA link's frames (ha-replication §1.2, §1.3): golden bytes and the three-way decoder tests.

Method: encoding a known report and frame must reproduce the committed hex (checked by hand
against the field tables: big-endian long offset, int size, raw body). Each decoder is fed
the whole buffer, one byte at a time, and with trailing bytes that must stay buffered; a
Hypothesis round trip covers arbitrary offsets and bodies, and arbitrary bytes either decode
or raise RemoteProtocolError, never anything else.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbitmq.broker.replication.codec import (
    OFFSET_REPORT_BYTES,
    TRANSFER_HEADER_BYTES,
    OffsetReportDecoder,
    TransferDecoder,
    TransferFrame,
    encode_offset_report,
    encode_transfer_header,
)
from orbitmq.errors import LocalProtocolError, RemoteProtocolError
from tests.unit.protocol.conftest import load_hex

FRAME_OFFSET = (1 << 30) + 4096
FRAME_BODY = bytes(range(20))


def _frame(offset: int, body: bytes) -> bytes:
    return encode_transfer_header(offset, len(body)) + body


def test_ha_codec_matches_golden_bytes() -> None:
    assert encode_offset_report(0x0102030405060708) == load_hex("ha_offset_report.hex")
    assert _frame(FRAME_OFFSET, FRAME_BODY) == load_hex("ha_transfer_frame.hex")
    assert encode_transfer_header(123456789, 0) == load_hex("ha_heartbeat_frame.hex")
    assert OFFSET_REPORT_BYTES == 8 and TRANSFER_HEADER_BYTES == 12


def _feed_whole(decoder: TransferDecoder, data: bytes) -> list[TransferFrame]:
    return decoder.feed(data)


def _feed_bytewise(decoder: TransferDecoder, data: bytes) -> list[TransferFrame]:
    frames: list[TransferFrame] = []
    for index in range(len(data)):
        frames += decoder.feed(data[index : index + 1])
    return frames


@pytest.mark.parametrize("feed", [_feed_whole, _feed_bytewise], ids=["whole", "bytewise"])
def test_transfer_decoder_splits_frames_however_they_arrive(
    feed: Callable[[TransferDecoder, bytes], list[TransferFrame]],
) -> None:
    stream = load_hex("ha_transfer_frame.hex") + load_hex("ha_heartbeat_frame.hex") + _frame(7, b"x" * 3000)
    decoder = TransferDecoder()
    frames = feed(decoder, stream)
    assert frames == [
        TransferFrame(FRAME_OFFSET, FRAME_BODY),
        TransferFrame(123456789, b""),
        TransferFrame(7, b"x" * 3000),
    ]
    assert frames[1].is_heartbeat and frames[2].end_offset == 3007
    assert decoder.buffered_bytes == 0


def test_transfer_decoder_keeps_trailing_bytes_for_the_next_feed() -> None:
    decoder = TransferDecoder()
    half_next = _frame(99, b"abcdef")[:9]
    assert decoder.feed(load_hex("ha_transfer_frame.hex") + half_next) == [
        TransferFrame(FRAME_OFFSET, FRAME_BODY)
    ]
    assert decoder.buffered_bytes == 9
    assert decoder.feed(_frame(99, b"abcdef")[9:]) == [TransferFrame(99, b"abcdef")]


@pytest.mark.parametrize(
    ("header", "words"),
    [
        (bytes.fromhex("ffffffffffffffff00000000"), "negative offset"),
        (bytes.fromhex("0000000000000000ffffffff"), "announces -1 bytes"),
        (bytes.fromhex("00000000000000000040000100"), "announces 4194305 bytes"),
    ],
)
def test_transfer_decoder_refuses_impossible_headers(header: bytes, words: str) -> None:
    with pytest.raises(RemoteProtocolError, match=words):
        TransferDecoder().feed(header)


def test_transfer_decoder_bounds_the_body_it_will_buffer() -> None:
    with pytest.raises(RemoteProtocolError, match="outside 0..1024"):
        TransferDecoder(body_bytes_max=1024).feed(
            encode_transfer_header(0, 1024)[:8] + (1025).to_bytes(4, "big")
        )


def test_offset_report_decoder_whole_bytewise_and_trailing() -> None:
    stream = b"".join(encode_offset_report(offset) for offset in (0, 4096, 1 << 40))
    assert OffsetReportDecoder().feed(stream) == [0, 4096, 1 << 40]
    bytewise = OffsetReportDecoder()
    seen: list[int] = []
    for index in range(len(stream)):
        seen += bytewise.feed(stream[index : index + 1])
    assert seen == [0, 4096, 1 << 40]
    trailing = OffsetReportDecoder()
    assert trailing.feed(stream + b"\x00\x00\x01") == [0, 4096, 1 << 40]
    assert trailing.buffered_bytes == 3
    assert trailing.feed(b"\x00\x00\x00\x00\x05") == [(1 << 40) + 5]


def test_offset_report_decoder_refuses_negative_offsets() -> None:
    with pytest.raises(RemoteProtocolError, match="negative"):
        OffsetReportDecoder().feed(b"\xff" * 8)


def test_ha_encoders_refuse_what_the_wire_cannot_carry() -> None:
    with pytest.raises(LocalProtocolError):
        encode_offset_report(-1)
    with pytest.raises(LocalProtocolError):
        encode_transfer_header(0, 4 * 1024 * 1024 + 1)
    with pytest.raises(LocalProtocolError):
        encode_transfer_header(-5, 0)


@given(st.lists(st.tuples(st.integers(0, (1 << 63) - 1), st.binary(max_size=300)), max_size=8), st.data())
def test_transfer_decoder_round_trips_any_split(frames: list[tuple[int, bytes]], data: st.DataObject) -> None:
    stream = b"".join(_frame(offset, body) for offset, body in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = TransferDecoder()
    decoded: list[TransferFrame] = []
    previous = 0
    for cut in [*cuts, len(stream)]:
        decoded += decoder.feed(stream[previous:cut])
        previous = cut
    assert decoded == [TransferFrame(offset, body) for offset, body in frames]


@given(st.binary(max_size=200))
def test_ha_decoders_raise_only_their_own_error(data: bytes) -> None:
    for decoder in (TransferDecoder(body_bytes_max=64), OffsetReportDecoder()):
        try:
            decoder.feed(data)
        except RemoteProtocolError:
            pass
