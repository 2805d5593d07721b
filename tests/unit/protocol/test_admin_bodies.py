"""fastjson bodies of the admin requests: MessageQueue object keys, round trips, both reset forms.

Method: golden fastjson text as Java writes it decodes to the expected values; encoding then
decoding is the identity (Hypothesis over offsets and queue names); the C++ array form and
Java's map form of ResetOffsetBody read the same; malformed text raises RemoteProtocolError.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.admin_bodies import (
    ConsumeQueueData,
    ConsumeStats,
    OffsetWrapper,
    QueryConsumeQueueResponseBody,
    TopicOffset,
    decode_consume_stats,
    decode_query_consume_queue,
    decode_reset_offset_body,
    decode_topic_stats_table,
    encode_consume_stats,
    encode_query_consume_queue,
    encode_reset_offset_body,
    encode_topic_stats_table,
)
from orbitmq.protocol.admin_headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    QueryConsumeQueueRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from orbitmq.protocol.codes import RequestCode
from orbitmq.protocol.fastjson import ObjectKey, dumps, loads

JAVA_CONSUME_STATS = (
    b'{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
    b'{"brokerOffset":12,"consumerOffset":10,"lastTimestamp":1700000000000},'
    b'{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"brokerOffset":5,"consumerOffset":5,"lastTimestamp":0}}}'
)


def test_fastjson_decodes_java_message_queue_keys() -> None:
    stats = decode_consume_stats(JAVA_CONSUME_STATS)
    assert stats.consume_tps == 1.5
    assert stats.offset_table[MessageQueue("T", "broker-a", 0)] == OffsetWrapper(12, 10, 1700000000000)
    assert stats.total_diff == 2


def test_fastjson_writes_object_keys_in_alphabetical_order() -> None:
    body = encode_topic_stats_table({MessageQueue("T", "b", 3): TopicOffset(1, 9, 77)})
    assert (
        body
        == b'{"offsetTable":{{"brokerName":"b","queueId":3,"topic":"T"}:{"lastUpdateTimestamp":77,"maxOffset":9,"minOffset":1}},'
        b'"topicPutTps":0.0}'
    )
    assert decode_topic_stats_table(body) == {MessageQueue("T", "b", 3): TopicOffset(1, 9, 77)}


def test_fastjson_keeps_braces_inside_strings_and_reads_numeric_keys() -> None:
    value = loads(b'{"a":{{"k":"{not a key}"}:1},"b":{0:"x"},"c":"}{"}')
    assert value == {"a": {ObjectKey({"k": "{not a key}"}): 1}, "b": {"0": "x"}, "c": "}{"}
    assert loads(dumps(value)) == value


queues = st.builds(
    MessageQueue,
    st.text("abcT_%", min_size=1, max_size=5),
    st.sampled_from(["broker-a", "b{x}"]),
    st.integers(0, 64),
)


@given(st.dictionaries(queues, st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)), max_size=6))
def test_consume_stats_round_trip(table: dict[MessageQueue, tuple[int, int]]) -> None:
    stats = ConsumeStats({mq: OffsetWrapper(high, low) for mq, (high, low) in table.items()}, 2.25)
    decoded = decode_consume_stats(encode_consume_stats(stats))
    assert decoded.offset_table == stats.offset_table and decoded.consume_tps == 2.25


@given(st.dictionaries(queues, st.integers(0, 2**40), max_size=6))
def test_reset_offset_body_map_and_array_forms_read_the_same(offsets: dict[MessageQueue, int]) -> None:
    assert decode_reset_offset_body(encode_reset_offset_body(offsets)) == offsets
    assert decode_reset_offset_body(encode_reset_offset_body(offsets, array_form=True)) == offsets


def test_reset_offset_array_form_is_what_the_cpp_client_parses() -> None:
    body = encode_reset_offset_body({MessageQueue("T", "broker-a", 1): 7}, array_form=True)
    assert body == b'{"offsetTable":[{"brokerName":"broker-a","offset":7,"queueId":1,"topic":"T"}]}'


@pytest.mark.parametrize("body", [b"{", b'{"offsetTable":{{"brokerName":"b"}:1}}', b'{"offsetTable":7}'])
def test_malformed_admin_bodies_raise_remote_protocol_error(body: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        decode_reset_offset_body(body)


def test_admin_bodies_mqadmin_operations_requests_use_rocketmq_codes_and_field_names() -> None:
    # The codes and names of RocketMQ's RequestCode, WipeWritePermOfBroker*/AddWritePermOfBroker*
    # headers, QueryConsumeQueueRequestHeader and QueryConsumeQueueResponseBody: mqadmin itself
    # sends and reads these, so a name spelt alike on both sides of OrbitMQ is not enough.

    assert (
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.UPDATE_NAMESRV_CONFIG,
        RequestCode.GET_NAMESRV_CONFIG,
        RequestCode.QUERY_CONSUME_QUEUE,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.GET_BROKER_CONSUME_STATS,
    ) == (205, 318, 319, 321, 327, 317)
    assert WipeWritePermOfBrokerRequestHeader("broker-a").to_ext() == {"brokerName": "broker-a"}
    assert AddWritePermOfBrokerRequestHeader("broker-a").to_ext() == {"brokerName": "broker-a"}
    assert WipeWritePermOfBrokerResponseHeader(3).to_ext() == {"wipeTopicCount": "3"}
    assert AddWritePermOfBrokerResponseHeader(3).to_ext() == {"addTopicCount": "3"}
    assert QueryConsumeQueueRequestHeader("T", 1, 5, 10, "G").to_ext() == {
        "topic": "T",
        "queueId": "1",
        "index": "5",
        "count": "10",
        "consumerGroup": "G",
    }
    body = QueryConsumeQueueResponseBody([ConsumeQueueData(100, 220, 7)], 9, 2, None, "G@T is not online!")
    document = loads(encode_query_consume_queue(body))
    assert document == {
        "maxQueueIndex": 9,
        "minQueueIndex": 2,
        "filterData": "G@T is not online!",
        "queueData": [{"physicOffset": 100, "physicSize": 220, "tagsCode": 7, "eval": False}],
    }
    assert decode_query_consume_queue(encode_query_consume_queue(body)) == body
    assert body.queue_data[0].java_string() == (
        "ConsumeQueueData{physicOffset=100, physicSize=220, tagsCode=7, extendDataJson='null', "
        "bitMap='null', eval=false, msg='null'}"
    )
