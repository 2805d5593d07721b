"""The real RocketMQ C++ client (PyPI rocketmq==0.4.4) against OrbitMQ servers.

Method: each scenario runs the client in child processes (tests/support/cpp_client.py),
produces messages with known bodies, tags, keys and properties, and checks what the
push consumers print: every message arrives, exactly once where the mode promises it,
with every byte intact.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.integration.conftest import Cluster, CppClient, CppConsumer
from tests.support.cpp_client import body_for
from tests.support.processes import ServerProcess, create_topic

pytestmark = pytest.mark.integration


def _broker(standalone: ServerProcess) -> str:
    return f"127.0.0.1:{standalone.extra_ports[0]}"


def _seqs(consumer: CppConsumer) -> list[int]:
    return [int(str(event["props"]["seq"])) for event in consumer.received()]  # type: ignore[index]


def _wait_total(consumers: list[CppConsumer], expected: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sum(len(c.received()) for c in consumers) >= expected:
            return
        time.sleep(0.1)
    got = sum(len(c.received()) for c in consumers)
    raise AssertionError(f"expected {expected} messages, consumers got {got}")


def _assert_intact(event: dict[str, object], topic: str, size: int, tags: str = "TagA") -> None:
    seq = int(str(event["props"]["seq"]))  # type: ignore[index]
    assert event["topic"] == topic
    assert bytes.fromhex(str(event["body_hex"])) == body_for(seq, size)
    assert event["tags"] == tags
    assert event["keys"] == f"key-{seq} k{seq % 3}"
    assert event["props"]["origin"] == "cpp"  # type: ignore[index]


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "batch"])
def test_cpp_client_send_modes_round_trip(standalone: ServerProcess, cpp: CppClient, mode: str) -> None:
    topic = f"Topic_{mode}"
    create_topic(_broker(standalone), topic)
    consumer = cpp.start_consumer(standalone.addr, topic, f"CG_{mode}")
    sent = cpp.produce(standalone.addr, topic, "--mode", mode, "--count", "30", "--size", "300")
    assert len(sent) == 30
    if mode != "oneway":
        assert {event["status"] for event in sent} == {"OK"}
    consumer.wait_for(
        lambda events: len({e["props"]["seq"] for e in events if e["event"] == "received"}) >= 30, 60
    )
    received = consumer.received()
    assert sorted(set(_seqs(consumer))) == list(range(30))
    for event in received:
        _assert_intact(event, topic, 300)
    if mode in ("sync", "async"):
        # The C++ SendResult msg_id is the UNIQ_KEY the consumer sees as the message id.
        sent_ids = {str(event["msg_id"]) for event in sent}
        assert {str(event["msg_id"]) for event in received} == sent_ids


def test_cpp_client_large_body_is_compressed_and_restored(standalone: ServerProcess, cpp: CppClient) -> None:
    # Bodies of 4 KiB and more are zlib-compressed by the client and must reach consumers intact.
    create_topic(_broker(standalone), "TopicLarge")
    consumer = cpp.start_consumer(standalone.addr, "TopicLarge", "CG_large")
    cpp.produce(standalone.addr, "TopicLarge", "--count", "5", "--size", "20000")
    consumer.wait_for(lambda events: sum(e["event"] == "received" for e in events) >= 5, 60)
    for event in consumer.received():
        _assert_intact(event, "TopicLarge", 20000)


def test_cpp_client_orderly_send_keeps_per_key_order(standalone: ServerProcess, cpp: CppClient) -> None:
    create_topic(_broker(standalone), "TopicOrder")
    consumer = cpp.start_consumer(standalone.addr, "TopicOrder", "CG_order", "--orderly")
    sent = cpp.produce(
        standalone.addr, "TopicOrder", "--mode", "orderly", "--count", "40", "--order-keys", "4"
    )
    assert {event["status"] for event in sent} == {"OK"}
    consumer.wait_for(lambda events: sum(e["event"] == "received" for e in events) >= 40, 60)
    by_key: dict[int, list[int]] = {}
    queue_of_key: dict[int, set[int]] = {}
    for event in consumer.received():
        seq = int(str(event["props"]["seq"]))  # type: ignore[index]
        by_key.setdefault(seq % 4, []).append(seq)
        queue_of_key.setdefault(seq % 4, set()).add(int(str(event["queue_id"])))
    for key, seqs in by_key.items():
        assert seqs == sorted(seqs), f"order key {key} consumed out of order: {seqs}"
        assert len(queue_of_key[key]) == 1


def test_cpp_client_tag_filter(standalone: ServerProcess, cpp: CppClient) -> None:
    create_topic(_broker(standalone), "TopicTags")
    consumer = cpp.start_consumer(standalone.addr, "TopicTags", "CG_tags", "--expression", "TagB || TagC")
    cpp.produce(standalone.addr, "TopicTags", "--count", "10", "--tags", "TagA")
    cpp.produce(standalone.addr, "TopicTags", "--count", "10", "--tags", "TagB")
    consumer.wait_for(lambda events: sum(e["event"] == "received" for e in events) >= 10, 60)
    time.sleep(1.0)
    assert {event["tags"] for event in consumer.received()} == {"TagB"}
    assert len(consumer.received()) == 10


def test_cpp_client_clustering_splits_queues_exactly_once(standalone: ServerProcess, cpp: CppClient) -> None:
    create_topic(_broker(standalone), "TopicCluster", queues=4)
    first = cpp.start_consumer(standalone.addr, "TopicCluster", "CG_cluster", "--instance", "one")
    second = cpp.start_consumer(standalone.addr, "TopicCluster", "CG_cluster", "--instance", "two")
    # The first member took every queue; the broker's NOTIFY_CONSUMER_IDS_CHANGED makes it give
    # half of them up once the second member's heartbeat arrives.
    time.sleep(3.0)
    cpp.produce(standalone.addr, "TopicCluster", "--count", "80")
    _wait_total([first, second], 80, 60)
    time.sleep(1.5)
    counts = Counter(_seqs(first) + _seqs(second))
    assert sorted(counts) == list(range(80))
    assert set(counts.values()) == {1}, "a message was consumed twice in a clean run"
    queues_first = {event["queue_id"] for event in first.received()}
    queues_second = {event["queue_id"] for event in second.received()}
    assert queues_first and queues_second, (queues_first, queues_second)
    assert not queues_first & queues_second


def test_cpp_client_broadcasting_delivers_to_every_consumer(
    standalone: ServerProcess, cpp: CppClient
) -> None:
    # Broadcasting consumers start at the queue's end, so the topic must exist first.
    cpp.produce(standalone.addr, "TopicBroadcast", "--count", "1")
    first = cpp.start_consumer(
        standalone.addr, "TopicBroadcast", "CG_bc", "--model", "broadcasting", "--instance", "one"
    )
    second = cpp.start_consumer(
        standalone.addr, "TopicBroadcast", "CG_bc", "--model", "broadcasting", "--instance", "two"
    )
    time.sleep(3.0)
    cpp.produce(standalone.addr, "TopicBroadcast", "--count", "30")
    for consumer in (first, second):
        consumer.wait_for(lambda events: sum(e["event"] == "received" for e in events) >= 30, 60)
        assert set(range(30)) <= set(_seqs(consumer))


def test_cpp_client_restarted_consumer_resumes_from_committed_offset(
    standalone: ServerProcess, cpp: CppClient
) -> None:
    create_topic(_broker(standalone), "TopicResume")
    consumer = cpp.start_consumer(standalone.addr, "TopicResume", "CG_resume")
    cpp.produce(standalone.addr, "TopicResume", "--count", "20", "--tags", "Old")
    consumer.wait_for(lambda events: sum(e["event"] == "received" for e in events) >= 20, 60)
    consumer.stop()
    cpp.produce(standalone.addr, "TopicResume", "--count", "20", "--tags", "New")
    again = cpp.start_consumer(standalone.addr, "TopicResume", "CG_resume")
    again.wait_for(lambda events: sum(e["event"] == "received" for e in events) >= 20, 60)
    time.sleep(1.5)
    assert {event["tags"] for event in again.received()} == {"New"}
    assert sorted(_seqs(again)) == list(range(20))


def test_cpp_client_two_brokers_auto_create_and_consume(cluster: Cluster, cpp: CppClient) -> None:
    sent = cpp.produce(cluster.namesrv_addr, "TopicTwoBrokers", "--count", "40")
    assert {event["status"] for event in sent} == {"OK"}
    consumer = cpp.start_consumer(cluster.namesrv_addr, "TopicTwoBrokers", "CG_two")
    consumer.wait_for(lambda events: sum(e["event"] == "received" for e in events) >= 40, 60)
    assert sorted(set(_seqs(consumer))) == list(range(40))
    msg_ids = {str(event["msg_id"]) for event in consumer.received()}
    assert msg_ids == {str(event["msg_id"]) for event in sent}
    for event in consumer.received():
        _assert_intact(event, "TopicTwoBrokers", 64)
