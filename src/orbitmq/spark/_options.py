"""Options of the ``orbitmq`` Spark data source: parsing and validation, no I/O.

Spark hands a data source a case-insensitive map of strings. This module turns it into
frozen dataclasses once, on the driver, so every mistake is reported before a query starts
and the error names the option. Names follow Spark's Kafka source where they mean the same
thing (``startingOffsets``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``) and RocketMQ's
otherwise (``namesrvAddr``, ``subExpression``, ``consumerGroup``).

``accessKey`` / ``secretKey`` sign every request (a cluster with ACL), ``tls`` /
``tlsTrustCertPath`` connect over TLS. The secret lives in a field that ``repr`` never shows,
so it reaches neither logs nor Spark's plans through these objects.

Exactly one of ``topic``, ``topicPattern`` and ``assign`` selects the queues to read. Where
Spark's Kafka source silently lets one option win over another (``startingTimestamp`` over
``startingOffsetsByTimestamp`` over ``startingOffsets``, and the same for the end), this
source refuses the combination and names both options: a query that says two things does
not start.
``assign`` is JSON in one of two shapes::

    {"TopicA": [0, 1, 2]}                        queue ids on every broker of TopicA
    {"TopicA": {"broker-a": [0, 1], "broker-b": [3]}}   queue ids per broker name
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from orbitmq.errors import ConfigError

# Keys Spark itself may add to a source's options (lower-cased); they are never errors.
_SPARK_INJECTED = frozenset({"path", "paths", "checkpointlocation", "queryname"})

_COMMON_KEYS = frozenset(
    {"namesrvaddr", "requesttimeoutms", "accesskey", "secretkey", "tls", "tlstrustcertpath"}
)
_READ_KEYS = _COMMON_KEYS | {
    "topic",
    "topicpattern",
    "assign",
    "subexpression",
    "startingoffsets",
    "startingtimestamp",
    "startingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "endingoffsets",
    "endingtimestamp",
    "endingoffsetsbytimestamp",
    "maxoffsetspertrigger",
    "minoffsetspertrigger",
    "maxtriggerdelay",
    "failondataloss",
    "consumergroup",
    "pullbatchsize",
    "minpartitions",
    "maxrecordsperpartition",
    "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
    "failovertimeoutms",
}
_WRITE_KEYS = _COMMON_KEYS | {
    "topic", "producergroup", "writebatchsize", "exactlyonce", "committimeoutms", "failovertimeoutms"
}  # fmt: skip
_STREAM_ONLY_KEYS = frozenset({"maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"})
_BATCH_ONLY_KEYS = frozenset({"endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"})
_START_KEYS = ("startingoffsets", "startingtimestamp", "startingoffsetsbytimestamp")
_END_KEYS = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
_CANONICAL_NAMES = (
    "namesrvAddr", "requestTimeoutMs", "accessKey", "secretKey", "tls", "tlsTrustCertPath",
    "topic", "topicPattern", "assign", "subExpression", "startingOffsets", "startingTimestamp",
    "startingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy", "endingOffsets",
    "endingTimestamp", "endingOffsetsByTimestamp", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
    "maxTriggerDelay", "failOnDataLoss", "consumerGroup", "pullBatchSize", "minPartitions",
    "maxRecordsPerPartition", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "failoverTimeoutMs", "producerGroup", "writeBatchSize", "exactlyOnce", "commitTimeoutMs",
)  # fmt: skip
_OPTION_NAMES = {name.lower(): name for name in _CANONICAL_NAMES}
"""Spark lower-cases option names before a data source sees them; errors use these spellings."""
_OFFSET_JSON_EXAMPLE = '{"Topic": {"0": 42, "1": -2}}'

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_ADDR = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")

EARLIEST_SENTINEL = -2
"""In offset JSON, ``-2`` means the queue's earliest offset (as in Spark's Kafka source)."""

LATEST_SENTINEL = -1
"""In offset JSON, ``-1`` means the queue's latest offset (its max offset)."""


