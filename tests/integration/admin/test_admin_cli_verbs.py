"""Every ``mqadmin`` verb of ``orbitmq admin`` against a live standalone server, as a table and as JSON.

Method: one server for the module (trace topic on), a traced producer that stays connected and
a traced push consumer that consumed the topic's messages, both on background loops (the
blocking facades). Each read verb runs twice through ``orbitmq admin``'s entry point: once
printing its table (checked for what it must show) and once with ``--json`` (which must be one
parseable JSON document on stdout). Each write verb runs and its effect is checked with a read.
Missing groups, topics and messages exit with the not-found status; a refused change exits 1
naming the broker and the cause.
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
from tests.support.processes import ServerProcess, start_standalone, write_conf

pytestmark = pytest.mark.integration

TOPIC = "CliVerbs"
GROUP = "CG_CLI_VERBS"
PRODUCER_GROUP = "PG_CLI_VERBS"


@dataclass
class Env:
    server: ServerProcess
    msg_ids: list[str]
    offset_msg_ids: list[str]
    client_id: str

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.server.extra_ports[0]}"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp_path = tmp_path_factory.mktemp("cli-verbs")
    server = start_standalone(
        tmp_path, "-c", str(write_conf(tmp_path / "broker.conf", {"traceTopicEnable": True}))
    )
    received: list[MessageExt] = []
    producer = consumer = None
    try:
        with BlockingAdminClient(server.addr) as admin:
            for _ in range(200):
                if admin.cluster_info().broker_addr_table:
                    break
                time.sleep(0.05)
            admin.create_topic(TOPIC, 2)

        def listener(messages: list[MessageExt]) -> ConsumeResult:
            received.extend(messages)
            return ConsumeResult.CONSUME_SUCCESS

        # The consumer first: the producer then shares its client instance (one per client id
        # and loop), whose 300 ms offset persistence the progress checks rely on.
        consumer = BlockingPushConsumer(
            GROUP,
            server.addr,
            listener,
            enable_msg_trace=True,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            persist_consumer_offset_interval_ms=300,
        )
        consumer.subscribe(TOPIC, "*")
        consumer.start()
        producer = BlockingProducer(PRODUCER_GROUP, server.addr, enable_msg_trace=True)
        producer.start()
        results = []
        for index in range(8):
            message = Message(TOPIC, f"cli-{index}".encode())
            message.tags, message.keys = "TagCli", [f"cli-key-{index}"]
            results.append(producer.send(message))
        deadline = time.monotonic() + 30
        while len(received) < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(received) >= 8
        time.sleep(1.2)  # trace batches flush every 100 ms; stats sample every second
        client_id = consumer._consumer.running_info().properties["clientId"]  # type: ignore[attr-defined]
        yield Env(server, [r.msg_id for r in results], [r.offset_msg_id for r in results], client_id)
    finally:
        if consumer is not None:
            consumer.shutdown()
        if producer is not None:
            producer.shutdown()
        server.kill()


def run(env: Env, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main([*args, "-n", env.server.addr])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def read_verbs(env: Env) -> list[tuple[list[str], list[str]]]:
    """(arguments, what the table must show) of every read verb."""
    return [
        (["clusterList"], ["DefaultCluster", "broker-a", "V4_9_8"]),
        (["topicList"], [TOPIC]),
        (["topicRoute", "-t", TOPIC], ["queueDatas"]),
        (["topicStatus", "-t", TOPIC], ["min_offset", "broker-a"]),
        (["consumerProgress", "-g", GROUP, "-t", TOPIC], ["total lag: 0"]),
        (["consumerProgress"], [GROUP]),
        (["consumerConnection", "-g", GROUP], [env.client_id, "CLUSTERING"]),
        (["producerConnection", "-g", PRODUCER_GROUP, "-t", TOPIC], ["PYTHON"]),
        (["consumerStatus", "-g", GROUP], [env.client_id, "consume_ok_tps"]),
        (["queryMsgById", "-i", env.msg_ids[1], "-t", TOPIC], ["cli-1", "TagCli"]),
        (["queryMsgById", "-i", env.offset_msg_ids[2]], ["cli-2"]),
        (["queryMsgByKey", "-t", TOPIC, "-k", "cli-key-3"], [env.msg_ids[3]]),
        (["queryMsgByOffset", "-t", TOPIC, "-b", "broker-a", "-i", "0", "-o", "0"], ["Queue Offset:"]),
        (["queryMsgTraceById", "-i", env.msg_ids[0]], ["Pub", PRODUCER_GROUP, "Sub", GROUP, "success"]),
        (["trace", env.msg_ids[0]], ["ProducerGroup", "ConsumerGroup"]),
        (["consumeMessage", "-t", TOPIC, "-c", "3"], ["Message Body:"]),
        (["printMsg", "-t", TOPIC, "-s", "TagCli"], ["cli-7"]),
        (["brokerStatus", "-b", env.broker], ["putTps", "msgPutTotalTodayNow"]),
        (["statsAll", "-t", TOPIC], [GROUP]),
        (["getBrokerConfig", "-b", env.broker], ["brokerName", "= broker-a"]),
    ]


def test_every_read_verb_prints_a_table_and_json(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    for args, wanted in read_verbs(env):
        status, out, err = run(env, capsys, *args)
        assert status == 0, (args, err)
        for text in wanted:
            assert text in out, (args, text, out)
        status, out, err = run(env, capsys, *args, "--json")
        assert status == 0, (args, err)
        assert json.loads(out) is not None, args


def test_write_verbs_change_what_reads_show(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(env, capsys, "updateTopic", "-t", "CliNew", "-q", "3")[0] == 0
    assert run(env, capsys, "updateTopic", "-t", "CliNew", "-p", "4")[0] == 0
    status, out, _ = run(env, capsys, "topicStatus", "-t", "CliNew", "--json")
    assert status == 0 and len(json.loads(out)) == 3
    assert run(env, capsys, "deleteTopic", "-t", "CliNew")[0] == 0
    assert run(env, capsys, "topicRoute", "-t", "CliNew")[0] == EXIT_NOT_FOUND

    assert run(env, capsys, "updateSubGroup", "-g", "CG_CLI_NEW", "-r", "3")[0] == 0
    status, out, _ = run(env, capsys, "updateSubGroup", "-g", "CG_CLI_NEW", "-s", "false", "--json")
    config = json.loads(out)["config"]
    assert (config["retryMaxTimes"], config["consumeEnable"]) == (3, False)
    assert run(env, capsys, "cloneGroupOffset", "-s", GROUP, "-d", "CG_CLI_NEW", "-t", TOPIC)[0] == 0
    status, out, _ = run(env, capsys, "consumerProgress", "-g", "CG_CLI_NEW", "-t", TOPIC, "--json")
    assert sum(row["consumerOffset"] for row in json.loads(out)) == 8
    assert run(env, capsys, "deleteSubGroup", "-g", "CG_CLI_NEW", "-r")[0] == 0
    assert run(env, capsys, "deleteSubGroup", "-g", "CG_CLI_NEW")[0] == EXIT_NOT_FOUND

    status, out, _ = run(
        env, capsys, "sendMessage", "-t", TOPIC, "-p", "from cli", "-k", "cli-sent", "--json"
    )
    assert status == 0 and json.loads(out)["sendStatus"] == "SEND_OK"
    status, out, _ = run(env, capsys, "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "0")
    assert status == 0 and "new_offset" in out
    status, out, _ = run(env, capsys, "skipAccumulatedMessage", "-g", GROUP, "-t", TOPIC, "--json")
    assert status == 0 and sum(row["new_offset"] for row in json.loads(out)) == 9

    assert (
        run(env, capsys, "updateBrokerConfig", "-b", env.broker, "-k", "maxReconsumeTimes", "-v", "9")[0] == 0
    )
    config_text = run(env, capsys, "getBrokerConfig", "-b", env.broker)[1]
    assert re.search(r"^maxReconsumeTimes\s+= 9$", config_text, re.MULTILINE), config_text
    status, _, err = run(env, capsys, "updateBrokerConfig", "-b", env.broker, "-k", "listenPort", "-v", "1")
    assert status == EXIT_FAILED and env.broker in err and "listenPort" in err
    assert (
        run(env, capsys, "updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", TOPIC, "-v", "broker-a:2")[0]
        == 0
    )
    assert '"orderTopicConf": "broker-a:2"' in run(env, capsys, "topicRoute", "-t", TOPIC)[1]


def test_missing_things_exit_with_not_found(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    for args in (
        ["consumerConnection", "-g", "CG_NOBODY"],
        ["queryMsgById", "-i", "00000000000000000000000000000000", "-t", TOPIC],
        ["topicStatus", "-t", "NoSuchTopic"],
        ["queryMsgTraceById", "-i", "NOT-A-MESSAGE"],
    ):
        status, _, err = run(env, capsys, *args)
        assert status == EXIT_NOT_FOUND, (args, err)
        assert err.startswith("orbitmq admin: "), err
