"""ConsumerOffsetTable: commits, queries, dirty tracking and the consumerOffset.json round trip."""

from __future__ import annotations

import orjson
import pytest

from orbitmq.broker.offsets import ConsumerOffsetTable
from orbitmq.errors import ConfigError


def test_offset_table_query_returns_none_for_unknown_group() -> None:
    table = ConsumerOffsetTable()
    assert table.query("G", "T", 0) is None


def test_offset_table_commit_then_query_returns_offset() -> None:
    table = ConsumerOffsetTable()
    table.commit("G", "T", 3, 42)
    assert table.query("G", "T", 3) == 42
    assert table.query("G", "T", 2) is None
    assert table.query("H", "T", 3) is None


def test_offset_table_dirty_only_after_a_change() -> None:
    table = ConsumerOffsetTable()
    assert not table.dirty
    table.commit("G", "T", 0, 5)
    assert table.dirty
    table.encode()
    assert not table.dirty
    table.commit("G", "T", 0, 5)
    assert not table.dirty


def test_offset_table_encode_uses_rocketmq_layout() -> None:
    table = ConsumerOffsetTable()
    table.commit("CG", "TopicA", 1, 7)
    document = orjson.loads(table.encode())
    assert document == {"offsetTable": {"TopicA@CG": {"1": 7}}}


def test_offset_table_round_trips_through_json() -> None:
    table = ConsumerOffsetTable()
    table.commit("CG", "%RETRY%CG", 0, 3)
    table.commit("CG", "TopicA", 2, 9)
    loaded = ConsumerOffsetTable.decode(table.encode())
    assert sorted(loaded) == [("CG", "%RETRY%CG", 0, 3), ("CG", "TopicA", 2, 9)]


def test_offset_table_remove_topic_forgets_its_offsets() -> None:
    table = ConsumerOffsetTable()
    table.commit("G1", "T", 0, 1)
    table.commit("G2", "T", 0, 2)
    table.commit("G1", "U", 0, 3)
    table.remove_topic("T")
    assert table.query("G1", "T", 0) is None
    assert table.query("G1", "U", 0) == 3
    assert table.groups_of_topic("U") == {"G1"}


@pytest.mark.parametrize("data", [b"{", b"[]", b'{"offsetTable": []}'])
def test_offset_table_decode_rejects_malformed_documents(data: bytes) -> None:
    with pytest.raises(ConfigError, match="consumerOffset.json"):
        ConsumerOffsetTable.decode(data)


def test_offset_table_decode_skips_damaged_entries_and_keeps_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    data = (
        b'{"offsetTable": {"noseparator": {"0": 1}, "@G": {"0": 1}, "T@": {"0": 1}, "../x@G": {"0": 1},'
        b' "T@G": {"x": 1, "-1": 2, "0": 7, "1": "y", "2": 9}, "U@G": [1]}}'
    )
    table = ConsumerOffsetTable.decode(data)
    assert sorted(table) == [("G", "T", 0, 7), ("G", "T", 2, 9)]
    assert "skipped" in caplog.text


def test_offset_table_holds_only_what_its_loader_accepts() -> None:
    table = ConsumerOffsetTable()
    assert not table.commit("G", "", 0, 1)
    assert not table.commit("", "T", 0, 1)
    assert not table.commit("G", "T", -1, 1)
    assert not table.commit("G", "a/b", 0, 1)
    assert table.commit("G", "T", 0, 1)
    assert sorted(ConsumerOffsetTable.decode(table.encode())) == [("G", "T", 0, 1)]


def test_offset_table_local_commits_ahead_of_master_are_kept_until_merged() -> None:
    slave = ConsumerOffsetTable()
    slave.track_local_commits()
    slave.merge(_table({("T", "G"): {0: 10, 1: 10}}))  # copied from the master: not local
    slave.commit_unless_reset("G", "T", 0, 50)  # a consumer, master away
    slave.commit_unless_reset("G", "T", 1, 5)
    slave.commit_unless_reset("G2", "T", 0, 7)
    master = _table({("T", "G"): {0: 10, 1: 20}})
    ahead = slave.local_commits_ahead_of(master)
    assert ahead == {("T", "G"): {0: 50}, ("T", "G2"): {0: 7}}  # queue 1: the master is ahead
    slave.commit_unless_reset("G", "T", 0, 60)  # committed while the merge was on its way
    slave.forget_local_commits(ahead)
    assert slave.local_commits_ahead_of(master) == {("T", "G"): {0: 60}}


def test_offset_table_merge_max_keeps_the_larger_and_pending_resets() -> None:
    master = _table({("T", "G"): {0: 30, 1: 30}})
    master.assign_reset("G", "T", 2, 3)
    moved = master.merge_max(_table({("T", "G"): {0: 50, 1: 10, 2: 99, 3: 4}}))
    assert moved == 2
    assert [master.query("G", "T", queue_id) for queue_id in range(4)] == [50, 30, 3, 4]


def test_offset_table_without_tracking_reports_no_local_commits() -> None:
    table = ConsumerOffsetTable()
    table.commit_unless_reset("G", "T", 0, 5)
    assert table.local_commits_ahead_of(ConsumerOffsetTable()) == {}


def _table(entries: dict[tuple[str, str], dict[int, int]]) -> ConsumerOffsetTable:
    table = ConsumerOffsetTable()
    for (topic, group), queues in entries.items():
        for queue_id, queue_offset in queues.items():
            table.commit(group, topic, queue_id, queue_offset)
    return table