class StartKind(Enum):
    """How a brand-new query picks its first offset per queue."""

    EARLIEST = "earliest"
    LATEST = "latest"
    EXPLICIT = "explicit"
    TIMESTAMP = "timestamp"
    """``startingTimestamp`` (one time for every queue) or ``startingOffsetsByTimestamp``."""


class TimestampStrategy(Enum):
    """``startingOffsetsByTimestampStrategy``: a queue with no message at or after the time."""

    ERROR = "error"
    LATEST = "latest"


class SelectKind(Enum):
    """Which option chose the queues."""

    TOPICS = "topic"
    PATTERN = "topicPattern"
    ASSIGN = "assign"


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Per-queue offsets from JSON: ``{topic: {broker or "*": {queue_id: queue_offset}}}``.

    ``"*"`` as broker name stands for every broker (the JSON gave no broker level).
    Values may be :data:`EARLIEST_SENTINEL` or :data:`LATEST_SENTINEL`.
    """

    offsets: dict[str, dict[str, dict[int, int]]]

    def lookup(self, topic: str, broker_name: str, queue_id: int) -> int | None:
        brokers = self.offsets.get(topic)
        if brokers is None:
            return None
        for key in (broker_name, "*"):
            queues = brokers.get(key)
            if queues is not None and queue_id in queues:
                return queues[queue_id]
        return None


@dataclass(frozen=True, slots=True)
class QueueSelection:
    """The queues a read covers: topics, a regex over topic names, or assigned queues."""

    kind: SelectKind
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: dict[str, dict[str, frozenset[int]]] = field(default_factory=dict)

    def topic_matches(self, topic: str) -> bool:
        if self.kind is SelectKind.PATTERN:
            return re.fullmatch(self.pattern, topic) is not None
        if self.kind is SelectKind.ASSIGN:
            return topic in self.assigned
        return topic in self.topics

    def queue_selected(self, topic: str, broker_name: str, queue_id: int) -> bool:
        if self.kind is not SelectKind.ASSIGN:
            return self.topic_matches(topic)
        brokers = self.assigned.get(topic, {})
        return any(queue_id in brokers.get(key, frozenset()) for key in (broker_name, "*"))


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """Credentials and TLS of the source's clients (options accessKey, secretKey, tls, ...)."""

    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    tls_enable: bool = False
    tls_trust_cert_path: str | None = None

    def client_options(self) -> dict[str, Any]:
        """Keyword options of ``orbitmq.client`` producers, consumers and admin clients."""
        options: dict[str, Any] = {}
        if self.access_key and self.secret_key:
            options.update(access_key=self.access_key, secret_key=self.secret_key)
        if self.tls_enable:
            options["tls_enable"] = True
            if self.tls_trust_cert_path:
                options["tls_trust_cert_path"] = self.tls_trust_cert_path
        return options


NO_SECURITY = ClientSecurity()
"""No credentials, no TLS."""


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """Validated options of a batch or streaming read."""

    namesrv_addr: str
    selection: QueueSelection
    sub_expression: str = "*"
    start_kind: StartKind = StartKind.LATEST
    starting_offsets: OffsetSpec | None = None
    starting_timestamp_ms: int | None = None
    starting_timestamps: OffsetSpec | None = None  # startingOffsetsByTimestamp (values are ms)
    timestamp_strategy: TimestampStrategy = TimestampStrategy.ERROR
    ending_offsets: OffsetSpec | None = None  # None = latest at planning time (batch only)
    ending_timestamp_ms: int | None = None
    ending_timestamps: OffsetSpec | None = None  # endingOffsetsByTimestamp (values are ms)
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    fail_on_data_loss: bool = True
    consumer_group: str | None = None
    pull_batch_size: int = 1024
    request_timeout_ms: int = 10_000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10
    failover_timeout_ms: int = 30_000
    """How long planning and read tasks wait for a broker group none of whose members answers."""
    security: ClientSecurity = field(default_factory=ClientSecurity)

    def timestamp_for(self, topic: str, broker_name: str, queue_id: int) -> int | None:
        """The start time of one queue (``startingTimestamp`` or its entry in the JSON)."""
        if self.starting_timestamp_ms is not None:
            return self.starting_timestamp_ms
        spec = self.starting_timestamps
        return None if spec is None else spec.lookup(topic, broker_name, queue_id)

    def end_timestamp_for(self, topic: str, broker_name: str, queue_id: int) -> int | None:
        """The end time of one queue (``endingTimestamp`` or its entry in the JSON)."""
        if self.ending_timestamp_ms is not None:
            return self.ending_timestamp_ms
        spec = self.ending_timestamps
        return None if spec is None else spec.lookup(topic, broker_name, queue_id)


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """Validated options of a batch or streaming write."""

    namesrv_addr: str
    topic: str | None = None  # None: every row must carry a topic
    producer_group: str = "orbitmq-spark-writer"
    write_batch_size: int = 256
    request_timeout_ms: int = 10_000
    exactly_once: bool = False
    commit_timeout_ms: int = 120_000
    failover_timeout_ms: int = 30_000
    """How long an exactly-once write task's staging waits for a broker group to have a master."""
    security: ClientSecurity = field(default_factory=ClientSecurity)


