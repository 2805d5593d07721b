"""Messages decoded lazily from a pull body are the reference decoder's messages, field for field."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.client._record_decode import PulledMessageExt, decode_records
from orbitmq.model.message import MessageExt, SysFlag
from orbitmq.protocol.message_codec import decode_stored_messages, encode_stored_message

FIELDS = tuple(field.name for field in dataclasses.fields(MessageExt))
_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), max_size=12)
_hosts = st.sampled_from(("127.0.0.1", "10.0.0.7", "192.168.1.254", "::1", "fe80::1"))
_ints = st.integers(-(2**31), 2**31 - 1)
_longs = st.integers(0, 2**62)


@st.composite
def stored_messages(draw: st.DrawFn) -> MessageExt:
    compressed = draw(st.booleans())
    body = draw(st.binary(max_size=300))
    return MessageExt(
        topic=draw(
            st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20).filter(
                lambda t: len(t.encode()) <= 127
            )
        ),
        body=zlib.compress(body) if compressed else body,
        flag=draw(_ints),
        properties=draw(st.dictionaries(_text.filter(bool), _text, max_size=5)),
        queue_id=draw(st.integers(0, 1000)),
        queue_offset=draw(_longs),
        commit_log_offset=draw(_longs),
        sys_flag=(SysFlag.COMPRESSED if compressed else 0) | draw(st.sampled_from((0, SysFlag.MULTI_TAGS))),
        born_timestamp=draw(_longs),
        born_host=(draw(_hosts), draw(st.integers(0, 65535))),
        store_timestamp=draw(_longs),
        store_host=(draw(_hosts), draw(st.integers(0, 65535))),
        reconsume_times=draw(st.integers(0, 16)),
        prepared_transaction_offset=draw(_longs),
    )


def _fields(message: MessageExt) -> tuple[object, ...]:
    return tuple(getattr(message, name) for name in FIELDS)


@settings(max_examples=150, deadline=None)
@given(st.lists(stored_messages(), min_size=1, max_size=12))
def test_pulled_message_fields_equal_reference_decoder(messages: list[MessageExt]) -> None:
    body = b"".join(encode_stored_message(message) for message in messages)
    reference = decode_stored_messages(body, decompress=True)
    decoded = decode_records(body)
    assert [_fields(m) for m in decoded] == [_fields(m) for m in reference]
    assert decoded == reference and reference == decoded
    assert [m.msg_id for m in decoded] == [m.msg_id for m in reference]


def test_pulled_message_is_a_message_ext_that_can_be_changed_copied_and_pickled() -> None:
    original = MessageExt(
        topic="T",
        body=b"hello",
        properties={"UNIQ_KEY": "K1", "TAGS": "a"},
        queue_id=2,
        queue_offset=7,
        store_host=("10.0.0.1", 10911),
        reconsume_times=1,
    )
    (pulled,) = decode_records(encode_stored_message(original))
    assert isinstance(pulled, PulledMessageExt) and isinstance(pulled, MessageExt)
    assert pickle.loads(pickle.dumps(pulled)) == pulled
    assert copy.copy(pulled) == pulled and copy.deepcopy(pulled) == pulled
    replaced = dataclasses.replace(pulled, topic="U")
    assert replaced.topic == "U" and replaced.properties == original.properties
    assert repr(pulled).removeprefix("Pulled") == repr(
        decode_stored_messages(encode_stored_message(original))[0]
    )
    pulled.reconsume_times += 1
    pulled.properties["KEYS"] = "k"
    pulled.store_host = ("10.0.0.2", 1)
    assert (pulled.reconsume_times, pulled.keys, pulled.store_host) == (2, ["k"], ("10.0.0.2", 1))
    assert pulled != original
