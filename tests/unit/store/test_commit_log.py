"""CommitLog: segment roll with a blank record, raw reads/appends, record checks, iteration."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from orbitmq.model.message import MessageExt
from orbitmq.protocol.message_codec import BLANK_MAGIC_CODE, encode_stored_message
from orbitmq.store.commit_log import (
    CommitLog,
    RecordCheck,
    check_record,
    check_record_header,
    iterate_commit_log,
    skim_records,
)

SEGMENT = 4096


def _append(log: CommitLog, body: bytes, topic: str = "T") -> int:
    """Append one record the way the store does; return its commit-log offset."""
    probe = encode_stored_message(MessageExt(topic=topic, body=body))
    segment = log.reserve(len(probe))
    offset = segment.start_offset + segment.wrote_position
    record = encode_stored_message(MessageExt(topic=topic, body=body, commit_log_offset=offset))
    segment.buffer[segment.wrote_position : segment.wrote_position + len(record)] = record
    log.commit(segment, segment.wrote_position + len(record))
    return offset


def test_commit_log_rolls_with_blank_record(tmp_path: Path) -> None:
    log = CommitLog(tmp_path / "commitlog", SEGMENT)
    try:
        offsets = [_append(log, b"x" * 1000) for _ in range(5)]
        # Four 1092-byte records need 4368 + 8 bytes: the fourth goes to the next segment.
        assert offsets[3] == SEGMENT
        first = log.segments.files[0]
        blank_at = offsets[2] + 1092
        assert struct.unpack_from(">ii", first.buffer, blank_at) == (SEGMENT - blank_at, BLANK_MAGIC_CODE)
        assert log.max_offset == offsets[4] + 1092
    finally:
        log.close()


def test_commit_log_reads_records_and_refuses_unwritten_bytes(tmp_path: Path) -> None:
    log = CommitLog(tmp_path / "commitlog", SEGMENT)
    try:
        offset = _append(log, b"hello")
        record = log.read_record(offset)
        assert record is not None and record.endswith(b"\x00\x00") and b"hello" in record
        assert log.read(offset, len(record) + 1) is None
        assert log.read_record(offset + len(record)) is None
    finally:
        log.close()


def test_commit_log_raw_append_replicates_byte_identical(tmp_path: Path) -> None:
    source = CommitLog(tmp_path / "a", SEGMENT)
    target = CommitLog(tmp_path / "b", SEGMENT)
    try:
        for index in range(12):
            _append(source, bytes([index]) * 700)
        position = 0
        while position < source.max_offset:
            chunk = source.read_raw(position, 1500)
            assert target.append_raw(position, chunk)
            position += len(chunk)
        assert not target.append_raw(position + 1, b"x")
        assert target.max_offset == source.max_offset
        assert target.read_raw(SEGMENT, SEGMENT) == source.read_raw(SEGMENT, SEGMENT)
    finally:
        source.close()
        target.close()


def test_commit_log_check_record_detects_damage(tmp_path: Path) -> None:
    log = CommitLog(tmp_path / "commitlog", SEGMENT)
    try:
        offset = _append(log, b"payload")
        segment = log.segments.files[0]
        found, size, message = check_record(segment.buffer, offset, 0, SEGMENT)
        assert found is RecordCheck.MESSAGE and message is not None and size > 0
        assert check_record(segment.buffer, size, 0, SEGMENT)[0] is RecordCheck.END
        segment.buffer[offset + 90] ^= 0xFF  # a body byte: the body CRC no longer matches
        assert check_record(segment.buffer, offset, 0, SEGMENT)[0] is RecordCheck.CORRUPT
        assert check_record(segment.buffer, offset, 4096 * 10, SEGMENT)[0] is RecordCheck.CORRUPT
    finally:
        log.close()


def test_commit_log_iterates_valid_records_across_segments(tmp_path: Path) -> None:
    log = CommitLog(tmp_path / "commitlog", SEGMENT)
    offsets = [_append(log, bytes([index]) * 900) for index in range(9)]
    log.flush()
    log.close()
    found = list(iterate_commit_log(tmp_path, SEGMENT))
    assert [offset for offset, _, _ in found] == offsets
    assert all(size == 992 for _, size, _ in found)
    assert all(message.topic == "T" for _, _, message in found)


def test_commit_log_flush_advances_flushed_offset(tmp_path: Path) -> None:
    log = CommitLog(tmp_path / "commitlog", SEGMENT)
    try:
        _append(log, b"a" * 3000)
        _append(log, b"b" * 3000)
        assert log.flushed_offset == 0
        assert log.flush() == log.max_offset
    finally:
        log.close()


def _header_walk(buffer: Any, position: int, stop: int, verify_crc: bool) -> int:
    """Where record-by-record header checks stop: the reference skim_records must match."""
    while position < stop:
        found, size = check_record_header(buffer, position, 0, SEGMENT, verify_crc)
        if found is not RecordCheck.MESSAGE:
            break
        position += size
    return position


@pytest.mark.parametrize("verify_crc", [True, False])
@pytest.mark.parametrize(
    "damage",
    [
        "none",
        "body byte",
        "magic",
        "physical offset",
        "total size",
        "zeros",
        "ipv6 hosts",
        "ipv6 body byte",
        "stop early",
    ],
)
def test_skim_records_stops_where_header_checks_stop(tmp_path: Path, damage: str, verify_crc: bool) -> None:
    log = CommitLog(tmp_path / "commitlog", SEGMENT)
    try:
        offsets = [_append(log, bytes([index]) * 150) for index in range(6)]
        segment = log.segments.files[0]
        buffer = segment.buffer
        end = segment.wrote_position
        stop = end
        third = offsets[3]
        if damage == "body byte":
            buffer[third + 100] ^= 0xFF
        elif damage == "magic":
            buffer[third + 4] ^= 0x01
        elif damage == "physical offset":
            buffer[third + 35] ^= 0x01
        elif damage == "total size":
            struct.pack_into(">i", buffer, third, SEGMENT)
        elif damage == "zeros":
            buffer[third:end] = bytes(end - third)
        elif damage == "stop early":
            stop = offsets[2] + 1  # inside the third record: the skim ends after it
        v6_start = end
        if damage.startswith("ipv6"):
            # A record with IPv6 hosts has BODYLEN further on: the skim must find it there.
            extra = encode_stored_message(
                MessageExt(
                    topic="T",
                    body=b"v6" * 40,
                    born_host=("::1", 1),
                    store_host=("::1", 2),
                    commit_log_offset=end,
                )
            )
            buffer[end : end + len(extra)] = extra
            end = stop = end + len(extra)
            if damage == "ipv6 body byte":
                buffer[end - 30] ^= 0xFF  # in its body
        expected = _header_walk(buffer, 0, stop, verify_crc)
        assert skim_records(buffer, 0, stop, 0, SEGMENT, verify_crc) == expected
        if damage in ("none", "ipv6 hosts") or (damage.endswith("body byte") and not verify_crc):
            assert expected == end  # the header alone does not see a body byte
        elif damage == "stop early":
            assert expected == offsets[3]
        elif damage == "ipv6 body byte":
            assert expected == v6_start
        else:
            assert expected == third
    finally:
        log.close()