def parse_read_options(options: dict[str, str], *, streaming: bool | None) -> ReadOptions:
    """Validate a read's options (keys in any case).

    ``streaming`` None: not known yet (the read is being defined); options of either kind
    are accepted and checked, and the kind-specific rules wait for a second call.

    Raises:
        ConfigError: an unknown option, a missing or contradictory one, or a bad value;
            the message names the option.
    """
    opts = _lower(options)
    if streaming is None:
        _reject_unknown(opts, _READ_KEYS, streaming)
    else:
        _reject_unknown(opts, _READ_KEYS - (_BATCH_ONLY_KEYS if streaming else _STREAM_ONLY_KEYS), streaming)
    _at_most_one(opts, _START_KEYS)
    _at_most_one(opts, _END_KEYS)
    start_kind, start_spec, start_ts = _parse_start(opts, streaming)
    by_timestamp = _timestamp_spec(opts, "startingOffsetsByTimestamp")
    if by_timestamp is not None:
        start_kind = StartKind.TIMESTAMP
    strategy = _timestamp_strategy(opts, start_kind)
    ending_offsets = _parse_ending(opts)
    _check_start_before_end(start_spec, ending_offsets)
    min_rows = _positive_int(opts, "minOffsetsPerTrigger")
    if "maxtriggerdelay" in opts and min_rows is None:
        raise ConfigError("option maxTriggerDelay needs minOffsetsPerTrigger")
    max_rows = _positive_int(opts, "maxOffsetsPerTrigger")
    if max_rows is not None and min_rows is not None and min_rows > max_rows:
        raise ConfigError(f"option minOffsetsPerTrigger={min_rows} exceeds maxOffsetsPerTrigger={max_rows}")
    return ReadOptions(
        namesrv_addr=_namesrv(opts),
        selection=_parse_selection(opts),
        sub_expression=opts.get("subexpression", "*").strip() or "*",
        start_kind=start_kind,
        starting_offsets=start_spec,
        starting_timestamp_ms=start_ts,
        starting_timestamps=by_timestamp,
        timestamp_strategy=strategy,
        ending_offsets=ending_offsets,
        ending_timestamp_ms=_timestamp(opts, "endingTimestamp"),
        ending_timestamps=_timestamp_spec(opts, "endingOffsetsByTimestamp"),
        max_offsets_per_trigger=max_rows,
        min_offsets_per_trigger=min_rows,
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", 15 * 60_000),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        consumer_group=opts.get("consumergroup") or None,
        pull_batch_size=_positive_int(opts, "pullBatchSize") or 1024,
        request_timeout_ms=_positive_int(opts, "requestTimeoutMs") or 10_000,
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        fetch_offset_retries=_non_negative_int(opts, "fetchOffset.numRetries", 3),
        fetch_offset_retry_interval_ms=_non_negative_int(opts, "fetchOffset.retryIntervalMs", 10),
        failover_timeout_ms=_non_negative_int(opts, "failoverTimeoutMs", 30_000),
        security=_security(opts),
    )


