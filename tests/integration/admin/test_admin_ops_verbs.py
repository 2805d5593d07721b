"""mqadmin's operations verbs on ``orbitmq admin`` against a live standalone server.

Method: one server for the module, a topic with 2 queues holding 4 messages tagged TagA and
TagB, and a push consumer of it (tag TagA) that consumed them. Each verb runs through ``orbitmq
admin``'s entry point; what it prints is checked against mqadmin's lines (the shapes RocketMQ's
SubCommand classes print) and its effect against a read: the route's perm after
``updateTopicPerm``/``wipeWritePerm``/``addWritePerm``, the name server's config after
``updateNamesrvConfig``, the KV table after ``deleteKvConfig``. The requests behind them
(WIPE_WRITE_PERM_OF_BROKER 205, ADD_WRITE_PERM_OF_BROKER 327, GET/UPDATE_NAMESRV_CONFIG
319/318, QUERY_CONSUME_QUEUE 321, GET_BROKER_CONSUME_STATS 317) are RocketMQ's, so mqadmin
itself can send them too.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from orbitmq.cli.admin import EXIT_FAILED, EXIT_NOT_FOUND, main
from orbitmq.client import ConsumeResult, Message
from orbitmq.client.blocking import BlockingAdminClient, BlockingProducer, BlockingPushConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import MessageExt
from tests.support.processes import ServerProcess, start_standalone

pytestmark = pytest.mark.integration

TOPIC = "OpsVerbs"
GROUP = "CG_OPS_VERBS"


@dataclass
class Env:
    server: ServerProcess

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.server.extra_ports[0]}"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    server = start_standalone(tmp_path_factory.mktemp("ops-verbs"), "--no-proxy")
    consumer = None
    try:
        with BlockingAdminClient(server.addr) as admin:
            for _ in range(200):
                if admin.cluster_info().broker_addr_table:
                    break
                time.sleep(0.05)
            admin.create_topic(TOPIC, 2)
        producer = BlockingProducer("PG_OPS_VERBS", server.addr)
        producer.start()
        try:
            for index in range(4):
                message = Message(TOPIC, f"ops-{index}".encode())
                message.tags = "TagA" if index % 2 == 0 else "TagB"
                producer.send(message)
        finally:
            producer.shutdown()
        received: list[MessageExt] = []

        def listener(messages: list[MessageExt]) -> ConsumeResult:
            received.extend(messages)
            return ConsumeResult.CONSUME_SUCCESS

        consumer = BlockingPushConsumer(
            GROUP,
            server.addr,
            listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            persist_consumer_offset_interval_ms=200,
        )
        consumer.subscribe(TOPIC, "TagA")
        consumer.start()
        deadline = time.monotonic() + 30
        while len(received) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(received) == 2
        time.sleep(0.6)  # the offsets reach the broker
        yield Env(server)
    finally:
        if consumer is not None:
            consumer.shutdown()
        server.kill()


def run(env: Env, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main([*args, "-n", env.server.addr])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def route_perm(env: Env, capsys: pytest.CaptureFixture[str], topic: str = TOPIC) -> int:
    status, out, err = run(env, capsys, "topicRoute", "-t", topic)
    assert status == 0, err
    return int(json.loads(out)["queueDatas"][0]["perm"])


def test_admin_update_topic_perm_changes_the_route(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(env, capsys, "updateTopic", "-t", "OpsPerm", "-r", "2", "-w", "2")
    assert status == 0, err
    status, out, err = run(env, capsys, "updateTopicPerm", "-t", "OpsPerm", "-p", "4", "-c", "DefaultCluster")
    assert status == 0, err
    assert f"update topic perm from 6 to 4 in {env.broker} success." in out
    assert route_perm(env, capsys, "OpsPerm") == 4
    status, out, _ = run(env, capsys, "updateTopicPerm", "-t", "OpsPerm", "-p", "4", "-b", env.broker)
    assert status == 0 and "new perm equals to the old one!" in out
    status, _, err = run(env, capsys, "updateTopicPerm", "-t", "OpsPerm", "-p", "6")
    assert status == EXIT_FAILED and "-b" in err


def test_admin_topic_cluster_list_and_allocate_mq(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(env, capsys, "topicClusterList", "-t", TOPIC)
    assert (status, out) == (0, "DefaultCluster\n"), err
    status, out, err = run(env, capsys, "allocateMQ", "-t", TOPIC, "-i", "10.0.0.1,10.0.0.2,10.0.0.3")
    assert status == 0, err
    result = json.loads(out)["result"]
    assert [[q["queueId"] for q in result[ip]] for ip in ("10.0.0.1", "10.0.0.2", "10.0.0.3")] == [
        [0],
        [1],
        [],
    ]
    assert run(env, capsys, "topicClusterList", "-t", "NoSuchTopic")[0] == EXIT_NOT_FOUND


def test_admin_namesrv_config_reads_and_changes_live_keys(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(env, capsys, "getNamesrvConfig")
    assert status == 0, err
    assert out.startswith(f"============{env.server.addr}============\n"), out
    assert re.search(r"^brokerChannelExpiredTime\s+=  120000$", out, re.MULTILINE), out
    status, out, err = run(
        env, capsys, "updateNamesrvConfig", "-k", "brokerChannelExpiredTime", "-v", "90000"
    )
    assert status == 0 and "update name server config success!" in out, err
    status, out, _ = run(env, capsys, "getNamesrvConfig", "--json")
    assert json.loads(out)[env.server.addr]["brokerChannelExpiredTime"] == "90000"
    # A key that needs a restart, an unknown key, a bad value: refused, naming the key.
    for key, value, named in (
        ("listenPort", "1", "listenPort cannot change"),
        ("brokerChanelExpiredTime", "1", "brokerChanelExpiredTime"),
        ("maxBrokers", "-3", "maxBrokers"),
    ):
        status, _, err = run(env, capsys, "updateNamesrvConfig", "-k", key, "-v", value)
        assert status == EXIT_FAILED and named in err, (key, err)


def test_admin_delete_kv_config(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(env, capsys, "updateKvConfig", "-s", "OPS_NS", "-k", "key", "-v", "value")[0] == 0
    status, out, err = run(env, capsys, "deleteKvConfig", "-s", "OPS_NS", "-k", "key")
    assert (status, out) == (0, "delete kv config from namespace success.\n"), err
    status, out, _ = run(env, capsys, "topicRoute", "-t", TOPIC)  # reads the KV table's ORDER_TOPIC_CONFIG
    assert (
        run(env, capsys, "updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", TOPIC, "-v", "broker-a:2")[0]
        == 0
    )
    assert '"orderTopicConf": "broker-a:2"' in run(env, capsys, "topicRoute", "-t", TOPIC)[1]
    assert run(env, capsys, "deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", TOPIC)[0] == 0
    assert '"orderTopicConf": null' in run(env, capsys, "topicRoute", "-t", TOPIC)[1]


def test_admin_wipe_and_add_write_perm_of_a_broker(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(env, capsys, "wipeWritePerm", "-b", "broker-a")
    assert status == 0, err
    wiped = re.fullmatch(
        rf"wipe write perm of broker\[broker-a\] in name server\[{re.escape(env.server.addr)}\] OK, (\d+)\n",
        out,
    )
    assert wiped is not None and int(wiped.group(1)) >= 1, out
    assert route_perm(env, capsys) == 4
    status, out, err = run(env, capsys, "addWritePerm", "-b", "broker-a")
    assert status == 0 and f"in name server[{env.server.addr}] OK, {wiped.group(1)}" in out, err
    assert route_perm(env, capsys) == 6


def test_admin_get_consumer_config(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(env, capsys, "getConsumerConfig", "-g", GROUP)
    assert status == 0, err
    assert "=============================DefaultCluster:broker-a=============================" in out
    assert re.search(rf"^groupName\s+=  {GROUP}$", out, re.MULTILINE), out
    assert re.search(r"^retryMaxTimes\s+=  16$", out, re.MULTILINE), out
    assert run(env, capsys, "getConsumerConfig", "-g", "CG_NOBODY_HAS")[0] == EXIT_NOT_FOUND


def test_admin_broker_consume_stats(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(env, capsys, "brokerConsumeStats", "-b", env.broker)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("#Topic") and "#Consumer Offset" in lines[0]
    rows = [line.split() for line in lines[1:] if line.startswith(TOPIC)]
    assert {(row[1], row[3], row[4], row[5]) for row in rows} == {
        (GROUP, "0", "2", "2"),
        (GROUP, "1", "2", "2"),
    }
    assert lines[-1] == "Diff Total: 0", lines


def test_admin_cluster_rt(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(env, capsys, "clusterRT", "-a", "3", "-i", "0", "--rounds", "1")
    assert status == 0, err
    header, row = out.splitlines()
    assert header.split("  ")[0] == "#Cluster Name"
    cluster, broker, rt_ms, ok, failed = row.split()
    assert (cluster, broker, ok, failed) == ("DefaultCluster", "broker-a", "3", "0") and float(rt_ms) >= 0
    assert run(env, capsys, "clusterRT", "-a", "1", "--rounds", "1")[0] == EXIT_FAILED


def test_admin_query_cq(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(env, capsys, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-b", env.broker)
    assert status == 0, err
    assert "Queue data: \nmax: 2, min: 0\n" in out
    entries = re.findall(
        r"idx: (\d+)\nConsumeQueueData\{physicOffset=(\d+), physicSize=(\d+), tagsCode=(-?\d+)", out
    )
    assert [index for index, *_ in entries] == ["0", "1"] and all(int(size) > 0 for _, _, size, _ in entries)
    # With the group: its subscription, and whether each entry's tag passes it (TagA, then TagA:
    # queue 0 holds messages 0 and 2, both TagA).
    status, out, err = run(env, capsys, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-g", GROUP, "--json")
    assert status == 0, err
    document = json.loads(out)
    assert document["subscriptionData"]["subString"] == "TagA"
    assert [entry["eval"] for entry in document["queueData"]] == [True, True]
    status, out, _ = run(env, capsys, "queryCq", "-t", TOPIC, "-q", "1", "-i", "0", "-g", GROUP, "--json")
    assert [entry["eval"] for entry in json.loads(out)["queueData"]] == [False, False]
    status, out, _ = run(env, capsys, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-g", "CG_OFFLINE")
    assert f"Filter data: \nCG_OFFLINE@{TOPIC} is not online!\n" in out
    status, _, err = run(env, capsys, "queryCq", "-t", TOPIC, "-q", "7", "-i", "0", "-b", env.broker)
    assert status == EXIT_FAILED and f"7@{TOPIC} is not exist!" in err
