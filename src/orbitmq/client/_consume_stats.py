"""A push consumer's rates per topic, as GET_CONSUMER_RUNNING_INFO's ``statusTable`` reports them.

Pure state with time passed in: each event adds to the current second's bucket of its topic;
rates are sums over the buckets of the last minute divided by the seconds they cover (RocketMQ's
ConsumerStatsManager keeps the same minute figures). Response times are averages in ms.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from orbitmq.protocol.client_bodies import ConsumeStatus

__all__ = ["ConsumeStatsRecorder"]

WINDOW_S = 60


@dataclass(slots=True)
class _Bucket:
    second: int
    pulled: int = 0
    pull_rt_ms: float = 0.0
    pulls: int = 0
    ok: int = 0
    failed: int = 0
    consume_rt_ms: float = 0.0
    consumes: int = 0


@dataclass(slots=True)
class _Topic:
    buckets: deque[_Bucket] = field(default_factory=deque)
    failed_total: int = 0

    def bucket(self, now_ms: int) -> _Bucket:
        second = now_ms // 1000
        if not self.buckets or self.buckets[-1].second != second:
            self.buckets.append(_Bucket(second))
            while self.buckets and self.buckets[0].second <= second - WINDOW_S:
                self.buckets.popleft()
        return self.buckets[-1]


class ConsumeStatsRecorder:
    """Pull and consume events of one consumer, per topic."""

    def __init__(self) -> None:
        self._topics: dict[str, _Topic] = {}

    def _topic(self, topic: str) -> _Topic:
        found = self._topics.get(topic)
        if found is None:
            found = self._topics[topic] = _Topic()
        return found

    def on_pull(self, topic: str, count: int, rt_ms: float, now_ms: int) -> None:
        bucket = self._topic(topic).bucket(now_ms)
        bucket.pulled += count
        bucket.pulls += 1
        bucket.pull_rt_ms += rt_ms

    def on_consumed(
        self, topic: str, ok: int, failed: int, rt_ms: float, now_ms: int, calls: int = 1
    ) -> None:
        """``calls`` listener calls finished, ``ok`` + ``failed`` messages, ``rt_ms`` their total time."""
        entry = self._topic(topic)
        bucket = entry.bucket(now_ms)
        bucket.ok += ok
        bucket.failed += failed
        bucket.consumes += calls
        bucket.consume_rt_ms += rt_ms
        entry.failed_total += failed

    def status(self, now_ms: int) -> dict[str, ConsumeStatus]:
        """Each topic's rates over the last minute."""
        statuses = {}
        for topic, entry in self._topics.items():
            recent = [bucket for bucket in entry.buckets if bucket.second > now_ms // 1000 - WINDOW_S]
            if not recent:
                statuses[topic] = ConsumeStatus(consume_failed_msgs=entry.failed_total)
                continue
            seconds = max(now_ms // 1000 - recent[0].second + 1, 1)
            pulls = sum(bucket.pulls for bucket in recent)
            consumes = sum(bucket.consumes for bucket in recent)
            statuses[topic] = ConsumeStatus(
                pull_rt=sum(bucket.pull_rt_ms for bucket in recent) / pulls if pulls else 0.0,
                pull_tps=sum(bucket.pulled for bucket in recent) / seconds,
                consume_rt=sum(bucket.consume_rt_ms for bucket in recent) / consumes if consumes else 0.0,
                consume_ok_tps=sum(bucket.ok for bucket in recent) / seconds,
                consume_failed_tps=sum(bucket.failed for bucket in recent) / seconds,
                consume_failed_msgs=entry.failed_total,
            )
        return statuses