def parse_write_options(options: dict[str, str]) -> WriteOptions:
    """Validate a write's options (keys in any case).

    Raises:
        ConfigError: an unknown option or a bad value; the message names the option.
    """
    opts = _lower(options)
    _reject_unknown(opts, _WRITE_KEYS, streaming=None, what="writes")
    topic = opts.get("topic", "").strip() or None
    if topic is not None and "," in topic:
        raise ConfigError(
            f"option topic={topic!r}: a write goes to one topic (or to each row's topic column)"
        )
    return WriteOptions(
        namesrv_addr=_namesrv(opts),
        topic=topic,
        producer_group=opts.get("producergroup", "").strip() or "orbitmq-spark-writer",
        write_batch_size=_positive_int(opts, "writeBatchSize") or 256,
        request_timeout_ms=_positive_int(opts, "requestTimeoutMs") or 10_000,
        exactly_once=_bool(opts, "exactlyOnce", False),
        commit_timeout_ms=_positive_int(opts, "commitTimeoutMs") or 120_000,
        failover_timeout_ms=_non_negative_int(opts, "failoverTimeoutMs", 30_000),
        security=_security(opts),
    )


# -- pieces ----------------------------------------------------------------------------------


def _security(opts: dict[str, str]) -> ClientSecurity:
    access_key = opts.get("accesskey", "").strip() or None
    secret_key = opts.get("secretkey", "").strip() or None
    if bool(access_key) != bool(secret_key):
        # Never quote the secret: option errors end up in driver logs.
        raise ConfigError("options accessKey and secretKey go together: give both or neither")
    trust = opts.get("tlstrustcertpath", "").strip() or None
    return ClientSecurity(access_key, secret_key, _bool(opts, "tls", False) or trust is not None, trust)


def _lower(options: dict[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items() if value is not None}


def option_name(key: str) -> str:
    """The documented spelling of an option (Spark hands them over lower-cased)."""
    return _OPTION_NAMES.get(key.lower(), key)


def _reject_unknown(
    opts: dict[str, str], known: frozenset[str] | set[str], streaming: bool | None, what: str = "reads"
) -> None:
    for key in sorted(opts):
        if key in known or key in _SPARK_INJECTED:
            continue
        if streaming is True and key in _BATCH_ONLY_KEYS:
            raise ConfigError(
                f"option {option_name(key)} applies to batch reads only (spark.read), not to spark.readStream"
            )
        if streaming is False and key in _STREAM_ONLY_KEYS:
            raise ConfigError(
                f"option {option_name(key)} applies to streaming reads only (spark.readStream), not to spark.read"
            )
        names = sorted(option_name(name) for name in known)
        close = difflib.get_close_matches(key, [name.lower() for name in names], n=1, cutoff=0.75)
        hint = f"did you mean {option_name(close[0])}? " if close else ""
        raise ConfigError(
            f"unknown option {key!r} for format orbitmq {what} ({hint}Spark passes option names "
            f"lower-cased; known: {', '.join(names)})"
        )


def _namesrv(opts: dict[str, str]) -> str:
    raw = opts.get("namesrvaddr", "").strip()
    if not raw:
        raise ConfigError("option namesrvAddr is required (host:port;host:port)")
    addrs = [part.strip() for part in raw.split(";") if part.strip()]
    for addr in addrs:
        if not _ADDR.match(addr):
            raise ConfigError(f"option namesrvAddr: {addr!r} is not host:port")
    return ";".join(addrs)


def _parse_selection(opts: dict[str, str]) -> QueueSelection:
    given = [name for name in ("topic", "topicpattern", "assign") if opts.get(name, "").strip()]
    if len(given) != 1:
        named = " and ".join(given) if given else "none"
        raise ConfigError(f"exactly one of options topic, topicPattern, assign is required (got {named})")
    if given[0] == "topic":
        topics = tuple(sorted({part.strip() for part in opts["topic"].split(",") if part.strip()}))
        return QueueSelection(SelectKind.TOPICS, topics=topics)
    if given[0] == "topicpattern":
        pattern = opts["topicpattern"].strip()
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"option topicPattern {pattern!r} is not a valid regex: {exc}") from exc
        return QueueSelection(SelectKind.PATTERN, pattern=pattern)
    return QueueSelection(SelectKind.ASSIGN, assigned=_parse_assign(opts["assign"]))


