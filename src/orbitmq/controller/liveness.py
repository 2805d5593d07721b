"""Which brokers are alive, as one controller node hears their heartbeats.

Pure (callers pass ``now_ms``). Liveness is not replicated, as in RocketMQ: brokers heartbeat
to every controller, so each node has its own view, and only the leader acts on it. A node
that has just become leader has heard nothing it can trust about the past: :meth:`Liveness.reset`
treats every known broker as heard at that moment, so no master is deposed before it had a
whole heartbeat timeout to reach the new leader.
"""

from __future__ import annotations

from dataclasses import dataclass

from orbitmq.controller.state import Candidate

__all__ = ["Heartbeat", "Liveness"]


@dataclass(slots=True)
class Heartbeat:
    """The last heartbeat of one replica."""

    broker_name: str
    broker_id: int
    address: str
    epoch: int
    max_offset: int
    confirm_offset: int
    timeout_ms: int
    priority: int
    seen_ms: int


class Liveness:
    """The last heartbeat of every replica this node heard from."""

    def __init__(self) -> None:
        self._beats: dict[tuple[str, int], Heartbeat] = {}

    def beat(self, heartbeat: Heartbeat) -> None:
        self._beats[(heartbeat.broker_name, heartbeat.broker_id)] = heartbeat

    def get(self, broker_name: str, broker_id: int) -> Heartbeat | None:
        return self._beats.get((broker_name, broker_id))

    def reset(self, now_ms: int) -> None:
        """Count every replica as heard now (this node just became leader)."""
        for heartbeat in self._beats.values():
            heartbeat.seen_ms = max(heartbeat.seen_ms, now_ms)

    def forget(self, broker_name: str, broker_id: int) -> None:
        self._beats.pop((broker_name, broker_id), None)

    def is_alive(self, broker_name: str, broker_id: int, now_ms: int) -> bool:
        heartbeat = self._beats.get((broker_name, broker_id))
        return heartbeat is not None and now_ms - heartbeat.seen_ms <= heartbeat.timeout_ms

    def live_candidates(self, broker_name: str, now_ms: int) -> dict[int, Candidate]:
        """Every live replica of ``broker_name`` as an election candidate."""
        return {
            heartbeat.broker_id: Candidate(
                heartbeat.broker_id, heartbeat.epoch, heartbeat.max_offset, heartbeat.priority
            )
            for (name, _), heartbeat in self._beats.items()
            if name == broker_name and now_ms - heartbeat.seen_ms <= heartbeat.timeout_ms
        }
