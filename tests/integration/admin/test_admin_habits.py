"""``orbitmq admin`` as a RocketMQ operator types it: mqadmin's forms, its mistakes, its messages.

Method: the command-line mistakes (no command, a mistyped verb, an option the verb does not
take) need no server and are checked on argparse's exit status and stderr. The forms that
reach a cluster run against one standalone server for the module: ``updateTopic -b HOST:PORT``,
a topic with 8 read queues and 4 write queues (sends land only in the first 4, every one of the
8 can be read), and ``producerConnection`` for a group nobody runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from orbitmq.cli.admin import EXIT_NOT_FOUND, EXIT_USAGE, build_parser, main
from orbitmq.client import Message
from orbitmq.client.blocking import BlockingAdminClient, BlockingProducer
from tests.support.processes import ServerProcess, start_standalone

pytestmark = pytest.mark.integration


def usage_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    assert exited.value.code == EXIT_USAGE, args
    return capsys.readouterr().err


def test_admin_without_a_command_asks_for_one(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys)
    assert "name a command" in err and "clusterList" in err, err
    assert "arguments are required: group" not in err
    err = usage_error(capsys, "topic")
    assert "name a command: create, update, delete" in err, err


def test_admin_mistyped_verb_gets_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "topicLsit")
    assert "did you mean topicList" in err, err
    err = usage_error(capsys, "updateTopc", "-t", "T")
    assert "did you mean updateTopic" in err, err
    err = usage_error(capsys, "nothingLikeAnyVerb")
    assert "'orbitmq admin --help' lists every command" in err, err
    # The usage line names the command placeholder, not every verb in braces.
    assert "clusterList,topicList" not in err


def test_admin_verbs_ignore_case_as_mqadmin_does() -> None:
    args = build_parser().parse_args(["topiclist", "-n", "127.0.0.1:1"])
    assert args.group == "topicList"
    args = build_parser().parse_args(["UPDATETOPIC", "-t", "T", "-r", "8", "-w", "4"])
    assert (args.group, args.read_queues, args.write_queues) == ("updateTopic", 8, 4)


def test_admin_bad_option_is_reported_against_the_verbs_usage(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "topicStatus", "-t", "T", "-x", "1")
    assert err.startswith("usage: orbitmq admin topicStatus "), err
    assert "unrecognized arguments: -x 1" in err, err
    err = usage_error(capsys, "topic", "list", "--bogus")
    assert err.startswith("usage: orbitmq admin topic list "), err


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start_standalone(tmp_path_factory.mktemp("admin-habits"), "--no-proxy")
    try:
        with BlockingAdminClient(process.addr) as admin:
            for _ in range(200):
                if admin.cluster_info().broker_addr_table:
                    break
                time.sleep(0.05)
        yield process
    finally:
        process.kill()


def run(server: ServerProcess, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main([*args, "-n", server.addr])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_admin_update_topic_takes_a_broker_address(
    server: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    broker = f"127.0.0.1:{server.extra_ports[0]}"
    status, out, err = run(
        server, capsys, "updateTopic", "-b", broker, "-t", "HabitsByAddr", "-r", "3", "-w", "3"
    )
    assert status == 0, err
    assert broker in out
    status, out, err = run(server, capsys, "topicRoute", "-t", "HabitsByAddr", "--json")
    assert status == 0, err
    assert json.loads(out)["queueDatas"][0]["writeQueueNums"] == 3


def test_admin_update_topic_serves_unequal_read_and_write_queue_counts(
    server: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(
        server, capsys, "updateTopic", "-t", "HabitsShrink", "-r", "8", "-w", "4", "--json"
    )
    assert status == 0, err
    assert [(c["readQueueNums"], c["writeQueueNums"]) for c in json.loads(out).values()] == [(8, 4)]
    producer = BlockingProducer("PG_HABITS", server.addr)
    producer.start()
    try:
        for index in range(16):
            assert producer.send(Message("HabitsShrink", f"m{index}".encode())).status.name == "OK"
    finally:
        producer.shutdown()
    # topicStatus lists the write queues (as RocketMQ's GET_TOPIC_STATS_INFO does): all 16 sends.
    status, out, err = run(server, capsys, "topicStatus", "-t", "HabitsShrink", "--json")
    assert status == 0, err
    queues = {row["queueId"]: row["maxOffset"] for row in json.loads(out)}
    assert sorted(queues) == [0, 1, 2, 3] and sum(queues.values()) == 16, queues
    # Consumers are given the 8 read queues; the 4 never written answer empty, not an error.
    with BlockingAdminClient(server.addr) as admin:
        readable = admin.fetch_queues("HabitsShrink")
        assert [mq.queue_id for mq in readable] == list(range(8))
        assert admin.max_offset(readable[6]) == 0
    for queue_id, count in ((6, 0), (1, 4)):
        status, out, err = run(
            server,
            capsys,
            "consumeMessage",
            "-t",
            "HabitsShrink",
            "-b",
            "broker-a",
            "-i",
            str(queue_id),
            "--json",
        )
        assert status == 0, err
        assert len(json.loads(out)) == count, out
    # Shrinking the read side later keeps the write side: the operator's second step.
    status, out, err = run(server, capsys, "updateTopic", "-t", "HabitsShrink", "-r", "4", "--json")
    assert status == 0, err
    assert [(c["readQueueNums"], c["writeQueueNums"]) for c in json.loads(out).values()] == [(4, 4)]


def test_admin_producer_connection_of_an_unknown_group_is_not_found_once(
    server: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(server, capsys, "producerConnection", "-g", "PG_NOBODY_RUNS")
    assert status == EXIT_NOT_FOUND, err
    assert err.count("PG_NOBODY_RUNS") == 1, err
    assert len(err.strip().splitlines()) == 1, err
