"""MessageStore.put_batch (a batch send held as columns) against put_messages of the same messages.

Method: Hypothesis builds batches (hosts IPv4/IPv6, transaction types, TAGS, UNIQ_KEY, KEYS,
property strings the caller encoded or not, stamps a message may already carry, bodies and
property strings over the limits); two
fresh stores take the same batch, one through each path; their answers, their records (byte for
byte, the store timestamp aside), their ConsumeQueue entries and their index look-ups must agree.
Batches whose messages carry only UNIQ_KEY, TAGS and KEYS also come as the broker holds a plain
batch (no mappings, key columns). Every test runs with the compiled record packer
(``_record_pack.c``) and with the pure-Python one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq import native
from orbitmq.errors import LocalProtocolError
from orbitmq.model.message import SysFlag
from orbitmq.protocol.message_codec import (
    STORETIMESTAMP_POSITION,
    decode_stored_message,
    stored_message_property_bytes,
)
from orbitmq.protocol.properties import encode_properties
from orbitmq.protocol.tags import tags_code
from orbitmq.store import batch_put as batch_put_module
from orbitmq.store.batch_put import BatchPut, pack_records_py
from orbitmq.store.message_store import MessageStore, PutResult, PutStatus
from tests.support.native_modes import MODES, use_mode
from tests.unit.store.conftest import tiny_config

_compiled = native.load("orbitmq.store._record_pack")


@pytest.fixture(autouse=True, scope="module", params=MODES)
def pack_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the module's tests with the compiled record packer, then with the pure-Python one."""
    compiled = _compiled.pack_records if _compiled is not None else None
    yield from use_mode(request, batch_put_module, "pack_records", compiled, pack_records_py, "record packer")


# Faults (a separator in a key, oversized values and bodies, bad names and hosts) are drawn
# now and then; most batches are stored, so that records, queues and the index get compared.
_KEYS = st.sampled_from(["UNIQ_KEY", "KEYS", "KEYS", "TAGS", "TAGS", "WAIT", "a"] * 4 + ["b\x01c"])
_VALUES = st.sampled_from(
    ["", "k1", "k1 k2", "0A0B0C0D0E0F00112233445566778899", "tag", "t2"] * 4 + ["x" * 9000]
)
_PROPERTIES = st.dictionaries(_KEYS, _VALUES, max_size=4)
_SYS_FLAGS = st.sampled_from(
    [
        0,
        int(SysFlag.MULTI_TAGS),
        int(SysFlag.TRANSACTION_PREPARED_TYPE),
        int(SysFlag.TRANSACTION_COMMIT_TYPE),
        int(SysFlag.TRANSACTION_ROLLBACK_TYPE),
        int(SysFlag.BORNHOST_V6),  # a stale host bit: the store rewrites it from the address
    ]
)
_HOSTS = st.sampled_from(
    [("127.0.0.1", 5000), ("::1", 6000), ("::ffff:10.0.0.1", 7000)] * 4 + [("not-an-ip", 1)]
)


@st.composite
def batches(draw: st.DrawFn) -> BatchPut:
    count = draw(st.integers(1, 12))
    properties = [draw(_PROPERTIES) for _ in range(count)]
    encoded: list[bytes | None] = []
    for mapping in properties:
        try:
            text = encode_properties(mapping)
        except LocalProtocolError:
            text = None
        encoded.append(text.encode() if text is not None and draw(st.booleans()) else None)
    plain_keys = {"UNIQ_KEY", "TAGS", "KEYS"}
    key_columns = None
    if all(mapping.keys() <= plain_keys for mapping in properties) and draw(st.booleans()):
        # As the broker holds a plain batch: every string encoded, no mappings, key columns.
        encoded = [encode_properties(mapping).encode() for mapping in properties]
        key_columns = (
            [mapping.get("UNIQ_KEY") for mapping in properties],
            [mapping.get("TAGS") for mapping in properties],
            [mapping.get("KEYS") for mapping in properties],
        )
    return BatchPut(
        topic=draw(st.sampled_from(["TopicA"] * 6 + ["SCHEDULE_TOPIC_XXXX"] * 3 + ["bad topic"])),
        queue_id=draw(st.integers(0, 2)),
        flags=[draw(st.integers(-(2**31), 2**31 - 1)) for _ in range(count)],
        bodies=[draw(st.binary(max_size=8)) * draw(st.sampled_from([1] * 30 + [200])) for _ in range(count)],
        properties=None if key_columns is not None else properties,
        encoded_properties=encoded,
        sys_flag=draw(_SYS_FLAGS),
        born_timestamp=draw(st.integers(0, 2**41)),
        born_host=draw(_HOSTS),
        store_host=draw(st.sampled_from([("127.0.0.1", 10911), ("fe80::1", 10911)])),
        # Stamps: none, the broker's, or one a message may already carry (it keeps its place).
        stamps=draw(
            st.sampled_from([{}, {"CLUSTER": "c1", "TRACE_ON": "true"}, {"a": "stamped", "CLUSTER": "c2"}])
        ),
        key_columns=key_columns,
    )


def _records(store: MessageStore, result: PutResult) -> list[bytes]:
    records = []
    for offset in result.commit_log_offsets:
        record = store.read_message(offset)
        assert record is not None
        records.append(record)
    return records


