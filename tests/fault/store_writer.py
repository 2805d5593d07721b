"""Child process of the store crash tests: put messages under SYNC_FLUSH until killed.

Usage: ``python store_writer.py DIR --segment-bytes N --queue-entries N --seed N
[--failpoint NAME --failpoint-hits N] [--count N] [--thorough-flush-ms N]``

It opens a MessageStore on DIR (running crash recovery when the previous writer was
killed), prints ``READY``, then puts messages to random topics and queues, sometimes as a
batch, and after each put's flush future resolves True prints one line per message::

    ACK <topic> <queue id> <queue offset> <commit-log offset> <body digest>

flushing stdout each time, so every line the parent reads names a message the store
acknowledged as durable. Bodies are derived from the seed and a counter, so the parent
can check them through the digest. With ``--failpoint`` the process ends itself with
os._exit at that failpoint's Nth hit, a crash at a precise step of the put or flush path.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
from pathlib import Path

from orbitmq.store._fs import crash_process, failpoints
from orbitmq.store.config import FlushDiskType, StoreConfig
from orbitmq.store.message_store import MessageStore, PutMessageRequest, PutStatus

TOPICS = ("CrashA", "CrashB", "CrashC")
QUEUES_PER_TOPIC = 4
BODY_BYTES_MAX = 2048
FLUSH_WAIT_S = 10.0
INDEX_HASH_SLOTS = 64
INDEX_ENTRIES = 256


def body_digest(body: bytes) -> str:
    """What an ACK line carries for a body."""
    return hashlib.blake2b(body, digest_size=8).hexdigest()


def store_config(
    directory: Path, segment_bytes: int, queue_entries: int, thorough_flush_ms: int = 60_000
) -> StoreConfig:
    """The configuration both the writer and the checking test use."""
    return StoreConfig(
        flush_consume_queue_thorough_interval_ms=thorough_flush_ms,
        store_path_root_dir=directory,
        commit_log_segment_bytes=segment_bytes,
        consume_queue_entries_per_file=queue_entries,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        max_hash_slot_num=INDEX_HASH_SLOTS,
        max_index_num=INDEX_ENTRIES,
    )


def _request(rng: random.Random, topic: str, queue_id: int, serial: int) -> PutMessageRequest:
    body = rng.randbytes(rng.randrange(BODY_BYTES_MAX + 1))
    properties = {"UNIQ_KEY": f"{rng.getrandbits(64):016X}{serial:08X}", "KEYS": f"k{serial}"}
    if serial % 3:
        properties["TAGS"] = f"tag{serial % 5}"
    return PutMessageRequest(topic=topic, queue_id=queue_id, body=body, properties=properties)


def _arm(name: str, hits: int) -> None:
    remaining = [hits]

    def action() -> None:
        remaining[0] -= 1
        if remaining[0] <= 0:
            crash_process()

    failpoints.arm(name, action)


def run(args: argparse.Namespace) -> int:
    store = MessageStore(
        store_config(args.dir, args.segment_bytes, args.queue_entries, args.thorough_flush_ms)
    )
    store.open()
    print("READY", flush=True)
    if args.failpoint:
        _arm(args.failpoint, args.failpoint_hits)
    rng = random.Random(args.seed)
    serial = 0
    while args.count is None or serial < args.count:
        topic, queue_id = rng.choice(TOPICS), rng.randrange(QUEUES_PER_TOPIC)
        batch = [_request(rng, topic, queue_id, serial + i) for i in range(rng.choice((1, 1, 1, 2, 5)))]
        serial += len(batch)
        result = store.put_messages(batch) if len(batch) > 1 else store.put_message(batch[0])
        if result.status is not PutStatus.PUT_OK or result.flush_future is None:
            print(f"FAILED {result.status.name} {result.remark}", file=sys.stderr, flush=True)
            return 1
        if not result.flush_future.result(timeout=FLUSH_WAIT_S):
            continue  # not acknowledged: the parent must not count on it
        lines = [
            f"ACK {topic} {queue_id} {result.queue_offset + i} {result.commit_log_offsets[i]} {body_digest(r.body)}"
            for i, r in enumerate(batch)
        ]
        print("\n".join(lines), flush=True)
    store.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dir", type=Path)
    parser.add_argument("--segment-bytes", type=int, required=True)
    parser.add_argument("--queue-entries", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--failpoint", default="")
    parser.add_argument("--failpoint-hits", type=int, default=1)
    parser.add_argument("--count", type=int, default=None)
    parser.add_argument(
        "--thorough-flush-ms", type=int, default=60_000, help="checkpoint and index flush period"
    )
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
