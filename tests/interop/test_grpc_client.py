"""Apache's 5.x gRPC Java client (rocketmq-client-java) against OrbitMQ's gRPC proxy: normal,
FIFO, delay and transactional producers; SimpleConsumer and PushConsumer; TLS off
(``enableSsl(false)``), and the client at its defaults (TLS on, the server's certificate not
verified) against the default gRPC port, which serves TLS beside plaintext with a self-signed
certificate as Apache's proxy does (``tlsTestModeEnable``, proxy/tls.py).

FIFO, delay and transactional messages go to topics of that type, made as Apache's
documentation says (``mqadmin updateTopic -a +message.type=FIFO``): Apache's proxy, and
OrbitMQ's, refuse a message whose type is not its topic's (a topic without the attribute is
NORMAL).

Every received message is compared byte for byte with the one sent (tests/interop/messages.py).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from tests.interop.messages import check_exactly, received
from tests.interop.test_mqadmin import mqadmin
from tests.interop.test_remoting_client import done, sent
from tests.support.interop_java import Event, JavaLine, run_java
from tests.support.processes import ServerProcess

DRIVER = "orbitmq.interop.GrpcDriver"
TYPED_TOPICS = {"grpc-fifo": "FIFO", "grpc-delay": "DELAY", "grpc-tx": "TRANSACTION"}


@pytest.fixture(scope="module")
def typed_topics(
    remoting5: JavaLine, server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> dict[int, str]:
    """The typed topics, and the orderly group of the FIFO test, by Apache's mqadmin 5.x in one JVM."""
    n = ["-n", server.addr, "-c", "DefaultCluster"]
    return mqadmin(
        remoting5,
        tmp_path_factory.mktemp("mqadmin"),
        *(
            ["updateTopic", *n, "-t", topic, "-a", f"+message.type={kind}"]
            for topic, kind in TYPED_TOPICS.items()
        ),
        ["updateSubGroup", *n, "-g", "grpc-fifo-g", "-o", "true"],
    )


def drive_grpc(line: JavaLine, tmp_path: Path, server: ServerProcess, *steps: list[str]) -> list[Event]:
    endpoint = f"127.0.0.1:{server.extra_ports[1]}"
    args: list[str] = []
    for step in steps:
        if args:
            args.append("+")
        args += [*step, "--endpoint", endpoint]
    return run_java(line, DRIVER, args, tmp_path / "home", timeout_s=180)


def refused(events: list[Event]) -> list[Event]:
    return [event for event in events if event.get("event") == "refused"]


