"""Controller mode's epoch file, consistent point and SyncStateSet acknowledgements (pure parts)."""

from __future__ import annotations

from pathlib import Path

from orbitmq.broker.replication.acks import SlaveLinks
from orbitmq.broker.replication.codec import decode_handshake, encode_handshake
from orbitmq.broker.replication.epochs import EpochFile, consistent_point, decode_entries, encode_entries


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def test_consistent_point_cuts_an_old_masters_unacknowledged_tail() -> None:
    # ha-replication.md §5.8: A wrote 0-1000 in epoch 1; B took over at 800 in epoch 2.
    assert consistent_point([(1, 0)], 1000, [(1, 0), (2, 800)], 1500) == 800
    # A replica behind its master keeps everything it has.
    assert consistent_point([(1, 0), (2, 800)], 900, [(1, 0), (2, 800), (3, 1200)], 2000) == 900
    # A new, empty replica: nothing to cut.
    assert consistent_point([], 0, [(1, 0)], 500) == 0
    # Nothing in common: no point (the operator must empty that store).
    assert consistent_point([(5, 0)], 100, [(1, 0)], 500) is None


def test_epoch_file_round_trips_and_rejects_a_torn_copy(tmp_path: Path) -> None:
    epochs = EpochFile(tmp_path, _write)
    epochs.append(1, 0)
    epochs.append(3, 4096)
    assert epochs.entries == [(1, 0), (3, 4096)] and epochs.last_epoch == 3
    data = (tmp_path / "epochFileCheckpoint").read_bytes()
    assert data == b"2\n" + str(__import__("zlib").crc32(b"1-0\n3-4096\n")).encode() + b"\n1-0\n3-4096\n"
    assert decode_entries(data[:-3]) is None
    (tmp_path / "epochFileCheckpoint").write_bytes(data[:-3])
    reloaded = EpochFile(tmp_path, _write)
    reloaded.load()  # the main copy is torn: the backup is read
    assert reloaded.entries == [(1, 0), (3, 4096)]
    assert decode_entries(encode_entries([])) == []


def test_epoch_file_append_drops_entries_it_supersedes(tmp_path: Path) -> None:
    epochs = EpochFile(tmp_path, _write)
    epochs.replace([(1, 0), (2, 800)])  # copied from a master: epoch 2 starts past this log's end
    epochs.append(3, 500)
    assert epochs.entries == [(1, 0), (3, 500)]


def test_links_with_required_members_acknowledge_only_what_all_hold() -> None:
    links = SlaveLinks()
    links.required = frozenset()
    assert links.acked_offset() > 10**15  # the master alone: every offset
    links.required = frozenset({2, 3})
    two, three = links.add("a", 0), links.add("b", 0)
    two.broker_id, three.broker_id = 2, 3
    links.on_report(two, 0, 0, 1000, 0)
    assert links.acked_offset() == -1  # member 3 has not started streaming
    links.on_report(three, 0, 0, 1000, 0)
    two.sent_offset = three.sent_offset = 1000
    links.on_report(two, 900, 0, 1000, 1)
    links.on_report(three, 400, 0, 1000, 1)
    assert links.acked_offset() == 400
    # A slave outside the set does not count, however far it got.
    outsider = links.add("c", 0)
    outsider.broker_id = 4
    links.on_report(outsider, 0, 0, 1000, 0)
    outsider.sent_offset = 1000
    links.on_report(outsider, 1000, 0, 1000, 2)
    assert links.acked_offset() == 400
    assert links.is_slave_ok(10_000, 1)  # members are waited for, never SLAVE_NOT_AVAILABLE


def test_handshake_names_the_slaves_broker_id() -> None:
    frame = encode_handshake(7)
    assert len(frame) == 16 and decode_handshake(frame) == 7
