"""JSON command bodies: routes, cluster info, topic tables, broker registration, heartbeats, locks.

Method: a golden TopicRouteData body; samples in the shapes real peers send (fastjson's
unquoted keys, the C++ heartbeat with ordinals, absent sets and zeroed codeSet, the
compressed REGISTER_BROKER body); Hypothesis round-trips; arbitrary bytes and arbitrary
JSON may only raise RemoteProtocolError.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.errors import RemoteProtocolError
from orbitmq.model import (
    BrokerData,
    ClusterInfo,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    DataVersion,
    HeartbeatData,
    MessageModel,
    MessageQueue,
    ProducerData,
    QueueData,
    SubscriptionData,
    TopicConfig,
    TopicRouteData,
)
from orbitmq.protocol import bodies
from orbitmq.protocol.bodies import (
    LockBatchRequestBody,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    TopicList,
)
from orbitmq.protocol.tags import java_string_hash

_settings = settings(max_examples=40, deadline=None)


def build_topic_route() -> TopicRouteData:
    """Two brokers, one with a slave: the route the golden fixture holds."""
    return TopicRouteData(
        queue_datas=[
            QueueData(broker_name="broker-a", read_queue_nums=4, write_queue_nums=4, perm=6),
            QueueData(broker_name="broker-b", read_queue_nums=8, write_queue_nums=8, perm=7),
        ],
        broker_datas=[
            BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}),
            BrokerData("DefaultCluster", "broker-b", {0: "127.0.0.1:10931"}),
        ],
    )


def test_topic_route_matches_golden(golden_hex: Callable[[str], bytes]) -> None:
    assert bodies.encode_topic_route(build_topic_route()) == golden_hex("topic_route_body.hex")


def test_topic_route_golden_decodes_back(golden_hex: Callable[[str], bytes]) -> None:
    data = golden_hex("topic_route_body.hex")
    assert bodies.decode_topic_route(data) == build_topic_route()
    parsed = orjson.loads(data)
    assert parsed["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"}
    assert parsed["queueDatas"][0]["readQueueNums"] == 4
    assert parsed["orderTopicConf"] is None


def test_topic_route_accepts_fastjson_unquoted_numeric_keys() -> None:
    text = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911", 1 :"10.0.0.2:10911"},"brokerName":"b,1:x",'
        b'"cluster":"c"}],"queueDatas":[{"brokerName":"b,1:x","perm":6,"readQueueNums":4,"topicSynFlag":1,'
        b'"writeQueueNums":4}]}'
    )
    route = bodies.decode_topic_route(text)
    assert route.broker_datas == [BrokerData("c", "b,1:x", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})]
    assert route.queue_datas == [QueueData("b,1:x", 4, 4, 6, 1)]
    assert route.filter_server_table == {}


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"", "not valid JSON"),
        (b"[]", "not a JSON object"),
        (b'{"queueDatas":{}}', "'queueDatas' is not an array"),
        (b'{"queueDatas":[1]}', r"queueDatas\[0\]"),
        (
            b'{"queueDatas":[{"brokerName":"b","readQueueNums":"x","writeQueueNums":1,"perm":6}]}',
            "readQueueNums",
        ),
        (b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"m":"a"}}]}', "brokerAddrs key"),
        (b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"0":5}}]}', "brokerAddrs"),
        (b'{"brokerDatas":[{"brokerAddrs":{}}]}', "'brokerName' is missing"),
        (b'{"orderTopicConf":5}', "orderTopicConf"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_topic_route_malformed_raises_naming_field(data: bytes, fragment: str) -> None:
    with pytest.raises(RemoteProtocolError, match=fragment):
        bodies.decode_topic_route(data)


CPP_HEARTBEAT = (
    b'{"clientID":"16792-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":4,"consumeType":1,'
    b'"groupName":"CG1","messageModel":1,"subscriptionDataSet":[{"codeSet":[0,0],"subString":"tagA || tagB",'
    b'"subVersion":"1795000000000","tagsSet":["tagA","tagB"],"topic":"TopicA"},{"subString":"*",'
    b'"subVersion":"1795000000001","topic":"%RETRY%CG1"}],"unitMode":false}]}'
)


def test_heartbeat_decodes_cpp_body() -> None:
    heartbeat = bodies.decode_heartbeat(CPP_HEARTBEAT)
    assert heartbeat.client_id == "16792-127.0.0.1@DEFAULT"
    assert heartbeat.producer_data_set == []
    (consumer,) = heartbeat.consumer_data_set
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    tagged, retry = consumer.subscription_data_set
    assert tagged.code_set == {java_string_hash("tagA"), java_string_hash("tagB")}
    assert tagged.sub_version == 1795000000000
    assert retry.tags_set == frozenset() and retry.code_set == frozenset()


def test_heartbeat_decodes_java_names_and_derives_missing_tags() -> None:
    body = {
        "clientID": "127.0.0.1@1234",
        "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
        "consumerDataSet": [
            {
                "groupName": "G",
                "consumeType": "CONSUME_ACTIVELY",
                "messageModel": "BROADCASTING",
                "consumeFromWhere": "CONSUME_FROM_TIMESTAMP",
                "subscriptionDataSet": [
                    {"topic": "T", "subString": "a || b", "subVersion": 5, "classFilterMode": False}
                ],
            }
        ],
    }
    heartbeat = bodies.decode_heartbeat(orjson.dumps(body))
    assert heartbeat.producer_data_set == [ProducerData("CLIENT_INNER_PRODUCER")]
    consumer = heartbeat.consumer_data_set[0]
    assert (consumer.consume_type, consumer.message_model) == (
        ConsumeType.CONSUME_ACTIVELY,
        MessageModel.BROADCASTING,
    )
    assert consumer.subscription_data_set[0].tags_set == {"a", "b"}


@pytest.mark.parametrize(
    ("consumer", "fragment"),
    [
        ({"groupName": "G", "consumeType": "PUSH"}, "consumeType"),
        ({"groupName": "G", "messageModel": 7}, "messageModel"),
        ({"groupName": "G", "consumeFromWhere": [1]}, "consumeFromWhere"),
        ({"groupName": 3}, "groupName"),
        ({"groupName": "G", "subscriptionDataSet": [{"subString": "*"}]}, "'topic' is missing"),
        ({"groupName": "G", "subscriptionDataSet": [{"topic": "T", "subVersion": "v1"}]}, "subVersion"),
    ],
)
def test_heartbeat_malformed_consumer_raises_naming_field(consumer: dict[str, Any], fragment: str) -> None:
    with pytest.raises(RemoteProtocolError, match=fragment):
        bodies.decode_heartbeat(orjson.dumps({"clientID": "c", "consumerDataSet": [consumer]}))


def test_cluster_info_and_topic_list_shapes() -> None:
    info = ClusterInfo({"broker-a": BrokerData("C", "broker-a", {0: "h:1"})}, {"C": {"broker-a"}})
    parsed = orjson.loads(bodies.encode_cluster_info(info))
    assert parsed["clusterAddrTable"] == {"C": ["broker-a"]}
    assert bodies.decode_cluster_info(bodies.encode_cluster_info(info)) == info
    topics = TopicList(["A", "B"])
    assert orjson.loads(bodies.encode_topic_list(topics)) == {"brokerAddr": None, "topicList": ["A", "B"]}
    assert bodies.decode_topic_list(bodies.encode_topic_list(topics)) == topics


def test_register_broker_body_compressed_layout() -> None:
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper({"TopicA": TopicConfig("TopicA", 4, 4, 6)}, DataVersion(1795000000000, 3))
    )
    raw = zlib.decompress(bodies.encode_register_broker_body(body, compressed=True))
    # RocketMQ 5 writes DataVersion with its stateVersion; a 4.x broker without it.
    version_json = b'{"counter":3,"stateVersion":0,"timestamp":1795000000000}'
    topic_text = b"TopicA 4 4 6 SINGLE_TAG"

    def layout(version_json: bytes) -> bytes:
        return (
            struct.pack(">i", len(version_json))
            + version_json
            + struct.pack(">ii", 1, len(topic_text))
            + topic_text
            + struct.pack(">i", 2)
            + b"[]"
        )

    assert raw == layout(version_json)
    assert bodies.decode_register_broker_body(zlib.compress(layout(version_json)), compressed=True) == body
    version_4x = b'{"counter":3,"timestamp":1795000000000}'
    assert bodies.decode_register_broker_body(zlib.compress(layout(version_4x)), compressed=True) == body


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"", "dataVersion length"),
        (struct.pack(">i", 50) + b"{}", "exceeds"),
        (struct.pack(">i", 2) + b"{}" + struct.pack(">ii", 1, 3) + b"a 1", "topic #0"),
        (
            struct.pack(">i", 2) + b"{}" + struct.pack(">i", 0) + struct.pack(">i", 1) + b"{",
            "filterServerList",
        ),
    ],
)
def test_register_broker_body_compressed_malformed(raw: bytes, fragment: str) -> None:
    with pytest.raises(RemoteProtocolError, match=fragment):
        bodies.decode_register_broker_body(zlib.compress(raw), compressed=True)


def test_register_broker_body_compressed_not_zlib() -> None:
    with pytest.raises(RemoteProtocolError, match="inflate"):
        bodies.decode_register_broker_body(b"not zlib", compressed=True)


def test_lock_bodies_shapes() -> None:
    queues = {MessageQueue("T", "broker-a", 1), MessageQueue("T", "broker-a", 0)}
    request = LockBatchRequestBody("CG1", "1-127.0.0.1@DEFAULT", queues)
    parsed = orjson.loads(bodies.encode_lock_batch_request(request))
    assert parsed["mqSet"][0] == {"brokerName": "broker-a", "queueId": 0, "topic": "T"}
    assert bodies.decode_lock_batch_request(bodies.encode_lock_batch_request(request)) == request
    unlock = bodies.decode_unlock_batch_request(bodies.encode_lock_batch_request(request))
    assert (unlock.consumer_group, unlock.mq_set) == ("CG1", queues)
    assert bodies.decode_lock_batch_response(bodies.encode_lock_batch_response(queues)) == queues
    assert bodies.decode_lock_batch_response(b"{}") == set()


def test_consumer_id_list_and_kv_table() -> None:
    assert orjson.loads(bodies.encode_consumer_id_list(["b", "a"])) == {"consumerIdList": ["b", "a"]}
    assert bodies.decode_consumer_id_list(bodies.encode_consumer_id_list(["x"])) == ["x"]
    assert bodies.decode_kv_table(bodies.encode_kv_table({"T": "broker-a:4"})) == {"T": "broker-a:4"}
    with pytest.raises(RemoteProtocolError, match="consumerIdList"):
        bodies.decode_consumer_id_list(b'{"consumerIdList":[1]}')


# -- Hypothesis ----------------------------------------------------------------------------------

_text = st.text(max_size=12)
_name = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789_-%|", min_size=1, max_size=12)
_int32 = st.integers(-(2**31), 2**31 - 1)
_long = st.integers(-(2**63), 2**63 - 1)
_broker_data = st.builds(BrokerData, _text, _text, st.dictionaries(_long, _text, max_size=3))
_routes = st.builds(
    TopicRouteData,
    st.lists(st.builds(QueueData, _text, _int32, _int32, _int32, _int32), max_size=3),
    st.lists(_broker_data, max_size=3),
    st.none() | _text,
    st.dictionaries(_text, st.lists(_text, max_size=2), max_size=2),
)
_topic_configs = st.builds(TopicConfig, _name, _int32, _int32, _int32, _name, _int32, st.booleans())


@st.composite
def _subscriptions(draw: st.DrawFn) -> SubscriptionData:
    tags = frozenset(draw(st.lists(_text, max_size=3)))
    return SubscriptionData(
        topic=draw(_text),
        sub_string=draw(_text),
        tags_set=tags,
        code_set=frozenset(java_string_hash(tag) for tag in tags),
        sub_version=draw(_long),
        expression_type=draw(st.sampled_from(["TAG", "SQL92"])),
        class_filter_mode=draw(st.booleans()),
        filter_class_source=draw(st.none() | _text),
    )


_heartbeats = st.builds(
    HeartbeatData,
    _text,
    st.lists(st.builds(ProducerData, _text), max_size=2),
    st.lists(
        st.builds(
            ConsumerData,
            _text,
            st.sampled_from(ConsumeType),
            st.sampled_from(MessageModel),
            st.sampled_from(ConsumeFromWhere),
            st.lists(_subscriptions(), max_size=2),
            st.booleans(),
        ),
        max_size=2,
    ),
)
_queues = st.sets(st.builds(MessageQueue, _text, _text, _int32), max_size=4)


@_settings
@given(route=_routes)
def test_topic_route_roundtrips(route: TopicRouteData) -> None:
    assert bodies.decode_topic_route(bodies.encode_topic_route(route)) == route


@_settings
@given(
    info=st.builds(
        ClusterInfo,
        st.dictionaries(_text, _broker_data, max_size=2),
        st.dictionaries(_text, st.sets(_text, max_size=3), max_size=2),
    )
)
def test_cluster_info_roundtrips(info: ClusterInfo) -> None:
    assert bodies.decode_cluster_info(bodies.encode_cluster_info(info)) == info


@_settings
@given(heartbeat=_heartbeats)
def test_heartbeat_roundtrips(heartbeat: HeartbeatData) -> None:
    assert bodies.decode_heartbeat(bodies.encode_heartbeat(heartbeat)) == heartbeat


@_settings
@given(request=st.builds(LockBatchRequestBody, _text, _text, _queues, st.booleans()), locked=_queues)
def test_lock_bodies_roundtrip(request: LockBatchRequestBody, locked: set[MessageQueue]) -> None:
    assert bodies.decode_lock_batch_request(bodies.encode_lock_batch_request(request)) == request
    assert bodies.decode_lock_batch_response(bodies.encode_lock_batch_response(locked)) == locked


@_settings
@given(
    configs=st.lists(_topic_configs, max_size=4),
    version=st.builds(DataVersion, _long, _long),
    filters=st.lists(_text, max_size=2),
)
def test_register_broker_body_roundtrips_both_forms(
    configs: list[TopicConfig], version: DataVersion, filters: list[str]
) -> None:
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper({cfg.topic_name: cfg for cfg in configs}, version), filters
    )
    assert bodies.decode_register_broker_body(bodies.encode_register_broker_body(body)) == body
    assert (
        bodies.decode_topic_config_wrapper(
            bodies.encode_topic_config_wrapper(body.topic_config_serialize_wrapper)
        )
        == body.topic_config_serialize_wrapper
    )
    # The compressed form carries only name, queue counts, perm and filter type.
    compact = {
        cfg.topic_name: TopicConfig(
            cfg.topic_name, cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm, cfg.topic_filter_type
        )
        for cfg in configs
    }
    decoded = bodies.decode_register_broker_body(
        bodies.encode_register_broker_body(body, compressed=True), compressed=True
    )
    assert decoded == RegisterBrokerBody(TopicConfigSerializeWrapper(compact, version), filters)


_DECODERS: list[Callable[[bytes], object]] = [
    bodies.decode_topic_route,
    bodies.decode_cluster_info,
    bodies.decode_topic_list,
    bodies.decode_topic_config_wrapper,
    bodies.decode_register_broker_body,
    lambda data: bodies.decode_register_broker_body(data, compressed=True),
    bodies.decode_data_version,
    bodies.decode_kv_table,
    bodies.decode_heartbeat,
    bodies.decode_lock_batch_request,
    bodies.decode_unlock_batch_request,
    bodies.decode_lock_batch_response,
    bodies.decode_consumer_id_list,
]
_json_values = st.recursive(
    st.none() | st.booleans() | _long | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_text, children, max_size=3),
    max_leaves=10,
)
_body_keys = st.sampled_from(
    [
        "queueDatas",
        "brokerDatas",
        "brokerAddrs",
        "brokerName",
        "orderTopicConf",
        "filterServerTable",
        "brokerAddrTable",
        "clusterAddrTable",
        "topicList",
        "topicConfigTable",
        "dataVersion",
        "topicConfigSerializeWrapper",
        "filterServerList",
        "table",
        "clientID",
        "consumerDataSet",
        "producerDataSet",
        "groupName",
        "subscriptionDataSet",
        "consumeType",
        "topic",
        "mqSet",
        "consumerGroup",
        "clientId",
        "lockOKMQSet",
        "queueId",
        "consumerIdList",
        "timestamp",
        "counter",
    ]
)
_json_objects = st.recursive(
    st.dictionaries(_body_keys, _json_values, max_size=4),
    lambda children: st.dictionaries(
        _body_keys, children | st.lists(children, max_size=2) | _json_values, max_size=4
    ),
    max_leaves=12,
)


@_settings
@given(data=st.binary(max_size=80) | st.builds(zlib.compress, st.binary(max_size=60)))
def test_bodies_arbitrary_bytes_raise_only_remote_protocol_error(data: bytes) -> None:
    for decode in _DECODERS:
        try:
            decode(data)
        except RemoteProtocolError:
            pass


@settings(max_examples=120, deadline=None)
@given(value=_json_objects)
def test_bodies_arbitrary_json_raises_only_remote_protocol_error(value: dict[str, Any]) -> None:
    data = orjson.dumps(value)
    for decode in _DECODERS:
        try:
            decode(data)
        except RemoteProtocolError:
            pass


def test_topic_route_trailing_newline_accepted_trailing_garbage_rejected(
    golden_hex: Callable[[str], bytes],
) -> None:
    data = golden_hex("topic_route_body.hex")
    assert bodies.decode_topic_route(data + b"\n") == build_topic_route()
    with pytest.raises(RemoteProtocolError, match="TopicRouteData"):
        bodies.decode_topic_route(data + b"{}")


def test_topic_route_fed_as_memoryview_and_str(golden_hex: Callable[[str], bytes]) -> None:
    data = golden_hex("topic_route_body.hex")
    assert bodies.decode_topic_route(memoryview(data)) == build_topic_route()
    assert bodies.decode_topic_route(data.decode()) == build_topic_route()
