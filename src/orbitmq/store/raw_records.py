"""Whole records at the start of replicated CommitLog bytes (the slave's append path).

A master streams its CommitLog as raw bytes in frames that end wherever its batch size ends,
usually inside a record (ha-replication §1.3). A slave appends only whole records, each
checked first: a record with a missing tail never reaches its log, so neither recovery nor
the dispatcher can mistake zero bytes for a topic or properties, and the slave's max offset
(what it reports to the master) is always a record boundary. The bytes after the last whole
record stay with the caller until the next frame completes them.

What counts as whole at commit-log offset ``o`` (segments of ``segment_bytes``, aligned):

========================  ===========================================================
MAGICCODE                 bytes needed
========================  ===========================================================
message (0xDAA320A7)      TOTALSIZE, which must not pass the end of ``o``'s segment
end-of-file blank         the rest of ``o``'s segment (TOTALSIZE must say exactly that)
anything else             none: the bytes are corrupt from ``o`` on
========================  ===========================================================

A message must also pass :func:`~orbitmq.store.commit_log.check_record` (sizes, its own
PHYSICALOFFSET equal to ``o``, body CRC), which decodes it for the dispatcher.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from orbitmq.model.message import MessageExt
from orbitmq.protocol.message_codec import BLANK_MAGIC_CODE, BLANK_RECORD_MIN_BYTES, MESSAGE_MAGIC_CODE
from orbitmq.store.commit_log import RecordCheck, check_record

_SIZE_MAGIC = struct.Struct(">ii")


@dataclass(slots=True)
class WholeRecords:
    """What :func:`split_whole_records` found."""

    whole_bytes: int = 0  # length of the prefix made of whole, valid records
    records: list[tuple[int, int, MessageExt]] = field(default_factory=list)  # (offset, size, message)
    problem: str = ""  # why the bytes at ``whole_bytes`` can never become a record ("" = incomplete)


def split_whole_records(data: bytes | memoryview, commit_log_offset: int, segment_bytes: int) -> WholeRecords:
    """Find the whole, valid records at the start of ``data``, which starts at ``commit_log_offset``."""
    found = WholeRecords()
    view = memoryview(data)
    length = len(view)
    position = 0
    while length - position >= BLANK_RECORD_MIN_BYTES:
        offset = commit_log_offset + position
        segment_left = segment_bytes - offset % segment_bytes
        total_size, magic = _SIZE_MAGIC.unpack_from(view, position)
        if magic == BLANK_MAGIC_CODE:
            if total_size != segment_left:
                found.problem = (
                    f"end-of-file blank at commit-log offset {offset} says {total_size} bytes, "
                    f"the segment has {segment_left} left (do both ends use the same segment size?)"
                )
                break
        elif magic != MESSAGE_MAGIC_CODE:
            found.problem = f"no record at commit-log offset {offset}: magic code {magic & 0xFFFFFFFF:#010x}"
            break
        elif not BLANK_RECORD_MIN_BYTES < total_size <= segment_left:
            found.problem = (
                f"record at commit-log offset {offset} says {total_size} bytes, "
                f"its segment has {segment_left} left"
            )
            break
        if length - position < total_size:
            break  # the rest arrives with the next frame
        if magic == MESSAGE_MAGIC_CODE:
            record = view[position : position + total_size]
            checked, size, message = check_record(record, 0, offset, total_size)
            if checked is not RecordCheck.MESSAGE or message is None:
                found.problem = (
                    f"record at commit-log offset {offset} fails its checks (sizes, offset or CRC)"
                )
                break
            found.records.append((offset, size, message))
        position += total_size
    found.whole_bytes = position
    return found
