"""Child process of the staged-commit crash test: stage chunks, then commit them and crash inside.

Usage: ``python -m tests.fault.staging_child DIR FAILPOINT HITS``

Opens a MessageStore on DIR, stages :data:`CHUNKS` chunks of :data:`PER_CHUNK` messages for
topic :data:`TOPIC` (queues 0 and 1) under key :data:`KEY`, prints ``STAGED <offsets>``, arms
FAILPOINT to end the process with os._exit at its HITS-th hit, and commits. The commit's puts
hit ``commit_log.before_write`` / ``commit_log.after_write`` once each, in this order: the
ledger record, one put per chunk, the done record.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from orbitmq.broker.staging import StagingService
from orbitmq.broker.topics import TopicConfigTable
from orbitmq.model.message import MessageConst
from orbitmq.model.route import TopicConfig
from orbitmq.protocol.batch import encode_batch_item
from orbitmq.protocol.staging import CommitBody
from orbitmq.store._fs import crash_process, failpoints
from orbitmq.store.config import StoreConfig
from orbitmq.store.message_store import MessageStore, PutResult

TOPIC = "StagedCrash"
KEY = ("write-crash", 5)
CHUNKS = 4
PER_CHUNK = 30
HOST = ("127.0.0.1", 10911)


def open_service(directory: Path) -> tuple[MessageStore, StagingService]:
    """The store and staging service both the child and the checking test use."""
    store = MessageStore(StoreConfig(store_path_root_dir=directory, commit_log_segment_bytes=1 << 20))
    store.open()
    topics = TopicConfigTable()
    topics.put(TopicConfig(TOPIC, 2, 2))
    return store, StagingService(store, topics, "DefaultCluster", lambda: HOST, lambda: 1_700_000_000_000)


def body(chunk: int, index: int) -> bytes:
    return f"c{chunk}-m{index}".encode()


def stage_chunks(service: StagingService) -> list[int]:
    """Stage the CHUNKS chunks; their commit-log offsets."""
    offsets = []
    for chunk in range(CHUNKS):
        items = [
            encode_batch_item(
                0, body(chunk, i), {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"u{chunk}-{i}"}
            )
            for i in range(PER_CHUNK)
        ]
        staged = service.stage(TOPIC, chunk % 2, "PG", KEY, b"".join(items), (0, HOST))
        assert isinstance(staged, PutResult), staged
        offsets.append(staged.commit_log_offsets[0])
    return offsets


def main(directory: str, failpoint: str, hits: int) -> None:
    _, service = open_service(Path(directory))
    offsets = stage_chunks(service)
    print("STAGED", *offsets, flush=True)
    seen = 0

    def count_then_crash() -> None:
        nonlocal seen
        seen += 1
        if seen == hits:
            crash_process()

    failpoints.arm(failpoint, count_then_crash)
    asyncio.run(service.commit(KEY, CommitBody(offsets)))
    print("COMMITTED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
