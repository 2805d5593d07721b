"""The REGISTER_BROKER body a broker sends: built again only when its topics changed.

Method: a topic table of 10 or 2,000 topics behind NamesrvRegistration; the Python work of a
second body of an unchanged table is counted, and the bytes compared with a fresh encoding.
"""

from __future__ import annotations

import zlib

import pytest

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.registration import NamesrvRegistration
from orbitmq.broker.topics import TopicConfigTable
from orbitmq.model.route import PERM_READ
from orbitmq.protocol.bodies import (
    RegisterBrokerBody,
    decode_register_broker_body,
    encode_register_broker_body,
)
from tests.support.calls import python_calls


def _registration(topics: int, config: BrokerConfig) -> tuple[NamesrvRegistration, TopicConfigTable]:
    table = TopicConfigTable()
    table.create_system_topics(
        "DefaultCluster", "broker-a", auto_create_topic_enable=True, default_topic_queue_nums=8
    )
    for index in range(topics):
        table.create_from_template(f"T{index}", "TBW102", 4)
    return NamesrvRegistration(config, table, "127.0.0.1:10911"), table


@pytest.mark.parametrize("compressed", [False, True])
def test_registration_body_is_reused_while_the_topics_do_not_change(compressed: bool) -> None:
    # Every 30 s the broker registers its whole table: with 50,000 topics, encoding it again
    # each time cost a second of work that held the event loop's GIL.
    config = BrokerConfig(compressed_register=compressed)
    work = []
    for topics in (10, 2_000):
        registration, table = _registration(topics, config)
        first = registration._register_body()
        work.append(python_calls(registration._register_body))
        assert registration._register_body()[0] is first[0]
        assert first == (
            encode_register_broker_body(RegisterBrokerBody(table.snapshot()), compressed=compressed),
            compressed,
        )
    assert work[0] == work[1]


def test_registration_body_follows_topic_and_permission_changes() -> None:
    registration, table = _registration(5, BrokerConfig())
    before, _ = registration._register_body()
    table.create_from_template("Added", "TBW102", 4)
    after, _ = registration._register_body()
    wrapper = decode_register_broker_body(after).topic_config_serialize_wrapper
    assert "Added" in wrapper.topic_config_table and wrapper.data_version == table.data_version
    registration.set_config(BrokerConfig(broker_permission=PERM_READ))
    read_only, _ = registration._register_body()
    perms = {
        config.perm
        for config in decode_register_broker_body(
            read_only
        ).topic_config_serialize_wrapper.topic_config_table.values()
    }
    assert perms == {PERM_READ} and zlib.crc32(read_only) != zlib.crc32(after) != zlib.crc32(before)
