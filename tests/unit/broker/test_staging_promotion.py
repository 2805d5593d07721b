"""The staged-writes ledger of a broker made master in controller mode: loaded from its store.

A second :class:`StagingService` over the same store plays the slave that started before the
commits (its ledger empty): :meth:`StagingService.promote` must give it every committed key and
finish a commit that was recorded but not applied, once the store's read limit lets it read
the log's end, and not serve before.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from orbitmq.broker.staging import CommitOutcome, StagingService
from orbitmq.broker.topics import TopicConfigTable
from orbitmq.model.message import MessageConst
from orbitmq.model.route import TopicConfig
from orbitmq.protocol.batch import encode_batch_item
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.protocol.staging import CommitBody
from orbitmq.store.message_store import GetStatus, MessageStore, PutResult
from tests.fault.staging_child import KEY, PER_CHUNK, TOPIC, body, open_service, stage_chunks


def _bodies(store: MessageStore) -> Counter[bytes]:
    found: Counter[bytes] = Counter()
    for queue_id in (0, 1):
        offset = 0
        while (result := store.get_messages(TOPIC, queue_id, offset, 64, 1 << 24)).status is GetStatus.FOUND:
            found.update(decode_stored_message(buffer)[0].body for buffer in result.buffers)
            offset = result.next_begin_offset
    return found


def _half_done(old_master: StagingService, key: tuple[str, int], offsets: list[int]) -> None:
    """The ledger record of a commit whose messages were never written (the master died)."""
    put = old_master._put_ledger(
        {"writeId": key[0], "batchId": key[1], "chunks": offsets, "remote": {}, "starts": {f"{TOPIC}/0": 0}}
    )
    assert isinstance(put, PutResult)


async def test_staging_promotion_loads_the_ledger_and_finishes_a_half_done_commit(tmp_path: Path) -> None:
    store, old_master = open_service(tmp_path)
    try:
        committed = stage_chunks(old_master)[:1]  # chunk 0: queue 0
        assert isinstance(await old_master.commit(KEY, CommitBody(committed)), CommitOutcome)
        half_key = (KEY[0], KEY[1] + 1)
        half_offsets = [_stage_one(old_master, half_key)]
        _half_done(old_master, half_key, half_offsets)
        expected = Counter(body(0, i) for i in range(PER_CHUNK))
        assert _bodies(store) == expected

        topics = TopicConfigTable()
        topics.put(TopicConfig(TOPIC, 2, 2))
        promoted = StagingService(store, topics, "DefaultCluster", lambda: ("127.0.0.1", 1), lambda: 0)
        assert not promoted.serving
        store.read_limit = 0  # the confirm offset lags: the copied ledger is not readable yet
        waiting = asyncio.create_task(promoted.promote(poll_interval_ms=10))
        await asyncio.sleep(0.1)
        assert not promoted.serving and not promoted.ledger
        promoted.suspend()  # deposed before it could load
        await asyncio.wait_for(waiting, 5)
        assert not promoted.serving and not promoted.ledger

        store.read_limit = None
        await asyncio.wait_for(promoted.promote(poll_interval_ms=10), 5)
        assert promoted.serving
        assert set(promoted.ledger) == {KEY, half_key} and promoted.recovered == 1
        expected.update(f"half-{i}".encode() for i in range(3))
        assert _bodies(store) == expected

        replayed = await promoted.commit(KEY, CommitBody(committed))
        finished = await promoted.commit(half_key, CommitBody(half_offsets))
        assert isinstance(replayed, CommitOutcome) and replayed.already
        assert isinstance(finished, CommitOutcome) and finished.already
        assert _bodies(store) == expected
    finally:
        store.close()


def _stage_one(service: StagingService, key: tuple[str, int]) -> int:
    items = b"".join(
        encode_batch_item(0, f"half-{i}".encode(), {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"h{i}"})
        for i in range(3)
    )
    staged = service.stage(TOPIC, 0, "PG", key, items, (0, ("127.0.0.1", 1)))
    assert isinstance(staged, PutResult), staged
    return staged.commit_log_offsets[0]
