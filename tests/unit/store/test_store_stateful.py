"""MessageStore against a plain model, under random put / get / close-reopen / crash-reopen.

Goal: whatever the order of operations, every acknowledged message (SYNC_FLUSH: its flush
future resolved True) is readable at its queue offset with the same body and properties,
queue offsets stay contiguous, and after every reopen the offline verifier finds the store
consistent.

Method: a Hypothesis RuleBasedStateMachine. The model is one list of (body, properties) per
(topic, queue id). A crash is simulated without a test hook: the store's directory is copied
while the store is open (a process crash keeps what reached the page cache, and the copy is
exactly that), the abort marker included; the original store is then closed and discarded and
a new one opens the copy, taking the crash-recovery path. A crash may also tear the tail of the
copy (garbage after the last record, as a half-written unacknowledged record would leave) and
lose the consume queues or the checkpoint, which recovery must rebuild.

Replay: Hypothesis prints the failing steps and a ``@reproduce_failure`` blob; run with
``--hypothesis-seed=N`` to repeat a whole run.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.protocol.tags import tags_code
from orbitmq.store.config import FlushDiskType, StoreConfig
from orbitmq.store.message_store import GetStatus, MessageStore, PutMessageRequest, PutStatus
from orbitmq.store.verify import verify_store
from tests.support.crash_copy import copy_as_crashed

TOPICS = ("TopicA", "TopicB", "TopicC")
QUEUES = 4
TAGS = ("red", "green", "blue")
SEGMENT_BYTES = 16 * 1024
QUEUE_ENTRIES = 8
INDEX_HASH_SLOTS = 16
INDEX_ENTRIES = 64
FLUSH_WAIT_S = 10.0

Expected = tuple[bytes, dict[str, str]]

bodies = st.binary(max_size=2048)
tags = st.sampled_from((None, *TAGS))
keys = st.lists(st.sampled_from(("k1", "k2", "order-7", "user 9")), max_size=2).map(" ".join)


def _properties(tag: str | None, key_text: str, serial: int) -> dict[str, str]:
    properties = {"UNIQ_KEY": f"UNIQ{serial:012d}"}
    if tag is not None:
        properties["TAGS"] = tag
    if key_text:
        properties["KEYS"] = key_text
    return properties


class StoreMachine(RuleBasedStateMachine):
    """One store directory per generation; a crash moves to a copy in the next generation."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="orbitmq-stateful-"))
        self.generation = 0
        self.model: dict[tuple[str, int], list[Expected]] = defaultdict(list)
        self.serial = 0
        self.store = self._open(self._directory())

    def _directory(self) -> Path:
        return self.root / f"generation-{self.generation}"

    @staticmethod
    def _open(directory: Path) -> MessageStore:
        store = MessageStore(
            StoreConfig(
                store_path_root_dir=directory,
                commit_log_segment_bytes=SEGMENT_BYTES,
                consume_queue_entries_per_file=QUEUE_ENTRIES,
                flush_disk_type=FlushDiskType.SYNC_FLUSH,
                max_hash_slot_num=INDEX_HASH_SLOTS,
                max_index_num=INDEX_ENTRIES,
            )
        )
        store.open()
        return store

    def _verify(self) -> None:
        report = verify_store(
            self._directory(),
            commit_log_segment_bytes=SEGMENT_BYTES,
            consume_queue_entries_per_file=QUEUE_ENTRIES,
            index_hash_slot_num=INDEX_HASH_SLOTS,
            index_num=INDEX_ENTRIES,
        )
        assert report.ok, report.render()

    def _request(
        self, topic: str, queue_id: int, body: bytes, tag: str | None, key_text: str
    ) -> PutMessageRequest:
        self.serial += 1
        return PutMessageRequest(
            topic=topic, queue_id=queue_id, body=body, properties=_properties(tag, key_text, self.serial)
        )

    def _acknowledge(self, requests: list[PutMessageRequest]) -> None:
        topic, queue_id = requests[0].topic, requests[0].queue_id
        result = (
            self.store.put_messages(requests) if len(requests) > 1 else self.store.put_message(requests[0])
        )
        assert result.status is PutStatus.PUT_OK, result.remark
        queue = self.model[(topic, queue_id)]
        assert result.queue_offset == len(queue), "queue offsets must be contiguous"
        assert len(result.commit_log_offsets) == len(requests)
        assert result.flush_future is not None and result.flush_future.result(timeout=FLUSH_WAIT_S)
        queue.extend((request.body, dict(request.properties)) for request in requests)

    @rule(
        topic=st.sampled_from(TOPICS),
        queue_id=st.integers(0, QUEUES - 1),
        body=bodies,
        tag=tags,
        key_text=keys,
    )
    def put(self, topic: str, queue_id: int, body: bytes, tag: str | None, key_text: str) -> None:
        self._acknowledge([self._request(topic, queue_id, body, tag, key_text)])

    @rule(
        topic=st.sampled_from(TOPICS),
        queue_id=st.integers(0, QUEUES - 1),
        batch=st.lists(st.tuples(st.binary(max_size=512), tags), min_size=1, max_size=8),
    )
    def put_batch(self, topic: str, queue_id: int, batch: list[tuple[bytes, str | None]]) -> None:
        self._acknowledge([self._request(topic, queue_id, body, tag, "") for body, tag in batch])

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), count=st.integers(1, 40))
    def get(self, data: st.DataObject, count: int) -> None:
        topic, queue_id = data.draw(st.sampled_from(sorted(self.model)))
        queue = self.model[(topic, queue_id)]
        queue_offset = data.draw(st.integers(0, len(queue)))
        result = self.store.get_messages(topic, queue_id, queue_offset, count)
        assert (result.min_offset, result.max_offset) == (0, len(queue))
        if queue_offset == len(queue):
            assert result.status is not GetStatus.FOUND and result.message_count == 0
            assert result.next_begin_offset == queue_offset
            return
        assert result.status is GetStatus.FOUND
        assert 1 <= result.message_count <= count
        messages = decode_stored_messages(result.body())
        assert result.queue_offsets == list(range(queue_offset, queue_offset + len(messages)))
        assert result.next_begin_offset == queue_offset + len(messages)
        for message, (body, properties) in zip(messages, queue[queue_offset:], strict=False):
            assert (message.topic, message.queue_id) == (topic, queue_id)
            assert message.body == body
            assert message.properties == properties

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), tag=st.sampled_from(TAGS))
    def get_with_tag_filter(self, data: st.DataObject, tag: str) -> None:
        topic, queue_id = data.draw(st.sampled_from(sorted(self.model)))
        queue = self.model[(topic, queue_id)]
        queue_offset = data.draw(st.integers(0, max(len(queue) - 1, 0)))
        code = tags_code(tag)
        result = self.store.get_messages(
            topic, queue_id, queue_offset, 32, tag_filter=lambda value: value == code
        )
        scanned = queue[queue_offset : result.next_begin_offset]
        wanted = [body for body, properties in scanned if properties.get("TAGS") == tag]
        assert [message.body for message in decode_stored_messages(result.body())] == wanted
        assert (result.status is GetStatus.FOUND) == bool(wanted)

    @rule()
    def close_reopen(self) -> None:
        self.store.close()
        self._verify()
        self.store = self._open(self._directory())

    @rule(
        garbage=st.binary(min_size=1, max_size=300), drop_queues=st.booleans(), drop_checkpoint=st.booleans()
    )
    def crash_reopen(self, garbage: bytes, drop_queues: bool, drop_checkpoint: bool) -> None:
        crashed = self._directory()
        end_offset = self.store.max_commit_log_offset
        self.generation += 1
        copy = self._directory()
        copy_as_crashed(crashed, copy)
        self.store.close()
        assert (copy / "abort").exists(), "an open store must keep its abort marker"
        self._tear_tail(copy, end_offset, b"\x01" + garbage)
        if drop_queues:
            shutil.rmtree(copy / "consumequeue", ignore_errors=True)
        if drop_checkpoint:
            (copy / "checkpoint").unlink(missing_ok=True)
        self.store = self._open(copy)
        assert self.store.max_commit_log_offset == end_offset
        self.store.close()
        self._verify()
        self.store = self._open(copy)

    @staticmethod
    def _tear_tail(directory: Path, end_offset: int, garbage: bytes) -> None:
        """Write garbage after the end of written data, as a torn unacknowledged record would."""
        segment_start = end_offset - end_offset % SEGMENT_BYTES
        path = directory / "commitlog" / f"{segment_start:020d}"
        file_position = end_offset - segment_start
        if not path.exists() or file_position == 0:
            return
        with open(path, "r+b") as handle:
            handle.seek(file_position)
            handle.write(garbage[: SEGMENT_BYTES - file_position])

    @invariant()
    def queue_offsets_match_model(self) -> None:
        for (topic, queue_id), queue in self.model.items():
            assert self.store.get_max_queue_offset(topic, queue_id) == len(queue)
            assert self.store.get_min_queue_offset(topic, queue_id) == 0

    def teardown(self) -> None:
        try:
            if self.store.is_open:
                self.store.close()
                self._verify()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


StoreMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_store_stateful_matches_model = StoreMachine.TestCase


def test_store_stateful_tail_tear_lands_after_written_data(tmp_path: Path) -> None:
    """The crash rule's tear writes only past the end of written data (so it never hits an ack)."""
    directory = tmp_path / "commitlog"
    directory.mkdir()
    segment = directory / f"{SEGMENT_BYTES:020d}"
    segment.write_bytes(bytes(SEGMENT_BYTES))
    StoreMachine._tear_tail(tmp_path, SEGMENT_BYTES + 100, random.Random(1).randbytes(40))
    data = segment.read_bytes()
    assert (
        data[:100] == bytes(100) and data[100:140] != bytes(40) and data[140:] == bytes(SEGMENT_BYTES - 140)
    )
