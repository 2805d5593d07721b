"""The POP journal and snapshot formats (pure: bytes in, events out).

Durability design. Every change to the POP state is an event (``broker.pop.state``). Before
the broker answers a pop, an ack or a change, it appends the request's events as **one
message** to the system topic ``rmq_sys_POP_JOURNAL`` (queue 0) in its own store, so the
journal shares the CommitLog's flushing (SYNC_FLUSH waits for it), its crash recovery and its
replication; a SIGKILL loses nothing the CommitLog kept. Every few seconds, and at shutdown,
the whole state is written to ``config/popState.json`` (write to a temporary file, fsync,
rename) together with the journal queue offset it includes (``journalOffset``). A start loads
that snapshot and replays the journal from ``journalOffset`` on; a start without a snapshot
replays the journal from its first message. Old journal messages go with CommitLog retention;
the snapshot makes them unnecessary.

Journal message body: a JSON array of events, each an object whose ``e`` names its kind::

    {"e": "i", "g": group, "t": topic, "q": queueId, "c": cursor}                     InitEvent
    {"e": "p", "g", "t", "q", "pt": popTime, "v": visibleAt, "d": [offsets],
     "s": scanTo, "h": [held offsets], "mg": [[offset, messageGroup], ...]}           PopEvent
    {"e": "a", "g", "t", "q", "a": [[offset, popTime], ...]}                          AckEvent
    {"e": "c", "g", "t", "q", "o": offset, "pt": popTime, "v": visibleAt}             ChangeEvent
    {"e": "d", "g", "t", "q", "o": [offsets]}                                        DoneEvent

Snapshot (``popState.json``)::

    {"version": 1, "journalOffset": J, "lastPopTime": ms,
     "queues": [{"g", "t", "q", "c": cursor,
                 "f": [[offset, popTime, visibleAt, attempt, messageGroup, orderly], ...],
                 "h": [[offset, messageGroup], ...]}, ...]}

``orderly`` is 1 for a delivery an orderly (FIFO) pop made, else 0; a snapshot written before
it existed has five fields per delivery, read as orderly (redelivered from its queue, as every
delivery then was). Times are epoch milliseconds. Decoding never raises anything but :class:`CorruptRecordError`.
"""

from __future__ import annotations

from typing import Any

import orjson

from orbitmq.broker.pop.state import (
    AckEvent,
    ChangeEvent,
    Delivery,
    DoneEvent,
    Event,
    InitEvent,
    PopEvent,
    PopStateTable,
    QueueKey,
    QueuePopState,
)
from orbitmq.errors import CorruptRecordError

JOURNAL_TOPIC = "rmq_sys_POP_JOURNAL"
SNAPSHOT_FILE = "popState.json"
SNAPSHOT_VERSION = 1


def _key_fields(key: QueueKey) -> dict[str, Any]:
    return {"g": key[0], "t": key[1], "q": key[2]}


def _event_to_json(event: Event) -> dict[str, Any]:
    document = _key_fields(event.key)
    if isinstance(event, InitEvent):
        document.update(e="i", c=event.cursor)
    elif isinstance(event, PopEvent):
        document.update(
            e="p",
            pt=event.pop_time_ms,
            v=event.visible_at_ms,
            d=list(event.delivered),
            s=event.scan_to,
        )
        if event.held:
            document["h"] = list(event.held)
        if event.groups:
            document["mg"] = [[offset, group] for offset, group in event.groups.items()]
    elif isinstance(event, AckEvent):
        document.update(e="a", a=[list(pair) for pair in event.acks])
    elif isinstance(event, ChangeEvent):
        document.update(e="c", o=event.offset, pt=event.pop_time_ms, v=event.visible_at_ms)
    else:
        document.update(e="d", o=list(event.offsets))
    return document


def encode_events(events: list[Event]) -> bytes:
    """One journal message body."""
    return orjson.dumps([_event_to_json(event) for event in events])


