"""Counting on the request path, kept cheap: plain dictionaries of integers, read on scrape.

What this module owns: the broker's and name server's running totals (messages and bytes in,
dead letters, remote-call latencies) and the per-minute rate window the exporter-style TPS
gauges read. Messages and bytes out are not counted here: the broker's operations stats
(``broker.stats``, GROUP_GET_NUMS/GROUP_GET_SIZE) already count every pull and pop, and the
recorder reads those totals when it samples or is scraped (``out_totals``). It is pure: no I/O, no clock of its own (callers pass the time), no
prometheus_client objects. ``orbitmq.metrics.families`` turns a :class:`RecorderSnapshot` into
Prometheus metric families when ``/metrics`` is scraped.

Why not prometheus_client's ``Counter``/``Histogram`` on the hot path: each ``labels(...)``
call takes a lock and builds a child lookup; a send of one message would pay it three times.
Here a send costs one dictionary lookup and a few integer additions per request (per batch,
not per message); labels that derive from the topic (``is_system``) are worked out at scrape.

Thread model: every ``count_*`` method runs on the server's event loop. A scrape calls
:meth:`capture` on the same loop (C-level copies of the tables, no per-row work; dictionary
copies, not lists of pairs: 50,000 pairs made on the loop and alive through a few young
collections are promoted to the oldest generation, and a few scrapes of them start a full
collection that walks every object of the broker for seconds), then :meth:`snapshot_steps`,
which reads the counters captured by reference and does the per-row work in steps the loop
runs a slice at a time (``metrics.steps``), as :meth:`sample_steps` does for the rate samples.
Nothing here needs a lock.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from orbitmq.metrics.steps import ROWS_PER_STEP, Steps, run_steps

_K = TypeVar("_K")

MESSAGE_SIZE_BUCKETS_BYTES = (1024, 4096, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
"""Upper bounds of ``rocketmq_message_size`` (RocketMQ 5.x's buckets: 1 KB ... 4 MB)."""

RPC_LATENCY_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
"""Upper bounds of ``rocketmq_rpc_latency`` in milliseconds (RocketMQ 5.x's buckets)."""

_FIRST_SIZE_BUCKET = MESSAGE_SIZE_BUCKETS_BYTES[0]

OTHER = "__other__"
"""The label value of the series that sums every topic or group past the caps (``metrics.cardinality``)."""

RATE_WINDOW_MS = 60_000
"""Width of the window behind the exporter-style ``*_tps`` gauges (``statsMinute.tps``)."""

RATE_HISTORY_MS = 600_000
"""Samples are kept this long: GET_BROKER_RUNTIME_INFO's putTps reports 10 s, 60 s and 600 s."""


class Histogram:
    """Cumulative-free bucket counts, a sum and a count; bucket ``len(bounds)`` is +Inf."""

    __slots__ = ("bounds", "counts", "total", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def copy(self) -> Histogram:
        other = Histogram(self.bounds)
        other.counts = list(self.counts)
        other.total = self.total
        other.count = self.count
        return other


RPC_LATENCY_BOUNDS_NS = tuple(bound * 1_000_000 for bound in RPC_LATENCY_BUCKETS_MS)


class LatencyHistogram:
    """Remote-call latencies in integer nanoseconds: one ``bisect`` and two additions per call.

    Converted to a millisecond :class:`Histogram` only when scraped (:meth:`to_ms`).
    """

    __slots__ = ("counts", "total_ns")

    def __init__(self) -> None:
        self.counts = [0] * (len(RPC_LATENCY_BOUNDS_NS) + 1)
        self.total_ns = 0

    def observe_ns(self, elapsed_ns: int) -> None:
        self.counts[bisect_left(RPC_LATENCY_BOUNDS_NS, elapsed_ns)] += 1
        self.total_ns += elapsed_ns

    def to_ms(self) -> Histogram:
        histogram = Histogram(RPC_LATENCY_BUCKETS_MS)
        histogram.counts = list(self.counts)
        histogram.total = self.total_ns / 1_000_000
        histogram.count = sum(self.counts)
        return histogram


InKey = tuple[str, str, bool]
"""(topic, message_type, is_system)."""
OutKey = tuple[str, str, bool]
"""(topic, consumer_group, is_system)."""
RpcKey = tuple[int, int, bool, str]
"""(request_code, response_code, is_long_polling, result)."""


@dataclass(slots=True)
class RecorderSnapshot:
    """A copy of every table, taken on the event loop, read by the scrape thread."""

    messages_in: dict[InKey, list[int]]
    messages_out: dict[OutKey, list[int]]
    message_size: dict[InKey, Histogram]
    send_to_dlq: dict[tuple[str, str, bool], int]
    rpc_latency: dict[RpcKey, Histogram]
    put_tps: dict[str, float]
    get_tps: dict[tuple[str, str], float]
    broker_put_tps: float
    broker_get_tps: float
    put_total: int
    get_total: int


@dataclass(slots=True)
class RecorderCapture:
    """What :meth:`Recorder.capture` takes on the event loop for :meth:`Recorder.snapshot_from`."""

    now_ms: int
    traffic_in: dict[tuple[str, str], _Traffic]
    send_to_dlq: dict[tuple[str, str, bool], int]
    rpc_latency: dict[RpcKey, LatencyHistogram]
    window_start: _Sample
    """The sample the per-minute rates start from (samples are never changed once taken)."""


@dataclass(slots=True)
class _Sample:
    at_ms: int
    put: dict[str, int] = field(default_factory=dict)
    get: dict[tuple[str, str], int] = field(default_factory=dict)
    put_total: int = 0
    get_total: int = 0


class _Traffic:
    """Messages and bytes of one label set; ``sizes`` holds the message-size bucket counts.

    ``total`` is the sum of every topic's traffic of the same message type and ``is_system``
    (itself a :class:`_Traffic` whose ``total`` is None, and whose ``rows`` counts the label sets
    it sums): what a scrape that folds most topics into one label subtracts the kept ones from.
    """

    __slots__ = ("messages", "size_bytes", "sizes", "is_system", "total", "rows")

    def __init__(self, is_system: bool, total: _Traffic | None = None) -> None:
        self.messages = 0
        self.size_bytes = 0
        self.sizes = [0] * (len(MESSAGE_SIZE_BUCKETS_BYTES) + 1)
        self.is_system = is_system
        self.total = total
        self.rows = 0

    def copy(self) -> _Traffic:
        """A copy of the counts (the copy sums nothing: ``total`` is None)."""
        other = _Traffic(self.is_system)
        other.messages, other.size_bytes, other.sizes, other.rows = (
            self.messages,
            self.size_bytes,
            list(self.sizes),
            self.rows,
        )
        return other


class Recorder:
    """The running totals of one server (see the module docstring).

    Args:
        is_system_topic: tells system topics apart (the ``is_system`` label); asked once per
            new topic, not per message.
        out_totals: messages and bytes handed to consumers so far, per (topic, group). The
            broker counts them already for its operations stats (GROUP_GET_NUMS and
            GROUP_GET_SIZE), so they are read from there on scrape and sample, not counted a
            second time on the pull path.
    """

    def __init__(
        self,
        is_system_topic: Callable[[str], bool] = lambda topic: False,
        out_totals: Callable[[], Mapping[tuple[str, str], tuple[int, int]]] = dict,
    ) -> None:
        self._is_system_topic = is_system_topic
        self._out_totals = out_totals
        self._in: dict[tuple[str, str], _Traffic] = {}
        self._in_totals: dict[tuple[str, bool], _Traffic] = {}  # (message_type, is_system) -> sum
        self._message_types: list[str] = []  # every message_type counted so far (a handful)
        self._topics_in = 0  # topics counted so far (no set of them: one more object per topic)
        self.send_to_dlq: dict[tuple[str, str, bool], int] = {}
        self.rpc_latency: dict[RpcKey, LatencyHistogram] = {}
        self._samples: deque[_Sample] = deque()

    def count_in(self, topic: str, message_type: str, size_bytes: int, messages: int = 1) -> None:
        """One send request stored ``messages`` messages of ``size_bytes`` bodies in all.

        The size histogram takes the average size of a batch: a batch is one request of
        alike messages, and this keeps the cost per request, not per message.
        """
        traffic = self._in.get((topic, message_type))
        if traffic is None:
            traffic = self._new_traffic(topic, message_type)
        total = traffic.total
        traffic.messages += messages
        traffic.size_bytes += size_bytes
        total.messages += messages  # type: ignore[union-attr]
        total.size_bytes += size_bytes  # type: ignore[union-attr]
        average = size_bytes // messages if messages > 1 else size_bytes
        bucket = 0 if average <= _FIRST_SIZE_BUCKET else bisect_left(MESSAGE_SIZE_BUCKETS_BYTES, average)
        traffic.sizes[bucket] += messages
        total.sizes[bucket] += messages  # type: ignore[union-attr]

    def _new_traffic(self, topic: str, message_type: str) -> _Traffic:
        is_system = self._is_system_topic(topic)
        total = self._in_totals.get((message_type, is_system))
        if total is None:
            total = self._in_totals[(message_type, is_system)] = _Traffic(is_system)
        total.rows += 1
        if all((topic, known) not in self._in for known in self._message_types):
            self._topics_in += 1
        if message_type not in self._message_types:
            self._message_types.append(message_type)
        traffic = self._in[(topic, message_type)] = _Traffic(is_system, total)
        return traffic

    def count_dlq(self, group: str, topic: str) -> None:
        """One message moved to ``%DLQ%<group>``."""
        key = (group, topic, self._is_system_topic(topic))
        self.send_to_dlq[key] = self.send_to_dlq.get(key, 0) + 1

    def count_rpc(
        self, request_code: int, response_code: int, is_long_polling: bool, result: str, elapsed_ms: float
    ) -> None:
        """One remote call handled; ``result`` is ``success``, ``oneway`` or ``process_request_failed``."""
        self.rpc_histogram(request_code, response_code, is_long_polling, result).observe_ns(
            round(elapsed_ms * 1_000_000)
        )

    def rpc_histogram(
        self, request_code: int, response_code: int, is_long_polling: bool, result: str
    ) -> LatencyHistogram:
        """The latency histogram of one label set (callers keep it and observe directly)."""
        key = (request_code, response_code, is_long_polling, result)
        histogram = self.rpc_latency.get(key)
        if histogram is None:
            histogram = self.rpc_latency[key] = LatencyHistogram()
        return histogram

    # -- rates ----------------------------------------------------------------------------------

    def sample(self, now_ms: int) -> None:
        """Remember the totals at ``now_ms`` (called every few seconds) for the TPS gauges."""
        self.add_sample(self.build_sample(now_ms, self.capture_sample()))

    def capture_sample(self) -> dict[tuple[str, str], _Traffic]:
        """The event loop's part of a sample: one dictionary copy (see :meth:`build_sample`)."""
        return self._in.copy()

    def build_sample(self, now_ms: int, traffic_in: dict[tuple[str, str], _Traffic]) -> _Sample:
        """A sample of the totals from :meth:`capture_sample`'s copy (any thread: O(topics))."""
        return run_steps(self.sample_steps(now_ms, traffic_in))

    def sample_steps(self, now_ms: int, traffic_in: dict[tuple[str, str], _Traffic]) -> Steps[_Sample]:
        """:meth:`build_sample` in steps of :data:`ROWS_PER_STEP` topics (``metrics.steps``)."""
        sample = _Sample(now_ms)
        put = sample.put
        put_total = 0
        for index, ((topic, _), traffic) in enumerate(traffic_in.items()):
            messages = traffic.messages
            put[topic] = put.get(topic, 0) + messages
            put_total += messages
            if not index % ROWS_PER_STEP:
                yield None
        sample.put_total = put_total
        for key, (messages, _) in self._out_totals().items():
            sample.get[key] = messages
            sample.get_total += messages
        return sample

    def add_sample(self, sample: _Sample) -> None:
        """Keep ``sample`` (on the event loop; samples come in time order)."""
        now_ms = sample.at_ms
        self._samples.append(sample)
        # Keep one sample at or beyond the window's far edge, so a rate always spans it.
        while len(self._samples) > 2 and self._samples[1].at_ms <= now_ms - RATE_HISTORY_MS:
            self._samples.popleft()
        # Per-topic and per-group counts are read only from the sample a per-minute rate starts
        # at; older samples keep their totals (the 10 s, 60 s and 600 s broker rates) and drop
        # the rest, so thousands of topics do not cost ten minutes of per-topic copies.
        start = self._oldest_within(now_ms, RATE_WINDOW_MS)
        for older in self._samples:
            if older is start:
                break
            if older.put or older.get:
                older.put = {}
                older.get = {}

    def _oldest_within(self, now_ms: int, window_ms: int) -> _Sample:
        """The newest sample at least ``window_ms`` old, else the oldest one kept."""
        chosen = self._samples[0]
        for sample in self._samples:
            if sample.at_ms > now_ms - window_ms:
                break
            chosen = sample
        return chosen

    def broker_tps(self, now_ms: int, window_ms: int) -> tuple[float, float]:
        """Messages put and got per second over the last ``window_ms`` (as of ``now_ms``)."""
        self.sample(now_ms)
        newest = self._samples.pop()
        if not self._samples:
            self._samples.append(newest)
            return 0.0, 0.0
        oldest = self._oldest_within(now_ms, window_ms)
        span_s = (newest.at_ms - oldest.at_ms) / 1000
        return _rate(newest.put_total, oldest.put_total, span_s), _rate(
            newest.get_total, oldest.get_total, span_s
        )

    def totals(self) -> tuple[int, int]:
        """Messages put and got since start-up."""
        put = sum(total.messages for total in self._in_totals.values())
        got = sum(messages for messages, _ in self._out_totals().values())
        return put, got

    def snapshot(self, now_ms: int) -> RecorderSnapshot:
        """Copy every table, with rates over the last minute as of ``now_ms`` (one thread)."""
        return self.snapshot_from(self.capture(now_ms))

    def capture(self, now_ms: int, with_traffic: bool = True) -> RecorderCapture:
        """The event loop's part of a scrape: list copies and references, no per-row work.

        Without ``with_traffic`` the per-topic table is not copied (:meth:`snapshot_kept`).
        """
        return RecorderCapture(
            now_ms=now_ms,
            traffic_in=self._in.copy() if with_traffic else {},
            send_to_dlq=self.send_to_dlq.copy(),
            rpc_latency=self.rpc_latency.copy(),
            window_start=self._oldest_within(now_ms, RATE_WINDOW_MS) if self._samples else _Sample(now_ms),
        )

    def snapshot_from(
        self, capture: RecorderCapture, topic_label: Callable[[str], str] | None = None
    ) -> RecorderSnapshot:
        """Every table as of ``capture``, with rates over the last minute (any thread).

        ``topic_label`` maps a topic to the label it is counted under (``metrics.cardinality``
        folds the less active ones into one): the produce-side tables are folded here, one
        addition per topic, so the folded topics cost no series of their own.
        """
        return run_steps(self.snapshot_steps(capture, topic_label))

    def snapshot_steps(
        self, capture: RecorderCapture, topic_label: Callable[[str], str] | None = None
    ) -> Steps[RecorderSnapshot]:
        """:meth:`snapshot_from` in steps of :data:`ROWS_PER_STEP` topics (``metrics.steps``).

        With ``topic_label``, the per-minute rates are folded as well (``put_tps`` holds one
        entry per label, not per topic).
        """
        oldest = capture.window_start
        span_s = (capture.now_ms - oldest.at_ms) / 1000
        messages_in: dict[InKey, list[int]] = {}
        message_size: dict[InKey, Histogram] = {}
        put: dict[str, int] = {}
        put_total = 0
        for index, ((topic, message_type), traffic) in enumerate(capture.traffic_in.items()):
            messages, size_bytes = traffic.messages, traffic.size_bytes
            put[topic] = put.get(topic, 0) + messages
            put_total += messages
            label = topic if topic_label is None else topic_label(topic)
            key = (label, message_type, traffic.is_system)
            sizes = message_size.get(key)
            if sizes is None:
                messages_in[key] = [messages, size_bytes]
                sizes = message_size[key] = Histogram(MESSAGE_SIZE_BUCKETS_BYTES)
                sizes.counts = list(traffic.sizes)
            else:
                counts = messages_in[key]
                counts[0] += messages
                counts[1] += size_bytes
                sizes.counts = [left + right for left, right in zip(sizes.counts, traffic.sizes, strict=True)]
            sizes.total += size_bytes
            sizes.count += messages
            if not index % ROWS_PER_STEP:
                yield None
        put_tps: dict[str, float] = {}
        old_put = oldest.put
        for index, (topic, messages) in enumerate(put.items()):
            tps = _rate(messages, old_put.get(topic, 0), span_s)
            label = topic if topic_label is None else topic_label(topic)
            put_tps[label] = put_tps.get(label, 0.0) + tps
            if not index % ROWS_PER_STEP:
                yield None
        return self._snapshot(capture, messages_in, message_size, put_tps, put_total)

    def snapshot_kept(self, now_ms: int, kept: frozenset[str]) -> RecorderSnapshot:
        """Every table as of now with only the ``kept`` topics under their own label, the others
        summed under :data:`OTHER` (on the event loop, which writes the tables).

        What :meth:`snapshot_from` with a ``topic_label`` that folds the other topics gives,
        at the cost of the kept topics only: each folded row is the running sum of its message
        type (``_Traffic.total``) minus the kept topics' rows, and the folded per-minute rate
        the same difference of totals.
        """
        capture = self.capture(now_ms, with_traffic=False)
        oldest = capture.window_start
        span_s = (now_ms - oldest.at_ms) / 1000
        rest = {key: total.copy() for key, total in self._in_totals.items()}
        messages_in: dict[InKey, list[int]] = {}
        message_size: dict[InKey, Histogram] = {}
        put_tps: dict[str, float] = {}
        old_put = oldest.put
        kept_messages = kept_old_messages = kept_with_traffic = 0
        traffic_in = self._in
        message_types = self._message_types
        for topic in kept:
            rows = [(known, traffic_in.get((topic, known))) for known in message_types]
            if all(traffic is None for _, traffic in rows):
                continue
            kept_with_traffic += 1
            topic_messages = 0
            for message_type, traffic in rows:
                if traffic is None:
                    continue
                key = (topic, message_type, traffic.is_system)
                messages_in[key] = [traffic.messages, traffic.size_bytes]
                message_size[key] = _histogram(traffic.sizes, traffic.size_bytes, traffic.messages)
                folded = rest[(message_type, traffic.is_system)]
                folded.messages -= traffic.messages
                folded.size_bytes -= traffic.size_bytes
                folded.sizes = [left - right for left, right in zip(folded.sizes, traffic.sizes, strict=True)]
                folded.rows -= 1
                topic_messages += traffic.messages
            old_messages = old_put.get(topic, 0)
            put_tps[topic] = _rate(topic_messages, old_messages, span_s)
            kept_messages += topic_messages
            kept_old_messages += old_messages
        for (message_type, is_system), folded in rest.items():
            if folded.rows:
                key = (OTHER, message_type, is_system)
                messages_in[key] = [folded.messages, folded.size_bytes]
                message_size[key] = _histogram(folded.sizes, folded.size_bytes, folded.messages)
        put_total = sum(total.messages for total in self._in_totals.values())
        if self._topics_in > kept_with_traffic:
            put_tps[OTHER] = _rate(put_total - kept_messages, oldest.put_total - kept_old_messages, span_s)
        return self._snapshot(capture, messages_in, message_size, put_tps, put_total)

    def _snapshot(
        self,
        capture: RecorderCapture,
        messages_in: dict[InKey, list[int]],
        message_size: dict[InKey, Histogram],
        put_tps: dict[str, float],
        put_total: int,
    ) -> RecorderSnapshot:
        """A snapshot of the produce-side tables given, and of the others as of ``capture``."""
        oldest = capture.window_start
        span_s = (capture.now_ms - oldest.at_ms) / 1000
        system = self._is_system_topic
        out = self._out_totals()
        get = {key: messages for key, (messages, _) in out.items()}
        get_total = sum(get.values())
        return RecorderSnapshot(
            messages_in=messages_in,
            messages_out={
                (topic, group, system(topic)): [messages, size_bytes]
                for (topic, group), (messages, size_bytes) in out.items()
            },
            message_size=message_size,
            send_to_dlq=capture.send_to_dlq,
            rpc_latency={key: value.to_ms() for key, value in capture.rpc_latency.items()},
            put_tps=put_tps,
            get_tps=_rates(get, oldest.get, span_s),
            broker_put_tps=_rate(put_total, oldest.put_total, span_s),
            broker_get_tps=_rate(get_total, oldest.get_total, span_s),
            put_total=put_total,
            get_total=get_total,
        )


def _histogram(sizes: list[int], size_bytes: int, messages: int) -> Histogram:
    histogram = Histogram(MESSAGE_SIZE_BUCKETS_BYTES)
    histogram.counts = list(sizes)
    histogram.total = float(size_bytes)
    histogram.count = messages
    return histogram


def _rate(new: int, old: int, span_s: float) -> float:
    return (new - old) / span_s if span_s > 0 else 0.0


def _rates(new: dict[_K, int], old: dict[_K, int], span_s: float) -> dict[_K, float]:
    return {key: _rate(value, old.get(key, 0), span_s) for key, value in new.items()}


_TYPED_KEYS = frozenset(
    (
        "TRAN_MSG",
        "__SHARDINGKEY",
        "DELAY",
        "TIMER_DELIVER_MS",
        "TIMER_DELAY_SEC",
        "TIMER_DELAY_MS",
        "__STARTDELIVERTIME",
    )
)


def message_type_of(properties: dict[str, str]) -> str:
    """5.x's ``message_type`` label of a produced message."""
    if _TYPED_KEYS.isdisjoint(properties):
        return "normal"
    if properties.get("TRAN_MSG") == "true":
        return "transaction"
    if "__SHARDINGKEY" in properties:
        return "fifo"
    if properties.get("DELAY", "0") not in ("", "0") or any(
        key in properties
        for key in ("TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "__STARTDELIVERTIME")
    ):
        return "delay"
    return "normal"
