"""Auto-renew of push consumers' deliveries: which handles to renew, by how much, until when (pure).

A 5.x push consumer receives with ``auto_renew`` and no invisible time: the server picks the
first deadline (``defaultInvisibleTimeMills``, 60 s) and keeps moving it while the consumer is
alive, so a slow listener never sees its message delivered twice. Every
``renewSchedulePeriodMillis`` the driver asks :meth:`RenewTable.due` for the handles within
``renewAheadTimeMillis`` of their deadline and moves each deadline by the next step of
:data:`RENEW_STEPS_MS` (1 m, 3 m, 5 m, 10 m, 30 m, then 1 h each time), as RocketMQ's proxy
does. A handle stops being renewed once it was first received ``renewMaxTimeMillis`` ago
(3 h), after :data:`RENEW_FAILURES_MAX` failed renewals, or when its consumer acks, nacks or
dead-letters it. When the consumer goes away (NotifyClientTermination, its stream closed, or
idle too long) :meth:`RenewTable.release` hands back all its handles so the driver makes them
visible again at once.

Only the gRPC proxy sees its clients' liveness (their streams and heartbeats), so the proxy
drives this table; the broker's POP engine just executes the changes it asks for. A renewal
keeps the delivery's identity (``broker.pop.state``), so the handle the client holds stays
valid: nothing needs the swap of old for new handles the Java proxy does.
"""

from __future__ import annotations

from dataclasses import dataclass

RENEW_STEPS_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)
RENEW_FAILURES_MAX = 3

HandleKey = tuple[str, str, str, int, int]
"""(broker name, group, topic, queue id, queue offset)."""


@dataclass(slots=True)
class RenewEntry:
    """One auto-renewed delivery."""

    receipt_handle: str
    deadline_ms: int
    first_received_ms: int
    renewals: int = 0
    failures: int = 0


class RenewTable:
    """Auto-renewed handles by owner (a client id)."""

    def __init__(self, renew_ahead_ms: int, renew_max_ms: int) -> None:
        self._ahead_ms = renew_ahead_ms
        self._max_ms = renew_max_ms
        self._owners: dict[str, dict[HandleKey, RenewEntry]] = {}

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._owners.values())

    def add(self, owner: str, key: HandleKey, receipt_handle: str, deadline_ms: int, now_ms: int) -> None:
        self._owners.setdefault(owner, {})[key] = RenewEntry(receipt_handle, deadline_ms, now_ms)

    def remove(self, owner: str, key: HandleKey) -> None:
        entries = self._owners.get(owner)
        if entries is not None:
            entries.pop(key, None)
            if not entries:
                del self._owners[owner]

    def due(self, now_ms: int) -> list[tuple[str, HandleKey, RenewEntry, int]]:
        """Handles to renew now, each with its new invisible time; drops those past the limit."""
        renewals: list[tuple[str, HandleKey, RenewEntry, int]] = []
        for owner, entries in list(self._owners.items()):
            for key, entry in list(entries.items()):
                if entry.deadline_ms - now_ms > self._ahead_ms:
                    continue
                if now_ms - entry.first_received_ms >= self._max_ms or entry.failures >= RENEW_FAILURES_MAX:
                    self.remove(owner, key)
                    continue
                step = RENEW_STEPS_MS[min(entry.renewals, len(RENEW_STEPS_MS) - 1)]
                renewals.append((owner, key, entry, step))
        return renewals

    def renewed(self, entry: RenewEntry, deadline_ms: int) -> None:
        entry.deadline_ms = deadline_ms
        entry.renewals += 1
        entry.failures = 0

    def failed(self, owner: str, key: HandleKey, entry: RenewEntry, *, gone: bool) -> None:
        """A renewal failed; ``gone`` when the delivery no longer exists (stop at once)."""
        entry.failures += 1
        if gone or entry.failures >= RENEW_FAILURES_MAX:
            self.remove(owner, key)

    def owners(self) -> list[str]:
        return list(self._owners)

    def owners_of(self, key: HandleKey) -> list[str]:
        """Owners renewing ``key`` (one at most, unless a delivery outlived its first owner)."""
        return [owner for owner, entries in self._owners.items() if key in entries]

    def release(self, owner: str) -> list[tuple[HandleKey, RenewEntry]]:
        """Forget every handle of ``owner`` and return them (its consumer went away)."""
        entries = self._owners.pop(owner, {})
        return list(entries.items())