def test_grpc_normal_messages_reach_simple_and_push_consumers(
    grpc_client: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    topic, count = "grpc-normal", 1000
    events = drive_grpc(
        grpc_client,
        tmp_path,
        server,
        ["produce", "--topic", topic, "--count", str(count), "--in-flight", "32"],
        ["simple", "--topic", topic, "--group", "grpc-simple-g", "--expect", str(count)],
        ["push", "--topic", topic, "--group", "grpc-push-g", "--expect", str(count), "--settle-ms", "500"],
    )
    assert len(sent(events)) == count
    check_exactly(received(events, "simple"), range(count), origin="java-grpc")
    check_exactly(received(events, "push"), range(count), origin="java-grpc")


def test_grpc_client_at_its_defaults_speaks_tls_to_the_default_port(
    grpc_client: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    """No enableSsl(false): the client's default TLS on the port plaintext clients use too."""
    topic, count = "grpc-default-tls", 1000
    events = drive_grpc(
        grpc_client,
        tmp_path,
        server,
        ["produce", "--topic", topic, "--count", str(count), "--tls", "--in-flight", "32"],
        ["simple", "--topic", topic, "--group", "grpc-default-tls-g", "--expect", str(count), "--tls"],
    )
    assert len(sent(events)) == count
    check_exactly(received(events, "simple"), range(count), origin="java-grpc")


def test_grpc_fifo_topic_takes_fifo_messages_in_group_order_and_refuses_others(
    grpc_client: JavaLine, typed_topics: dict[int, str], server: ServerProcess, tmp_path: Path
) -> None:
    """A FIFO topic made by ``updateTopic -a +message.type=FIFO`` takes FIFO messages, consumed in
    order per message group by a group made orderly (``updateSubGroup -o true``), as on Apache's
    proxy; a NORMAL message to it, and a FIFO message to a DELAY topic, are refused as Apache
    refuses them (the route names the topic's one type, the client checks it)."""
    assert "message.type=FIFO" in typed_topics[0], typed_topics[0]
    topic, count = "grpc-fifo", 1000
    events = drive_grpc(
        grpc_client,
        tmp_path,
        server,
        ["produce", "--topic", topic, "--mode", "fifo", "--count", str(count)],
        [
            "produce",
            "--topic",
            topic,
            "--mode",
            "normal",
            "--start",
            "1000",
            "--count",
            "2",
            "--expect-refused",
        ],
        [
            "produce",
            "--topic",
            "grpc-delay",
            "--mode",
            "fifo",
            "--start",
            "2000",
            "--count",
            "1",
            "--expect-refused",
        ],
        ["push", "--topic", topic, "--group", "grpc-fifo-g", "--expect", str(count)],
    )
    done(events)
    no = refused(events)
    assert [event["seq"] for event in no] == [1000, 1001, 2000], no
    for event in no:
        assert "message type not match" in str(event["message"]), event
    assert "acceptMessageTypes=[FIFO]" in str(no[0]["message"]) and "actualMessageType=NORMAL" in str(
        no[0]["message"]
    )
    assert "acceptMessageTypes=[DELAY]" in str(no[2]["message"]) and "actualMessageType=FIFO" in str(
        no[2]["message"]
    )
    got = received(events, "push")
    check_exactly(got, range(count), origin="java-grpc")
    order: dict[object, list[int]] = defaultdict(list)
    for event in got:
        seq = int(event["props"]["seq"])  # type: ignore[index]
        assert event["message_group"] == f"group-{seq % 4}"
        order[event["message_group"]].append(seq)
    for group, seqs in order.items():
        assert seqs == sorted(seqs), f"{group} consumed out of order"


def test_grpc_delay_messages_wait_for_their_time(
    grpc_client: JavaLine, typed_topics: dict[int, str], server: ServerProcess, tmp_path: Path
) -> None:
    topic, count = "grpc-delay", 1000
    events = drive_grpc(
        grpc_client,
        tmp_path,
        server,
        [
            "produce",
            "--topic",
            topic,
            "--mode",
            "delay",
            "--delay-ms",
            "2000",
            "--count",
            str(count),
            "--in-flight",
            "32",
        ],
        ["simple", "--topic", topic, "--group", "grpc-delay-g", "--expect", str(count)],
    )
    by_seq = check_exactly(received(events, "simple"), range(count), origin="java-grpc")
    sent_at = {event["seq"]: int(event["now_ms"]) for event in sent(events)}  # type: ignore[call-overload]
    for seq, event in by_seq.items():
        assert int(event["now_ms"]) - sent_at[seq] >= 1500, f"seq {seq} delivered before its time"  # type: ignore[call-overload]


def test_grpc_transactions_commit_roll_back_and_check_back(
    grpc_client: JavaLine, typed_topics: dict[int, str], server: ServerProcess, tmp_path: Path
) -> None:
    topic, count, orphans = "grpc-tx", 1000, 10
    committed = [seq for seq in range(count) if seq % 3 != 1]
    events = drive_grpc(
        grpc_client,
        tmp_path,
        server,
        [
            "produce",
            "--topic",
            topic,
            "--mode",
            "transaction",
            "--count",
            str(count),
            "--orphans",
            str(orphans),
        ],
        ["simple", "--topic", topic, "--group", "grpc-tx-g", "--expect", str(len(committed))],
    )
    checked = {event["seq"] for event in events if event.get("event") == "checked"}
    assert checked == {seq for seq in range(count) if seq % 3 == 2 and seq // 3 < orphans}
    check_exactly(
        received(events, "simple"), [seq for seq in range(count) if seq % 3 != 1], origin="java-grpc"
    )