def _without_store_time(record: bytes) -> bytes:
    """The record with STORETIMESTAMP zeroed (it sits 12 bytes later after an IPv6 born host)."""
    message, _ = decode_stored_message(record, decode_body=False)
    position = STORETIMESTAMP_POSITION + (12 if message.sys_flag & SysFlag.BORNHOST_V6 else 0)
    return record[:position] + bytes(8) + record[position + 8 :]


@settings(max_examples=80, deadline=None)
@given(batches())
def test_batch_put_equals_put_messages_of_the_same_requests(batch: BatchPut) -> None:
    with tempfile.TemporaryDirectory() as root:
        # max 1 KiB bodies: the x200 bodies (up to 1,600 bytes) cross it now and then.
        stores = [
            MessageStore(tiny_config(Path(root) / name, max_message_size_bytes=1024)) for name in ("a", "b")
        ]
        for store in stores:
            store.open()
        try:
            by_columns = stores[0].put_batch(batch)
            by_requests = stores[1].put_messages(batch.requests())
            assert (by_columns.status, by_columns.remark) == (by_requests.status, by_requests.remark)
            if by_columns.status is not PutStatus.PUT_OK:
                return
            assert by_columns.commit_log_offsets == by_requests.commit_log_offsets
            assert (by_columns.queue_offset, by_columns.wrote_bytes) == (
                by_requests.queue_offset,
                by_requests.wrote_bytes,
            )
            records = [
                _records(store, result)
                for store, result in zip(stores, (by_columns, by_requests), strict=True)
            ]
            assert [_without_store_time(r) for r in records[0]] == [
                _without_store_time(r) for r in records[1]
            ]
            queue_id = batch.queue_id
            pulled = [store.get_messages(batch.topic, queue_id, 0, 64, 1 << 20) for store in stores]
            assert pulled[0].status == pulled[1].status
            assert pulled[0].next_begin_offset == pulled[1].next_begin_offset
            assert pulled[0].commit_log_offsets == pulled[1].commit_log_offsets
            assert pulled[0].queue_offsets == pulled[1].queue_offsets
            # Tags codes: the entries a tag filter keeps (and the codes of SCHEDULE_TOPIC_XXXX).
            for code in {tags_code("tag"), tags_code("t2"), 0}:
                kept = [
                    store.get_messages(
                        batch.topic, queue_id, 0, 64, 1 << 20, tag_filter=code.__eq__
                    ).queue_offsets
                    for store in stores
                ]
                assert kept[0] == kept[1]
            for key in ("k1", "k2", "0A0B0C0D0E0F00112233445566778899"):
                found = [len(store.query_messages_by_key(batch.topic, key, 64, 0, 2**62)) for store in stores]
                assert found[0] == found[1]
        finally:
            for store in stores:
                store.close()


def test_batch_put_stores_the_callers_encoded_properties(tmp_path: Path) -> None:
    """The caller's bytes are what the record carries (the broker passes canonical wire bytes)."""
    store = MessageStore(tiny_config(tmp_path))
    store.open()
    try:
        batch = BatchPut(
            "TopicA", 0, [0, 0], [b"one", b"two"], [{"UNIQ_KEY": "U1"}, {"UNIQ_KEY": "U2"}],
            [b"UNIQ_KEY\x01U1", None], 0, 1, ("127.0.0.1", 1), ("127.0.0.1", 10911),
        )  # fmt: skip
        result = store.put_batch(batch)
        assert result.status is PutStatus.PUT_OK
        messages = [decode_stored_message(record)[0] for record in _records(store, result)]
        assert [(m.body, m.properties, m.queue_offset) for m in messages] == [
            (b"one", {"UNIQ_KEY": "U1"}, 0),
            (b"two", {"UNIQ_KEY": "U2"}, 1),
        ]
        assert len(store.query_messages_by_key("TopicA", "U2", 8, 0, 2**62)) == 1
    finally:
        store.close()


def test_batch_put_appends_stamps_and_replaces_a_messages_own_value(tmp_path: Path) -> None:
    store = MessageStore(tiny_config(tmp_path))
    store.open()
    try:
        batch = BatchPut(
            "TopicA", 0, [0, 0, 0], [b"a", b"b", b"c"],
            [{"UNIQ_KEY": "U1"}, {"CLUSTER": "mine", "UNIQ_KEY": "U2"}, {}],
            [b"UNIQ_KEY\x01U1", b"CLUSTER\x01mine\x02UNIQ_KEY\x01U2", b""], 0, 1, ("127.0.0.1", 1),
            ("127.0.0.1", 10911), {"CLUSTER": "DefaultCluster", "TRACE_ON": "false"},
        )  # fmt: skip
        result = store.put_batch(batch)
        assert result.status is PutStatus.PUT_OK
        records = _records(store, result)
        assert [stored_message_property_bytes(record) for record in records] == [
            b"UNIQ_KEY\x01U1\x02CLUSTER\x01DefaultCluster\x02TRACE_ON\x01false",
            b"CLUSTER\x01DefaultCluster\x02UNIQ_KEY\x01U2\x02TRACE_ON\x01false",
            b"CLUSTER\x01DefaultCluster\x02TRACE_ON\x01false",
        ]
        # The caller's mappings stay as they were.
        assert batch.properties is not None
        assert batch.properties[1] == {"CLUSTER": "mine", "UNIQ_KEY": "U2"}
    finally:
        store.close()
