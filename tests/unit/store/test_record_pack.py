"""The compiled ``_record_pack.pack_records`` against its pure-Python twin ``pack_records_py``.

Method: Hypothesis templates (the fixed part with IPv4 and IPv6 host widths, any shared field
values), bodies, property strings up to the 32767-byte limit, steps, offsets and positions; both
write into buffers of the same garbage and must leave them byte for byte equal and answer alike;
a batch that does not fit is refused by both before a byte is written.
"""

from __future__ import annotations

import mmap
from zlib import crc32

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq import native
from orbitmq.protocol.message_codec import MESSAGE_MAGIC_CODE, fixed_part_struct
from orbitmq.store.batch_put import _PATCHED, pack_records_py

_compiled = native.load("orbitmq.store._record_pack")
pytestmark = pytest.mark.skipif(_compiled is None, reason="the compiled record packer is not built")


@st.composite
def templates(draw: st.DrawFn) -> bytes:
    born, store = draw(st.sampled_from([(4, 4), (16, 4), (4, 16), (16, 16)]))
    fixed = fixed_part_struct(born, store)
    long = st.integers(-(2**63), 2**63 - 1)
    integer = st.integers(-(2**31), 2**31 - 1)
    sys_flag = (
        (0x10 if born == 16 else 0) | (0x20 if store == 16 else 0) | draw(st.sampled_from([0, 2, 4, 8]))
    )
    return fixed.pack(
        draw(integer), MESSAGE_MAGIC_CODE, draw(integer), draw(st.integers(0, 2**31 - 1)), draw(integer),
        draw(long), draw(long), sys_flag, draw(long), draw(st.binary(min_size=born, max_size=born)),
        draw(st.integers(0, 65535)), draw(long), draw(st.binary(min_size=store, max_size=store)),
        draw(st.integers(0, 65535)), draw(integer), draw(long), draw(integer),
    )  # fmt: skip


_texts = st.one_of(st.binary(max_size=40), st.just(b"\x01" * 32767))


@settings(max_examples=150, deadline=None)
@given(
    templates(),
    st.lists(
        st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=300), _texts), min_size=1, max_size=8
    ),
    st.integers(0, 64),
    st.integers(0, 2**50),
    st.integers(0, 2**40),
    st.sampled_from([0, 1]),
    st.binary(min_size=1, max_size=127),
)
def test_compiled_packer_writes_what_the_python_twin_writes(
    template: bytes,
    records: list[tuple[int, bytes, bytes]],
    position: int,
    base_offset: int,
    queue_offset: int,
    step: int,
    topic: bytes,
) -> None:
    flags = [flag for flag, _, _ in records]
    bodies = [body for _, body, _ in records]
    texts = [text for _, _, text in records]
    topic_head = bytes((len(topic),)) + topic
    size = position + sum(
        len(template) + len(b) + len(topic_head) + 2 + len(t) for b, t in zip(bodies, texts, strict=True)
    )
    buffers = [bytearray(b"\xee" * (size + 16)) for _ in range(2)]
    assert _compiled is not None
    answers = [
        pack(buffer, position, template, base_offset, queue_offset, step, flags, bodies, topic_head, texts)
        for pack, buffer in zip((_compiled.pack_records, pack_records_py), buffers, strict=True)
    ]
    assert answers[0] == answers[1]
    assert buffers[0] == buffers[1]
    end, offsets, sizes = answers[0]
    assert end == size and buffers[0][end:] == b"\xee" * 16
    # Each record holds what went in, at the positions the record layout gives.
    fixed = len(template)
    for index, (offset, record_size) in enumerate(zip(offsets, sizes, strict=True)):
        start = offset - base_offset
        record = bytes(buffers[0][start : start + record_size])
        total, _, body_crc, _, flag, record_queue_offset, physical = _PATCHED.unpack_from(record)
        body_len = int.from_bytes(record[fixed - 4 : fixed], "big")
        body = record[fixed : fixed + body_len]
        tail = record[fixed + body_len :]
        assert (total, flag, body, body_crc) == (
            record_size,
            flags[index],
            bodies[index],
            crc32(body) & 0x7FFFFFFF,
        )
        assert (record_queue_offset, physical) == (queue_offset + index if step else 0, offset)
        assert record[_PATCHED.size : fixed - 4] == template[_PATCHED.size : fixed - 4]
        assert tail == topic_head + len(texts[index]).to_bytes(2, "big") + texts[index]


def test_both_packers_write_into_a_mapped_segment(tmp_path: object) -> None:
    template = fixed_part_struct(4, 4).pack(
        0, MESSAGE_MAGIC_CODE, 0, 3, 0, 0, 0, 0, 1, b"\x7f\0\0\1", 1, 2, b"\x7f\0\0\1", 2, 0, 0, 0
    )
    with mmap.mmap(-1, 4096) as segment:
        assert _compiled is not None
        first = _compiled.pack_records(segment, 0, template, 0, 0, 1, [1], [b"body"], b"\x01T", [b"A\x01b"])
        copy = bytes(segment[: first[0]])
        segment[: first[0]] = bytes(first[0])
        second = pack_records_py(segment, 0, template, 0, 0, 1, [1], [b"body"], b"\x01T", [b"A\x01b"])
        assert first == second and bytes(segment[: first[0]]) == copy


@pytest.mark.parametrize("packer", ["compiled", "pure-python"])
def test_a_batch_that_does_not_fit_is_refused_before_a_byte_is_written(packer: str) -> None:
    assert _compiled is not None
    pack = _compiled.pack_records if packer == "compiled" else pack_records_py
    template = bytes(88)
    buffer = bytearray(b"\xee" * 200)
    with pytest.raises(ValueError, match="do not fit"):
        pack(buffer, 10, template, 0, 0, 1, [0, 0], [b"x" * 40, b"y" * 40], b"\x01T", [b"", b""])
    assert buffer == bytearray(b"\xee" * 200)
    with pytest.raises(ValueError, match="32767"):
        pack(bytearray(70000), 0, template, 0, 0, 1, [0], [b""], b"\x01T", [b"p" * 32768])
    with pytest.raises(ValueError, match="differ in length"):
        pack(buffer, 0, template, 0, 0, 1, [0], [b"", b""], b"\x01T", [b"", b""])