def _parse_assign(text: str) -> dict[str, dict[str, frozenset[int]]]:
    doc = _json_object("assign", text)
    assigned: dict[str, dict[str, frozenset[int]]] = {}
    for topic, value in doc.items():
        if isinstance(value, list):
            assigned[topic] = {"*": _queue_ids("assign", topic, value)}
        elif isinstance(value, dict):
            assigned[topic] = {str(broker): _queue_ids("assign", topic, ids) for broker, ids in value.items()}
        else:
            raise ConfigError(
                f"option assign: topic {topic!r} needs a list of queue ids or {{broker: [ids]}}"
            )
    if not assigned:
        raise ConfigError("option assign names no topic")
    return assigned


def _queue_ids(option: str, topic: str, value: Any) -> frozenset[int]:
    if not isinstance(value, list) or not all(_is_int(item) and item >= 0 for item in value):
        raise ConfigError(
            f"option {option}: topic {topic!r} needs a list of queue ids (ints >= 0), got {value!r}"
        )
    return frozenset(value)


def _at_most_one(opts: dict[str, str], keys: tuple[str, ...]) -> None:
    given = [_OPTION_NAMES[key] for key in keys if key in opts]
    if len(given) > 1:
        raise ConfigError(f"options {' and '.join(given)} contradict each other; give one")


