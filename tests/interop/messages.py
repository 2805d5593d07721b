"""The messages every interop driver sends, and their byte-for-byte check on the consuming side.

Message ``seq`` (Java, Go and OrbitMQ's own client build it alike) has the body
``body_for(seq, size_for(seq))``, the keys ``key-<seq> k<seq % 3>``, a tag (one given, or
TagA/TagB/TagC by ``seq % 3`` with ``cycle``) and the user properties ``seq``, ``origin``,
``uprop`` (non-ASCII text), ``color`` and ``n`` (for SQL92 selectors).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Event = dict[str, object]

UPROP_PREFIX = "v\u00e4l\u00fc\u00e9-\u6d88\u606f-"


def body_for(seq: int, size: int) -> bytes:
    """A deterministic body without NUL bytes that is not plain ASCII (the C++ driver's too)."""
    return bytes(((seq * 7 + i) % 255) + 1 for i in range(size))


def size_for(seq: int, size: int = 0) -> int:
    return size if size > 0 else 1 + (seq * 37) % 300


def tag_for(seq: int, tags: str) -> str | None:
    if not tags:
        return None
    return "Tag" + "ABC"[seq % 3] if tags == "cycle" else tags


@dataclass(frozen=True)
class Expected:
    seq: int
    body: bytes
    tags: str | None
    keys: str
    properties: dict[str, str]


def expected(seq: int, tags: str = "cycle", origin: str = "java", size: int = 0) -> Expected:
    return Expected(
        seq=seq,
        body=body_for(seq, size_for(seq, size)),
        tags=tag_for(seq, tags),
        keys=f"key-{seq} k{seq % 3}",
        properties={
            "seq": str(seq),
            "origin": origin,
            "uprop": f"{UPROP_PREFIX}{seq}",
            "color": "red" if seq % 2 == 0 else "blue",
            "n": str(seq % 10),
        },
    )


def received(events: Iterable[Event], instance: str | None = None) -> list[Event]:
    return [
        event
        for event in events
        if event.get("event") == "received" and (instance is None or event.get("instance") == instance)
    ]


def check_message(event: Event, want: Expected) -> None:
    """Assert that one received event carries ``want`` exactly."""
    assert bytes.fromhex(str(event["body_hex"])) == want.body, f"body of seq {want.seq}"
    assert event["tags"] == want.tags, f"tags of seq {want.seq}"
    assert event["keys"] == want.keys, f"keys of seq {want.seq}"
    props = event["props"]
    assert isinstance(props, dict)
    for key, value in want.properties.items():
        assert props.get(key) == value, f"property {key} of seq {want.seq}: {props.get(key)!r} != {value!r}"


def check_exactly(
    events: Iterable[Event], seqs: Sequence[int], tags: str = "cycle", origin: str = "java", size: int = 0
) -> dict[int, Event]:
    """Each of ``seqs`` received once (no more, no others), every one compared byte for byte."""
    got = list(events)
    counts = Counter(int(str(_props(event)["seq"])) for event in got)
    duplicates = {seq: n for seq, n in counts.items() if n > 1}
    assert not duplicates, f"received more than once: {sorted(duplicates.items())[:10]}"
    assert set(counts) == set(seqs), (
        f"missing {sorted(set(seqs) - set(counts))[:20]}, unexpected {sorted(set(counts) - set(seqs))[:20]}"
    )
    by_seq = {}
    for event in got:
        seq = int(str(_props(event)["seq"]))
        check_message(event, expected(seq, tags, origin, size))
        by_seq[seq] = event
    return by_seq


def check_at_least_once(
    events: Iterable[Event], seqs: Sequence[int], tags: str = "cycle", origin: str = "java", size: int = 0
) -> None:
    """Each of ``seqs`` received (repeats allowed, as after a rebalance), none other, all exact."""
    got = list(events)
    seen = {int(str(_props(event)["seq"])) for event in got}
    assert seen == set(seqs), (
        f"missing {sorted(set(seqs) - seen)[:20]}, unexpected {sorted(seen - set(seqs))[:20]}"
    )
    for event in got:
        check_message(event, expected(int(str(_props(event)["seq"])), tags, origin, size))


def _props(event: Event) -> dict[str, str]:
    props = event["props"]
    assert isinstance(props, dict)
    return props