def _ints(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(item, int) for item in value):
        raise ValueError(f"not a list of integers: {value!r:.80}")
    return tuple(value)


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"not an integer: {value!r:.80}")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"not a string: {value!r:.80}")
    return value


def _event_from_json(document: Any) -> Event:
    if not isinstance(document, dict):
        raise ValueError("an event is not an object")
    key: QueueKey = (_str(document["g"]), _str(document["t"]), _int(document["q"]))
    kind = document["e"]
    if kind == "i":
        return InitEvent(key, _int(document["c"]))
    if kind == "p":
        groups = {_int(pair[0]): _str(pair[1]) for pair in document.get("mg", [])}
        return PopEvent(
            key,
            _int(document["pt"]),
            _int(document["v"]),
            _ints(document["d"]),
            _int(document["s"]),
            _ints(document.get("h", [])),
            groups,
        )
    if kind == "a":
        acks = tuple((_int(pair[0]), _int(pair[1])) for pair in document["a"])
        return AckEvent(key, acks)
    if kind == "c":
        return ChangeEvent(key, _int(document["o"]), _int(document["pt"]), _int(document["v"]))
    if kind == "d":
        return DoneEvent(key, _ints(document["o"]))
    raise ValueError(f"unknown event kind {kind!r:.20}")


def decode_events(body: bytes) -> list[Event]:
    """The events of one journal message.

    Raises:
        CorruptRecordError: the body is not a journal message this version wrote.
    """
    try:
        documents = orjson.loads(body)
        if not isinstance(documents, list):
            raise ValueError("the body is not a JSON array")
        return [_event_from_json(document) for document in documents]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, ValueError) as exc:
        raise CorruptRecordError(f"{JOURNAL_TOPIC} message: {exc}") from exc


def encode_snapshot(table: PopStateTable, journal_offset: int) -> bytes:
    """``popState.json`` for ``table``, which includes every journal message below ``journal_offset``."""
    queues = []
    for (group, topic, queue_id), state in table.items():
        queues.append(
            {
                "g": group,
                "t": topic,
                "q": queue_id,
                "c": state.cursor,
                "f": [
                    [offset, d.pop_time_ms, d.visible_at_ms, d.attempt, d.message_group, int(d.orderly)]
                    for offset, d in sorted(state.inflight.items())
                ],
                "h": [[offset, group_name] for offset, group_name in sorted(state.held.items())],
            }
        )
    document = {
        "version": SNAPSHOT_VERSION,
        "journalOffset": journal_offset,
        "lastPopTime": table.last_pop_time_ms,
        "queues": queues,
    }
    return orjson.dumps(document)


def decode_snapshot(data: bytes) -> tuple[PopStateTable, int]:
    """The table a snapshot holds and the journal offset to replay from.

    Raises:
        CorruptRecordError: not a snapshot this version wrote.
    """
    table = PopStateTable()
    try:
        document = orjson.loads(data)
        if not isinstance(document, dict) or document.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"not a version {SNAPSHOT_VERSION} snapshot")
        journal_offset = _int(document["journalOffset"])
        table.last_pop_time_ms = _int(document["lastPopTime"])
        for entry in document["queues"]:
            key: QueueKey = (_str(entry["g"]), _str(entry["t"]), _int(entry["q"]))
            table.apply(InitEvent(key, _int(entry["c"])))
            state = table.get(key)
            assert isinstance(state, QueuePopState)
            for fields in entry["f"]:
                offset, pop_time_ms, visible_at_ms, attempt, message_group = fields[:5]
                orderly = _int(fields[5]) != 0 if len(fields) > 5 else True
                state.inflight[_int(offset)] = Delivery(
                    _int(pop_time_ms), _int(visible_at_ms), _int(attempt), _str(message_group), orderly
                )
            for offset, message_group in entry["h"]:
                state.held[_int(offset)] = _str(message_group)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CorruptRecordError(f"{SNAPSHOT_FILE}: {exc}") from exc
    return table, journal_offset
