"""Loading the POP state at start: the snapshot, then the journal messages after it.

See ``broker.pop.journal`` for the formats and the durability argument. A snapshot that is
missing or unreadable is not fatal: the journal is then replayed from its first message still
in the store (a warning says so when retention already removed older ones, because the state
they held is then lost and those deliveries' messages count as consumed).
"""

from __future__ import annotations

import logging
from pathlib import Path

from orbitmq.broker.pop.journal import JOURNAL_TOPIC, decode_events, decode_snapshot, encode_snapshot
from orbitmq.broker.pop.state import PopStateTable
from orbitmq.errors import CorruptRecordError, RemoteProtocolError
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.store.message_store import GetStatus, MessageStore

logger = logging.getLogger(__name__)

_REPLAY_BATCH = 256


def snapshot_bytes(table: PopStateTable, journal_offset: int) -> bytes:
    """The snapshot document (taken on the event loop, so it is one consistent cut)."""
    return encode_snapshot(table, journal_offset)


def load_state(store: MessageStore, snapshot_path: Path) -> tuple[PopStateTable, int]:
    """The state the snapshot and the journal describe, and the journal offset after it."""
    table, journal_offset = _read_snapshot(snapshot_path)
    min_offset = store.get_min_queue_offset(JOURNAL_TOPIC, 0)
    max_offset = store.get_max_queue_offset(JOURNAL_TOPIC, 0)
    if journal_offset < min_offset:
        if journal_offset > 0 or snapshot_path.exists():
            logger.warning(
                "POP journal messages %d..%d are gone from the store; the state they held is lost",
                journal_offset,
                min_offset - 1,
            )
        journal_offset = min_offset
    if journal_offset > max_offset:
        # The snapshot is newer than the journal's tail: the tail was lost with unflushed
        # pages (power loss under ASYNC_FLUSH); the snapshot already holds it.
        return table, max_offset
    replayed = 0
    queue_offset = journal_offset
    while queue_offset < max_offset:
        result = store.get_messages(JOURNAL_TOPIC, 0, queue_offset, _REPLAY_BATCH, 1 << 26)
        if result.status is not GetStatus.FOUND:
            if result.next_begin_offset > queue_offset:
                queue_offset = result.next_begin_offset
                continue
            break
        for buffer, offset in zip(result.buffers, result.queue_offsets, strict=True):
            try:
                message, _ = decode_stored_message(buffer)
                table.apply_all(decode_events(message.body))
                replayed += 1
            except (RemoteProtocolError, CorruptRecordError) as exc:
                logger.error("POP journal message %d skipped: %s", offset, exc)
        queue_offset = result.next_begin_offset
    logger.info(
        "POP state: %d queues, %d deliveries in flight (%d journal messages replayed from %d)",
        len(table),
        table.inflight_count(),
        replayed,
        journal_offset,
    )
    return table, max_offset


def _read_snapshot(path: Path) -> tuple[PopStateTable, int]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return PopStateTable(), 0
    try:
        return decode_snapshot(data)
    except CorruptRecordError as exc:
        logger.error("%s; replaying the whole POP journal instead", exc)
        return PopStateTable(), 0
