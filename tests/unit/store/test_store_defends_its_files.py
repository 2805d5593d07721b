"""The store defends its own files, whatever its caller checked.

Goal: no put can write a record that recovery would cut off (and with it every later record),
no name can become a path outside the store, no numeric field can raise inside the put, and a
commit-log offset that is not a record boundary reads nothing. Method: tiny stores in
tmp_path; each test feeds the input a hostile request could carry straight to the store API,
then checks the record with recovery's own check, reopens the store, or looks at the disk.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orbitmq.model.message import MessageExt, SysFlag
from orbitmq.protocol.message_codec import decode_stored_message, encode_stored_message
from orbitmq.store.commit_log import RecordCheck, check_record
from orbitmq.store.message_store import MessageStore, PutMessageRequest, PutStatus

OpenStore = Callable[..., MessageStore]


def _put(store: MessageStore, **fields: object) -> tuple[PutStatus, str, list[int]]:
    values: dict[str, object] = {"topic": "TopicA", "queue_id": 0, "body": b"payload"}
    values.update(fields)
    result = store.put_message(PutMessageRequest(**values))  # type: ignore[arg-type]
    return result.status, result.remark, result.commit_log_offsets


@pytest.mark.parametrize("claimed", [SysFlag.BORNHOST_V6, SysFlag.STOREHOST_V6, 0x30 | SysFlag.COMPRESSED])
def test_store_put_derives_host_flags_from_the_address_bytes(
    open_store: OpenStore, store_root: Path, claimed: int
) -> None:
    store = open_store()
    status, remark, (offset,) = _put(store, sys_flag=claimed, body=b"claims IPv6 hosts")
    assert status is PutStatus.PUT_OK, remark
    later = [_put(store, topic="Other", body=f"later {index}".encode()) for index in range(20)]
    assert all(status is PutStatus.PUT_OK for status, _, _ in later)
    record = store.read_message(offset)
    assert record is not None
    found, size, _ = check_record(record, 0, offset, len(record))
    assert (found, size) == (RecordCheck.MESSAGE, len(record))
    message, _ = decode_stored_message(record)
    assert message.sys_flag & (SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6) == 0
    assert message.sys_flag & SysFlag.COMPRESSED == claimed & SysFlag.COMPRESSED
    store.close()
    # A restart keeps the record and every record after it.
    reopened = open_store()
    got = reopened.get_messages("Other", 0, 0, 32)
    assert [decode_stored_message(buffer)[0].body for buffer in got.buffers] == [
        f"later {index}".encode() for index in range(20)
    ]
    assert reopened.read_message(offset) == record


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("flag", 1 << 31),
        ("sys_flag", 1 << 31),
        ("reconsume_times", 1 << 31),
        ("flag", -(1 << 31) - 1),
        ("born_timestamp", 1 << 63),
        ("prepared_transaction_offset", -(1 << 63) - 1),
        ("queue_id", -1),
        ("queue_id", 1 << 31),
        ("born_host", ("127.0.0.1", 70000)),
        ("born_host", ("not-an-address", 1)),
    ],
)
def test_store_put_refuses_values_its_record_cannot_hold(
    open_store: OpenStore, field: str, value: object
) -> None:
    store = open_store()
    status, remark, _ = _put(store, **{field: value})
    assert status is PutStatus.MESSAGE_ILLEGAL
    assert remark and len(remark) < 200
    assert _put(store)[0] is PutStatus.PUT_OK


@pytest.mark.parametrize("topic", ["../escape", "a/b", "..", ".", "x\x00y", "", "t" * 128, "é"])
def test_store_refuses_topic_names_that_are_not_safe_paths(
    open_store: OpenStore, store_root: Path, topic: str
) -> None:
    store = open_store()
    before = sorted(path.name for path in store_root.parent.iterdir())
    status, remark, _ = _put(store, topic=topic)
    assert status is PutStatus.MESSAGE_ILLEGAL, remark
    assert sorted(path.name for path in store_root.parent.iterdir()) == before
    assert not (store_root / "escape").exists()


def test_store_delete_topic_with_a_path_name_deletes_nothing(open_store: OpenStore, store_root: Path) -> None:
    store = open_store()
    assert _put(store, topic="Keep")[0] is PutStatus.PUT_OK
    store.flush_consume_queues(thorough=True)
    for name in ("..", ".", "../store", "Keep/../..", ""):
        store.delete_topic(name)
    assert (store_root / "consumequeue" / "Keep" / "0").is_dir()
    assert store.get_max_queue_offset("Keep", 0) == 1


def test_store_read_message_needs_a_record_boundary(open_store: OpenStore) -> None:
    store = open_store()
    # A body that embeds a well-formed record, PHYSICALOFFSET aside.
    inner = encode_stored_message(MessageExt(topic="RMQ_SYS_TRANS_HALF_TOPIC", body=b"forged"))
    status, _, (offset,) = _put(store, body=inner)
    assert status is PutStatus.PUT_OK
    record = store.read_message(offset)
    assert record is not None
    inner_offset = offset + record.index(inner)
    assert store.read_message(inner_offset) is None
    assert store.read_message(offset + 1) is None


def test_store_open_ignores_queue_directories_with_unsafe_names(
    open_store: OpenStore, store_root: Path
) -> None:
    store = open_store()
    assert _put(store)[0] is PutStatus.PUT_OK
    store.close()
    (store_root / "consumequeue" / "bad name" / "0").mkdir(parents=True)
    (store_root / "consumequeue" / "TopicA" / "99999999999").mkdir(parents=True)
    reopened = open_store()
    assert ("bad name", 0) not in set(reopened.queues())
    assert reopened.get_max_queue_offset("TopicA", 0) == 1
