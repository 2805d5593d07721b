"""The scan of plain batches: the compiled ``_batch_scan.scan_plain_batch`` against its twin.

Method: Hypothesis batch bodies whose property strings are built from the plain keys, a key
outside them, values with separators and non-ASCII letters, repeated and empty items and the
C++ client's trailing separator, sometimes cut short or with a size field changed; the compiled
scan must answer exactly what the pure-Python ``scan_plain_batch`` answers, and a plain answer
must hold what the general path decodes.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from orbitmq import native
from orbitmq.protocol import batch as batch_module
from orbitmq.protocol.batch import PLAIN_KEYS, scan_plain_batch
from tests.support.batch_records import batch_record

_compiled = native.load("orbitmq.protocol._batch_scan")
pytestmark = pytest.mark.skipif(_compiled is None, reason="the compiled batch scan is not built")
_KEYS = tuple(key.encode() for key in PLAIN_KEYS)


_key = st.sampled_from(["UNIQ_KEY", "TAGS", "KEYS", "WAIT", "a", ""])
_value = st.text(alphabet="xy7 \x01\x02é", max_size=6)
_item = st.one_of(
    st.builds(lambda key, value: f"{key}\x01{value}", _key, _value),
    st.sampled_from(["", "UNIQ_KEY", "TAGS\x01a\x01b"]),
)
_properties = st.builds(
    lambda items, trailing: ("\x02".join(items) + ("\x02" if trailing else "")).encode(),
    st.lists(_item, max_size=4),
    st.booleans(),
)
_records = st.lists(
    st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=12), _properties), max_size=6
)


@settings(max_examples=400, deadline=None)
@given(_records, st.one_of(st.none(), st.integers(0, 400)), st.one_of(st.none(), st.integers(0, 400)))
@example([(1, b"body", b"UNIQ_KEY\x01K1\x02TAGS\x01t\x02KEYS\x01a b\x02")], None, None)
@example([(0, b"", b"")], None, None)
@example([(0, b"", b"UNIQ_KEY\x01K\x02UNIQ_KEY\x01K")], None, None)
def test_compiled_scan_answers_as_the_python_twin(
    records: list[tuple[int, bytes, bytes]], cut: int | None, poke: int | None
) -> None:
    body = bytearray(b"".join(batch_record(flag, data, text) for flag, data, text in records))
    if poke is not None and body:
        body[poke % len(body)] ^= 0x40  # a size field, a length or a byte of text changed
    if cut is not None:
        del body[cut:]
    data = bytes(body)
    assert _compiled is not None
    compiled = _compiled.scan_plain_batch(data, _KEYS)
    assert compiled == scan_plain_batch(data, _KEYS)
    if compiled is not None:
        general = batch_module._decode_general(data)
        flags, bodies, encoded, values = compiled
        assert (flags, bodies, encoded) == (general.flags, general.bodies, general.encoded)
        assert values == (general.unique_keys, general.tags, general.keys)


def test_compiled_scan_reads_every_plain_message() -> None:
    body = batch_record(5, b"one", b"UNIQ_KEY\x01K1\x02TAGS\x01t\x02") + batch_record(
        -1, b"", b"KEYS\x01k1 k2"
    )
    body += batch_record(0, b"three", b"")
    assert _compiled is not None
    assert _compiled.scan_plain_batch(body, _KEYS) == (
        [5, -1, 0],
        [b"one", b"", b"three"],
        [b"UNIQ_KEY\x01K1\x02TAGS\x01t", b"KEYS\x01k1 k2", b""],
        (["K1", None, None], ["t", None, None], [None, "k1 k2", None]),
    )


@pytest.mark.parametrize(
    "properties",
    [
        b"WAIT\x01true",
        b"UNIQ_KEY\x01caf\xc3\xa9",
        b"TAGS\x01a\x02TAGS\x01b",
        b"UNIQ_KEY\x01a\x02\x02",
        b"\x02\x02",
    ],
    ids=["other key", "non-ascii", "repeated key", "empty item", "two separators"],
)
def test_compiled_scan_leaves_anything_else_to_the_general_path(properties: bytes) -> None:
    assert _compiled is not None
    body = batch_record(0, b"fine", b"UNIQ_KEY\x01a") + batch_record(0, b"x", properties)
    assert _compiled.scan_plain_batch(body, _KEYS) is None
    assert scan_plain_batch(body, _KEYS) is None


def test_compiled_scan_refuses_bad_arguments() -> None:
    assert _compiled is not None
    with pytest.raises(TypeError):
        _compiled.scan_plain_batch(b"", ["UNIQ_KEY"])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        _compiled.scan_plain_batch(b"", ())
    with pytest.raises(TypeError):
        _compiled.scan_plain_batch(b"", ("UNIQ_KEY",))  # type: ignore[arg-type]
