"""Option parsing of the orbitmq data source: every mistake is a ConfigError naming the option."""

from __future__ import annotations

import pytest

from orbitmq.errors import ConfigError
from orbitmq.spark._options import (
    SelectKind,
    StartKind,
    TimestampStrategy,
    parse_offset_spec,
    parse_read_options,
    parse_write_options,
)

NS = {"namesrvAddr": "127.0.0.1:9876"}


def test_read_options_defaults_follow_kafka_source() -> None:
    stream = parse_read_options({**NS, "topic": "A"}, streaming=True)
    batch = parse_read_options({**NS, "topic": "A"}, streaming=False)
    assert stream.start_kind is StartKind.LATEST
    assert batch.start_kind is StartKind.EARLIEST
    assert stream.fail_on_data_loss is True
    assert stream.sub_expression == "*"
    assert stream.selection.topics == ("A",)


def test_read_options_keys_are_case_insensitive_and_lists_split() -> None:
    opts = parse_read_options(
        {"NAMESRVADDR": "h1:1;h2:2", "Topic": "B, A", "maxoffsetspertrigger": "10"}, streaming=True
    )
    assert opts.namesrv_addr == "h1:1;h2:2"
    assert opts.selection.topics == ("A", "B")
    assert opts.max_offsets_per_trigger == 10


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"topic": "A", "assign": '{"A": [0]}'}, "topic and assign"),
        ({"topic": "A", "bogus": "1"}, "bogus"),
        ({}, "namesrvAddr"),
        ({"topic": "A", "namesrvAddr": "nohost"}, "namesrvAddr"),
        ({"topic": "A", "startingOffsets": "{bad"}, "startingOffsets"),
        ({"topic": "A", "startingOffsets": "latest", "startingTimestamp": "5"}, "startingTimestamp"),
        (
            {"topic": "A", "startingOffsets": "latest", "startingOffsetsByTimestamp": '{"A": {"0": 5}}'},
            "startingOffsets and startingOffsetsByTimestamp",
        ),
        (
            {"topic": "A", "startingTimestamp": "5", "startingOffsetsByTimestamp": '{"A": {"0": 5}}'},
            "startingTimestamp and startingOffsetsByTimestamp",
        ),
        ({"topic": "A", "startingOffsetsByTimestamp": '{"A": {"0": -1}}'}, "startingOffsetsByTimestamp"),
        ({"topic": "A", "startingOffsetsByTimestampStrategy": "latest"}, "needs startingTimestamp"),
        (
            {"topic": "A", "startingTimestamp": "5", "startingOffsetsByTimestampStrategy": "skip"},
            "startingOffsetsByTimestampStrategy='skip'",
        ),
        ({"topic": "A", "minPartitions": "0"}, "minPartitions"),
        ({"topic": "A", "maxRecordsPerPartition": "-3"}, "maxRecordsPerPartition"),
        ({"topic": "A", "fetchOffset.numRetries": "-1"}, "fetchOffset.numRetries"),
        ({"topic": "A", "endingTimestamp": "5"}, "endingTimestamp applies to batch reads only"),
        ({"topic": "A", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({"topic": "A", "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"}, "minOffsetsPerTrigger"),
        ({"topic": "A", "maxTriggerDelay": "5s"}, "maxTriggerDelay"),
        ({"topic": "A", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({"topicPattern": "("}, "topicPattern"),
        ({"assign": '{"A": [-1]}'}, "assign"),
        ({"topic": "A", "endingOffsets": "latest"}, "option endingOffsets applies to batch reads only"),
    ],
)
def test_read_options_rejects_bad_input_naming_the_option(options: dict[str, str], named: str) -> None:
    full = {"namesrvAddr": "127.0.0.1:9876", **options} if "namesrvAddr" not in options else options
    if named == "namesrvAddr" and not options:
        full = {"topic": "A"}
    with pytest.raises(ConfigError, match=named):
        parse_read_options(full, streaming=True)


def test_read_options_batch_rejects_stream_only_and_latest_start() -> None:
    with pytest.raises(ConfigError, match="^option maxOffsetsPerTrigger applies to streaming reads only"):
        parse_read_options({**NS, "topic": "A", "maxOffsetsPerTrigger": "5"}, streaming=False)
    with pytest.raises(ConfigError, match="startingOffsets=latest"):
        parse_read_options({**NS, "topic": "A", "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(ConfigError, match="-2"):
        parse_read_options({**NS, "topic": "A", "endingOffsets": '{"A": {"0": -2}}'}, streaming=False)


def test_assign_accepts_queue_lists_and_per_broker_maps() -> None:
    flat = parse_read_options({**NS, "assign": '{"A": [0, 2]}'}, streaming=True).selection
    per_broker = parse_read_options({**NS, "assign": '{"A": {"b1": [1]}}'}, streaming=True).selection
    assert flat.kind is SelectKind.ASSIGN
    assert flat.queue_selected("A", "any-broker", 2) and not flat.queue_selected("A", "x", 1)
    assert per_broker.queue_selected("A", "b1", 1) and not per_broker.queue_selected("A", "b2", 1)
    assert not flat.queue_selected("B", "any-broker", 0)


def test_offset_spec_both_shapes_and_sentinels() -> None:
    spec = parse_offset_spec("startingOffsets", '{"A": {"0": 5, "1": -2}, "B": {"b1": {"3": -1}}}')
    assert spec.lookup("A", "whatever", 0) == 5
    assert spec.lookup("A", "whatever", 1) == -2
    assert spec.lookup("B", "b1", 3) == -1
    assert spec.lookup("B", "b2", 3) is None
    with pytest.raises(ConfigError, match="queue 'x'"):
        parse_offset_spec("startingOffsets", '{"A": {"x": 1}}')


def test_durations_and_timestamp_parse() -> None:
    opts = parse_read_options(
        {
            **NS,
            "topic": "A",
            "minOffsetsPerTrigger": "3",
            "maxTriggerDelay": "2s",
            "startingTimestamp": "1000",
        },
        streaming=True,
    )
    assert opts.max_trigger_delay_ms == 2000
    assert opts.start_kind is StartKind.TIMESTAMP and opts.starting_timestamp_ms == 1000


def test_write_options_validate_topic_and_unknown_keys() -> None:
    opts = parse_write_options({**NS, "topic": "Out", "writeBatchSize": "10", "checkpointLocation": "/tmp/x"})
    assert (opts.topic, opts.write_batch_size) == ("Out", 10)
    assert parse_write_options(NS).topic is None
    with pytest.raises(ConfigError, match="subexpression"):
        parse_write_options({**NS, "subExpression": "a"})
    with pytest.raises(ConfigError, match="one topic"):
        parse_write_options({**NS, "topic": "A,B"})


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"endingOffsets": "latest", "endingTimestamp": "5"}, "endingOffsets and endingTimestamp"),
        (
            {"endingTimestamp": "5", "endingOffsetsByTimestamp": '{"A": {"0": 5}}'},
            "endingTimestamp and endingOffsetsByTimestamp",
        ),
        (
            {"endingOffsets": '{"A": {"0": 5}}', "endingOffsetsByTimestamp": '{"A": {"0": 5}}'},
            "endingOffsets and endingOffsetsByTimestamp",
        ),
        (
            {"startingOffsets": '{"A": {"0": 9}}', "endingOffsets": '{"A": {"0": 5}}'},
            "startingOffsets and endingOffsets contradict each other: topic 'A' queue 0 starts at 9",
        ),
        ({"endingTimestamp": "soon"}, "endingTimestamp"),
        ({"maxOffsetsPerTrigger": "5"}, "maxOffsetsPerTrigger applies to streaming reads only"),
    ],
)
def test_batch_read_options_reject_each_contradiction_naming_both(
    options: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_read_options({**NS, "topic": "A", **options}, streaming=False)


def test_timestamp_options_parse_per_queue_and_global() -> None:
    by_queue = parse_read_options(
        {
            **NS,
            "topic": "A",
            "startingOffsetsByTimestamp": '{"A": {"0": 1000, "2": 3000}}',
            "startingOffsetsByTimestampStrategy": "LATEST",
            "endingOffsetsByTimestamp": '{"A": {"b1": {"0": 5000}}}',
        },
        streaming=False,
    )
    assert by_queue.start_kind is StartKind.TIMESTAMP
    assert by_queue.timestamp_strategy is TimestampStrategy.LATEST
    assert [by_queue.timestamp_for("A", "b1", q) for q in range(3)] == [1000, None, 3000]
    assert (
        by_queue.end_timestamp_for("A", "b1", 0) == 5000 and by_queue.end_timestamp_for("A", "b2", 0) is None
    )
    everywhere = parse_read_options(
        {**NS, "topic": "A", "startingTimestamp": "7", "endingTimestamp": "9"}, streaming=False
    )
    assert everywhere.timestamp_strategy is TimestampStrategy.ERROR
    assert everywhere.timestamp_for("A", "b", 4) == 7 and everywhere.end_timestamp_for("B", "c", 1) == 9


def test_partitioning_and_retry_options_parse() -> None:
    opts = parse_read_options(
        {
            **NS,
            "topic": "A",
            "minPartitions": "12",
            "maxRecordsPerPartition": "500",
            "fetchOffset.numRetries": "0",
            "fetchOffset.retryIntervalMs": "250",
        },
        streaming=True,
    )
    assert (opts.min_partitions, opts.max_records_per_partition) == (12, 500)
    assert (opts.fetch_offset_retries, opts.fetch_offset_retry_interval_ms) == (0, 250)
    defaults = parse_read_options({**NS, "topic": "A"}, streaming=True)
    assert (defaults.min_partitions, defaults.max_records_per_partition) == (None, None)
    assert (defaults.fetch_offset_retries, defaults.fetch_offset_retry_interval_ms) == (3, 10)


def test_write_options_exactly_once_flag() -> None:
    assert parse_write_options({**NS, "topic": "Out"}).exactly_once is False
    assert parse_write_options({**NS, "topic": "Out", "exactlyOnce": "TRUE"}).exactly_once is True
    with pytest.raises(ConfigError, match="exactlyOnce"):
        parse_write_options({**NS, "topic": "Out", "exactlyOnce": "yes"})


def test_spark_options_credentials_and_tls_never_show_the_secret() -> None:
    from orbitmq.spark._options import parse_read_options, parse_write_options

    read = parse_read_options(
        {"namesrvAddr": "127.0.0.1:9876", "topic": "T", "accessKey": "sparkuser", "secretKey": "s3cr3t-value",
         "tls": "true", "tlsTrustCertPath": "/etc/ca.pem"},
        streaming=False,
    )  # fmt: skip
    assert read.security.client_options() == {
        "access_key": "sparkuser", "secret_key": "s3cr3t-value", "tls_enable": True, "tls_trust_cert_path": "/etc/ca.pem",
    }  # fmt: skip
    assert "s3cr3t-value" not in repr(read)
    write = parse_write_options(
        {"namesrvAddr": "127.0.0.1:9876", "accessKey": "sparkuser", "secretKey": "s3cr3t-value"}
    )
    assert "s3cr3t-value" not in repr(write) and write.security.access_key == "sparkuser"
    with pytest.raises(ConfigError, match="accessKey and secretKey go together") as caught:
        parse_read_options(
            {"namesrvAddr": "127.0.0.1:9876", "topic": "T", "secretKey": "s3cr3t-value"}, streaming=False
        )
    assert "s3cr3t-value" not in str(caught.value)