def _timestamp(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    timestamp_ms = _int_value(name, raw)
    if timestamp_ms < 0:
        raise ConfigError(f"option {name}={timestamp_ms} must be >= 0 (ms since the epoch)")
    return timestamp_ms


def _timestamp_spec(opts: dict[str, str], name: str) -> OffsetSpec | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    spec = parse_offset_spec(name, raw)
    for topic, brokers in spec.offsets.items():
        for queues in brokers.values():
            for queue_id, timestamp_ms in queues.items():
                if timestamp_ms < 0:
                    raise ConfigError(
                        f"option {name}: topic {topic!r} queue {queue_id} has timestamp {timestamp_ms}; "
                        "timestamps are ms since the epoch (>= 0)"
                    )
    return spec


def _timestamp_strategy(opts: dict[str, str], start_kind: StartKind) -> TimestampStrategy:
    raw = opts.get("startingoffsetsbytimestampstrategy")
    if raw is None:
        return TimestampStrategy.ERROR
    if start_kind is not StartKind.TIMESTAMP:
        raise ConfigError(
            "option startingOffsetsByTimestampStrategy needs startingTimestamp or startingOffsetsByTimestamp"
        )
    try:
        return TimestampStrategy(raw.strip().lower())
    except ValueError as exc:
        raise ConfigError(
            f"option startingOffsetsByTimestampStrategy={raw!r} must be error or latest"
        ) from exc


def _check_start_before_end(start: OffsetSpec | None, end: OffsetSpec | None) -> None:
    if start is None or end is None:
        return
    for topic, brokers in start.offsets.items():
        for broker, queues in brokers.items():
            for queue_id, first in queues.items():
                stop = end.offsets.get(topic, {}).get(broker, {}).get(queue_id)
                if first >= 0 and stop is not None and stop >= 0 and first > stop:
                    raise ConfigError(
                        f"options startingOffsets and endingOffsets contradict each other: topic {topic!r} "
                        f"queue {queue_id} starts at {first}, after its end {stop}"
                    )


def _parse_start(
    opts: dict[str, str], streaming: bool | None
) -> tuple[StartKind, OffsetSpec | None, int | None]:
    timestamp_ms = _timestamp(opts, "startingTimestamp")
    if timestamp_ms is not None:
        return StartKind.TIMESTAMP, None, timestamp_ms
    if "startingoffsetsbytimestamp" in opts:
        return StartKind.TIMESTAMP, None, None
    raw = opts.get("startingoffsets", "latest" if streaming else "earliest").strip()
    if raw.lower() == "earliest":
        return StartKind.EARLIEST, None, None
    if raw.lower() == "latest":
        if streaming is False:
            raise ConfigError(
                "option startingOffsets=latest is not allowed for a batch read (it would read nothing); "
                "use earliest or offset JSON"
            )
        return StartKind.LATEST, None, None
    allowed = {
        False: "earliest or offset JSON",
        True: "earliest, latest or offset JSON",
        None: "earliest, latest (streaming reads) or offset JSON",
    }[streaming]
    _check_json_like("startingOffsets", raw, allowed, ("earliest", "latest"))
    return StartKind.EXPLICIT, parse_offset_spec("startingOffsets", raw), None


def _check_json_like(option: str, raw: str, allowed: str, words: tuple[str, ...]) -> None:
    """A value that is neither a known word nor a JSON object: name what is allowed."""
    if raw.startswith("{"):
        return
    close = difflib.get_close_matches(raw.lower(), words, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise ConfigError(f"option {option}={raw!r} must be {allowed} such as {_OFFSET_JSON_EXAMPLE}{hint}")


def _parse_ending(opts: dict[str, str]) -> OffsetSpec | None:
    raw = opts.get("endingoffsets", "latest").strip()
    if raw.lower() == "latest":
        return None
    if raw.lower() == "earliest":
        raise ConfigError(
            "option endingOffsets=earliest is not allowed (it would read nothing); use latest or JSON"
        )
    _check_json_like("endingOffsets", raw, "latest or offset JSON", ("latest",))
    spec = parse_offset_spec("endingOffsets", raw)
    for brokers in spec.offsets.values():
        for queues in brokers.values():
            if EARLIEST_SENTINEL in queues.values():
                raise ConfigError("option endingOffsets: -2 (earliest) is not allowed")
    return spec


def parse_offset_spec(option: str, text: str) -> OffsetSpec:
    """Parse offset JSON: ``{topic: {queue_id: off}}`` or ``{topic: {broker: {queue_id: off}}}``.

    Raises:
        ConfigError: not JSON of either shape, or an offset below -2; names ``option``.
    """
    doc = _json_object(option, text)
    offsets: dict[str, dict[str, dict[int, int]]] = {}
    for topic, value in doc.items():
        if not isinstance(value, dict) or not value:
            raise ConfigError(
                f"option {option}: topic {topic!r} needs {{queue_id: offset}} or {{broker: {{...}}}}"
            )
        if all(isinstance(item, dict) for item in value.values()):
            offsets[topic] = {str(broker): _queue_offsets(option, topic, q) for broker, q in value.items()}
        else:
            offsets[topic] = {"*": _queue_offsets(option, topic, value)}
    return OffsetSpec(offsets)


def _queue_offsets(option: str, topic: str, value: dict[str, Any]) -> dict[int, int]:
    result: dict[int, int] = {}
    for key, offset in value.items():
        if not str(key).isdigit() or not _is_int(offset) or offset < EARLIEST_SENTINEL:
            raise ConfigError(f"option {option}: topic {topic!r} queue {key!r} has bad offset {offset!r}")
        result[int(key)] = int(offset)
    return result


def _json_object(option: str, text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"option {option} is not valid JSON ({exc}): {text!r}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"option {option} must be a JSON object, got {text!r}")
    return doc


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_value(name: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError as exc:
        raise ConfigError(f"option {name}={raw!r} is not an integer") from exc


def _positive_int(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None or not raw.strip():
        return None
    value = _int_value(name, raw)
    if value <= 0:
        raise ConfigError(f"option {name}={value} must be > 0")
    return value


def _non_negative_int(opts: dict[str, str], name: str, default: int) -> int:
    raw = opts.get(name.lower())
    if raw is None or not raw.strip():
        return default
    value = _int_value(name, raw)
    if value < 0:
        raise ConfigError(f"option {name}={value} must be >= 0")
    return value


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ConfigError(f"option {name}={raw!r} must be true or false")


def _duration_ms(opts: dict[str, str], name: str, default_ms: int) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default_ms
    match = _DURATION.match(raw.lower())
    if match is None:
        raise ConfigError(f"option {name}={raw!r} is not a duration such as 500ms, 30s, 15m")
    return int(match.group(1)) * _DURATION_UNIT_MS[match.group(2) or "ms"]
