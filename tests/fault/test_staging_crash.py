"""A staged commit cut by a crash at each step is all-or-nothing and exactly once after restart.

Method: ``staging_child.py`` stages 4 chunks of 30 messages and commits them under one key,
ending itself (os._exit, like kill -9) at the Nth hit of a put-path failpoint: before the ledger
record, after it, between chunks, with a chunk's records in the CommitLog but not dispatched,
and before the done record. The store directory is then opened here; the staging service's start
finishes any recorded commit. Checker: the target queues hold either none of the 120 messages
(the crash came before the ledger record) or each of them exactly once; a second commit of the
key then reports it committed (or, with nothing recorded, commits it), and the queues still hold
each message once.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from orbitmq.broker.staging import CommitOutcome
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.protocol.staging import CommitBody
from orbitmq.store.message_store import GetStatus, MessageStore
from tests.fault.staging_child import CHUNKS, KEY, PER_CHUNK, TOPIC, body, open_service

pytestmark = pytest.mark.fault

REPO_ROOT = Path(__file__).resolve().parents[2]


def _bodies(store: MessageStore) -> Counter[bytes]:
    found: Counter[bytes] = Counter()
    for queue_id in (0, 1):
        offset = 0
        while True:
            result = store.get_messages(TOPIC, queue_id, offset, 64, 1 << 24)
            if result.status is not GetStatus.FOUND:
                break
            found.update(decode_stored_message(buffer)[0].body for buffer in result.buffers)
            offset = result.next_begin_offset
    return found


@pytest.mark.parametrize(
    ("failpoint", "hits", "recorded"),
    [
        ("commit_log.before_write", 1, False),  # before the ledger record
        ("commit_log.before_write", 2, True),  # ledger recorded, no message written
        ("commit_log.before_write", 4, True),  # two chunks written
        ("commit_log.after_write", 3, True),  # second chunk in the CommitLog, not dispatched
        ("commit_log.before_write", 2 + CHUNKS, True),  # every chunk written, no done record
    ],
)
def test_staged_commit_cut_by_a_crash_is_finished_exactly_once(
    tmp_path: Path, failpoint: str, hits: int, recorded: bool
) -> None:
    child = subprocess.run(
        [sys.executable, "-m", "tests.fault.staging_child", str(tmp_path), failpoint, str(hits)],
        cwd=REPO_ROOT, capture_output=True, timeout=120,
    )  # fmt: skip
    assert child.returncode == 137, child.stderr.decode()[-3000:]
    offsets = [int(word) for word in child.stdout.decode().split()[1:] if word.isdigit()]
    assert len(offsets) == CHUNKS
    every = Counter(body(chunk, i) for chunk in range(CHUNKS) for i in range(PER_CHUNK))

    store, service = open_service(tmp_path)
    try:
        service.load()
        after_start = _bodies(store)
        assert after_start == (every if recorded else Counter())
        assert (KEY in service.ledger) is recorded
        again = asyncio.run(service.commit(KEY, CommitBody(offsets)))
        assert isinstance(again, CommitOutcome) and again.already is recorded
        assert _bodies(store) == every
    finally:
        store.close()


def test_staged_commit_stopped_by_a_failed_put_is_finished_by_the_next_commit(tmp_path: Path) -> None:
    from orbitmq.broker.validation import Rejection
    from orbitmq.store._fs import failpoints
    from tests.fault.staging_child import stage_chunks

    store, service = open_service(tmp_path)
    try:
        offsets = stage_chunks(service)
        hits = 0

        def fail_third_put() -> None:  # the ledger record, chunk 0, then chunk 1 fails
            nonlocal hits
            hits += 1
            if hits == 3:
                raise OSError("disk went away")

        failpoints.arm("commit_log.before_write", fail_third_put)
        try:
            failed = asyncio.run(service.commit(KEY, CommitBody(offsets)))
        finally:
            failpoints.disarm("commit_log.before_write")
        assert isinstance(failed, Rejection) and "failed" in failed.remark
        partial = _bodies(store)
        assert sum(partial.values()) == PER_CHUNK and max(partial.values()) == 1
        again = asyncio.run(service.commit(KEY, CommitBody(offsets)))
        assert isinstance(again, CommitOutcome) and again.already
        assert _bodies(store) == Counter(body(chunk, i) for chunk in range(CHUNKS) for i in range(PER_CHUNK))
        assert service.ledger[KEY].done
    finally:
        store.close()
