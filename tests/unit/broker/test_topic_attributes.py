"""RocketMQ 5 topic attributes: the rules of ``updateTopic -a``, the table, topics.json, the wire forms."""

from __future__ import annotations

import re

import orjson
import pytest

from orbitmq.broker.topics import TopicConfigTable
from orbitmq.errors import BrokerResponseError
from orbitmq.model.route import TopicConfig
from orbitmq.model.topic_attributes import (
    AttributeError_,
    alter_attributes,
    format_attribute_changes,
    message_type_of_attributes,
    parse_attribute_changes,
)
from orbitmq.protocol.bodies import (
    RegisterBrokerBody,
    decode_register_broker_body,
    decode_topic_config_wrapper,
    encode_register_broker_body,
    encode_topic_config,
    encode_topic_config_wrapper,
)
from orbitmq.protocol.codes import ResponseCode


def test_topic_attributes_parse_the_changes_mqadmin_sends() -> None:
    changes = parse_attribute_changes("+message.type=FIFO,-reserve.time")
    assert changes == {"+message.type": "FIFO", "-reserve.time": ""}
    assert format_attribute_changes(changes) == "+message.type=FIFO,-reserve.time"
    assert parse_attribute_changes(None) == {} == parse_attribute_changes("")
    for bad, words in (
        ("message.type=FIFO", "add/alter attribute format is wrong: message.type"),
        ("message.type", "delete attribute format is wrong: message.type"),
        ("+message.type=FIFO,+message.type=DELAY", "key duplication: +message.type"),
        ("+message.type=", "add/alter attribute format is wrong"),
    ):
        with pytest.raises(AttributeError_, match=re.escape(words)):
            parse_attribute_changes(bad)


def test_topic_attributes_alter_as_rocketmq_does() -> None:
    created = alter_attributes(True, {}, {"+message.type": "FIFO", "+queue.type": "SimpleCQ"})
    assert created == {"message.type": "FIFO", "queue.type": "SimpleCQ"}
    # An update changes what it names and keeps the rest.
    assert alter_attributes(False, created, {"+message.type": "DELAY"}) == {
        "message.type": "DELAY",
        "queue.type": "SimpleCQ",
    }
    assert alter_attributes(False, created, {}) == created
    assert alter_attributes(False, created, {"-message.type": ""}) == {"queue.type": "SimpleCQ"}
    for create, current, changes, words in (
        (True, {}, {"-message.type": ""}, "only add attribute is supported while creating topic"),
        (False, {}, {"-message.type": ""}, "attempt to delete a nonexistent key: message.type"),
        (False, {}, {"+colour": "red"}, "unsupported key: colour"),
        (
            False,
            created,
            {"+queue.type": "BatchCQ"},
            "attempt to update an unchangeable attribute. key: queue.type",
        ),
        (True, {}, {"+message.type": "ORDERED"}, "value is not in set"),
        (True, {}, {"+reserve.time": "soon"}, "not a number"),
    ):
        with pytest.raises(AttributeError_, match=re.escape(words)):
            alter_attributes(create, current, changes)
    assert message_type_of_attributes({}) == "NORMAL"
    assert message_type_of_attributes({"message.type": "TRANSACTION"}) == "TRANSACTION"


def test_topic_table_update_changes_attributes_and_keeps_the_unnamed() -> None:
    table = TopicConfigTable()
    assert table.update(TopicConfig("T", 4, 4), {"+message.type": "FIFO"})
    assert table.get("T") == TopicConfig("T", 4, 4, attributes={"message.type": "FIFO"})
    # updateTopic without -a (8 queues now) keeps the type; the same request again changes nothing.
    assert table.update(TopicConfig("T", 8, 8), {})
    assert table.get("T") == TopicConfig("T", 8, 8, attributes={"message.type": "FIFO"})
    assert not table.update(TopicConfig("T", 8, 8), {"+message.type": "FIFO"})
    with pytest.raises(BrokerResponseError) as refused:
        table.update(TopicConfig("T", 8, 8), {"+queue.type": "BatchCQ"})
    assert refused.value.code == ResponseCode.SYSTEM_ERROR
    assert "unchangeable attribute" in str(refused.value)
    assert table.get("T") == TopicConfig("T", 8, 8, attributes={"message.type": "FIFO"})


def test_topic_attributes_survive_topics_json_and_registration() -> None:
    table = TopicConfigTable()
    table.update(TopicConfig("Fifo", 2, 2), {"+message.type": "FIFO"})
    table.update(TopicConfig("Plain", 2, 2), {})
    data = table.encode()
    document = orjson.loads(data)
    # topics.json as Apache writes it: the attribute's real key, no sign.
    assert document["topicConfigTable"]["Fifo"]["attributes"] == {"message.type": "FIFO"}
    assert document["topicConfigTable"]["Plain"]["attributes"] == {}
    loaded = TopicConfigTable.decode(data)
    assert loaded.get("Fifo") == table.get("Fifo") and loaded.get("Plain") == table.get("Plain")
    wrapper = table.snapshot()
    assert decode_topic_config_wrapper(encode_topic_config_wrapper(wrapper)).topic_config_table == (
        wrapper.topic_config_table
    )
    for compressed in (False, True):
        body = encode_register_broker_body(RegisterBrokerBody(wrapper), compressed=compressed)
        decoded = decode_register_broker_body(body, compressed=compressed).topic_config_serialize_wrapper
        assert decoded.topic_config_table["Fifo"].attributes == {"message.type": "FIFO"}
    assert orjson.loads(encode_topic_config(table.get("Fifo")))["attributes"] == {"message.type": "FIFO"}  # type: ignore[arg-type]


def test_topic_attributes_compressed_registration_reads_apaches_form() -> None:
    """RocketMQ 5's compressed REGISTER_BROKER writes each topic as ``name r w perm filter {json}``."""
    import struct
    import zlib

    def chunk(data: bytes) -> bytes:
        return struct.pack(">i", len(data)) + data

    raw = chunk(b'{"counter":1,"timestamp":5}') + struct.pack(">i", 2)
    raw += chunk(b'Fifo 4 4 6 SINGLE_TAG {"message.type":"FIFO"}') + chunk(b"Old 4 4 6 SINGLE_TAG")
    raw += chunk(b"[]") + struct.pack(">i", 0)
    table = decode_register_broker_body(zlib.compress(raw), compressed=True).topic_config_serialize_wrapper
    assert table.topic_config_table["Fifo"].attributes == {"message.type": "FIFO"}
    assert table.topic_config_table["Old"].attributes == {}
