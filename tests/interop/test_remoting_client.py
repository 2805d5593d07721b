"""Apache's remoting Java client (rocketmq-client 4.9.x and the newest 5.x) against OrbitMQ.

Each test runs the driver (tests/interop/java/src/remoting) once: its steps produce in one
mode and consume in another, in one JVM; every received message is compared byte for byte
(body, tags, keys, user properties) with the one sent (tests/interop/messages.py).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from tests.interop.messages import check_at_least_once, check_exactly, received
from tests.support.interop_java import Event, JavaLine, run_java
from tests.support.processes import ServerProcess

DRIVER = "orbitmq.interop.RemotingDriver"
PER_MODE = 1000


def drive(
    line: JavaLine, tmp_path: Path, server: ServerProcess, *steps: list[str], timeout_s: float = 150
) -> list[Event]:
    args: list[str] = []
    for step in steps:
        if args:
            args.append("+")
        args += [*step, "--namesrv", server.addr]
    return run_java(line, DRIVER, args, tmp_path / "home", timeout_s=timeout_s)


def sent(events: list[Event]) -> list[Event]:
    return [event for event in events if event.get("event") == "sent"]


def done(events: list[Event]) -> Event:
    finals = [event for event in events if event.get("event") == "consume_done"]
    assert finals and finals[-1]["finished"], f"a consumer did not get everything: {finals}"
    return finals[-1]


def test_remoting_producer_modes_reach_clustered_push_consumers(
    remoting: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    """sync, async, oneway and batch sends, 1,000 each, read by two clustered push consumers."""
    topic, group = f"modes-{remoting.profile}", f"modes-{remoting.profile}-g"
    steps = [
        [
            "produce",
            "--topic",
            topic,
            "--mode",
            mode,
            "--start",
            str(i * PER_MODE),
            "--count",
            str(PER_MODE),
            "--tags",
            "cycle",
        ]
        for i, mode in enumerate(("sync", "async", "oneway", "batch"))
    ]
    consume = [
        "push",
        "--topic",
        topic,
        "--group",
        group,
        "--instances",
        "2",
        "--expect",
        str(4 * PER_MODE),
        "--distinct",
    ]
    events = drive(remoting, tmp_path, server, *steps, [*consume, "--settle-ms", "500"])
    sends = sent(events)
    assert len(sends) == 4 * PER_MODE
    assert {event["status"] for event in sends} <= {"SEND_OK", "ONEWAY"}
    done(events)
    check_at_least_once(received(events), range(4 * PER_MODE))
    by_id = {event["msg_id"]: event for event in sends if "msg_id" in event}
    for event in received(events):
        seq = int(event["props"]["seq"])  # type: ignore[index]
        if seq < 2 * PER_MODE:  # sync and async results name the message the consumer got
            assert by_id[event["msg_id"]]["seq"] == seq


def test_remoting_orderly_sends_are_consumed_in_order_per_queue(
    remoting: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    """MessageQueueSelector sends, 1,000, read by an orderly listener in send order per queue."""
    topic, group = f"orderly-{remoting.profile}", f"orderly-{remoting.profile}-g"
    events = drive(
        remoting,
        tmp_path,
        server,
        [
            "produce",
            "--topic",
            topic,
            "--mode",
            "orderly",
            "--count",
            str(PER_MODE),
            "--shards",
            "4",
            "--tags",
            "cycle",
        ],
        ["push", "--topic", topic, "--group", group, "--listener", "orderly", "--expect", str(PER_MODE)],
    )
    queue_of = {event["seq"]: event["queue_id"] for event in sent(events)}
    assert all(queue_of[seq] == seq % 4 for seq in queue_of), "the selector's queue was not used"
    done(events)
    check_exactly(received(events), range(PER_MODE))
    order: dict[object, list[int]] = defaultdict(list)
    for event in received(events):
        order[event["queue_id"]].append(int(event["props"]["seq"]))  # type: ignore[index]
        assert event["queue_id"] == queue_of[int(event["props"]["seq"])]  # type: ignore[index]
    for queue, seqs in order.items():
        assert seqs == sorted(seqs), f"queue {queue} consumed out of order"


def test_remoting_broadcasting_consumers_each_get_every_message(
    remoting: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    topic, group = f"broadcast-{remoting.profile}", f"broadcast-{remoting.profile}-g"
    events = drive(
        remoting,
        tmp_path,
        server,
        ["produce", "--topic", topic, "--mode", "batch", "--count", str(PER_MODE), "--tags", "cycle"],
        [
            "push",
            "--topic",
            topic,
            "--group",
            group,
            "--model",
            "broadcasting",
            "--instances",
            "2",
            "--expect",
            str(PER_MODE),
        ],
    )
    done(events)
    for instance in ("consumer-0", "consumer-1"):
        check_exactly(received(events, instance), range(PER_MODE))


def test_remoting_tag_and_sql92_selectors_filter_on_the_broker(
    remoting: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    topic = f"select-{remoting.profile}"
    tag_seqs = [seq for seq in range(PER_MODE) if seq % 3 in (0, 2)]  # TagA || TagC
    sql_seqs = [seq for seq in range(PER_MODE) if seq % 2 == 0 and seq % 10 > 4]
    events = drive(
        remoting,
        tmp_path,
        server,
        ["produce", "--topic", topic, "--mode", "batch", "--count", str(PER_MODE), "--tags", "cycle"],
        [
            "push",
            "--topic",
            topic,
            "--group",
            f"{topic}-tag",
            "--tag-expr",
            "TagA || TagC",
            "--expect",
            str(len(tag_seqs)),
            "--instance",
            "tag",
            "--settle-ms",
            "1000",
        ],
        [
            "push",
            "--topic",
            topic,
            "--group",
            f"{topic}-sql",
            "--sql",
            "color = 'red' AND n > 4 AND TAGS IS NOT NULL",
            "--expect",
            str(len(sql_seqs)),
            "--instance",
            "sql",
            "--settle-ms",
            "1000",
        ],
    )
    check_exactly(received(events, "tag-0"), tag_seqs)
    check_exactly(received(events, "sql-0"), sql_seqs)


def test_remoting_lite_pull_consumer_subscribes_and_seeks(
    remoting: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    topic = f"lite-{remoting.profile}"
    events = drive(
        remoting,
        tmp_path,
        server,
        ["produce", "--topic", topic, "--mode", "sync", "--count", str(PER_MODE), "--tags", "cycle"],
        [
            "litepull",
            "--topic",
            topic,
            "--group",
            f"{topic}-sub",
            "--expect",
            str(PER_MODE),
            "--instance",
            "sub",
        ],
        [
            "litepull",
            "--topic",
            topic,
            "--group",
            f"{topic}-assign",
            "--mode",
            "assign",
            "--seek-offset",
            "200",
            "--expect",
            str(PER_MODE - 4 * 200),
            "--instance",
            "assign",
        ],
    )
    sends = sent(events)
    # A rebalance may hand a queue back from its committed offset: repeats are allowed, gaps not.
    check_at_least_once(received(events, "sub"), range(PER_MODE))
    # assign + seek(200) on each of the 4 queues: exactly the sends at queue offset >= 200
    want = [event["seq"] for event in sends if int(event["queue_offset"]) >= 200]  # type: ignore[call-overload]
    # The 5.x client may still hand out what a pull fetched from offset 0 before seek() took effect
    # (its pull task races the seek, whichever broker it reads from): those come from below the
    # seek offset and are left aside; from the seek offset on, each message exactly once.
    after_seek = [event for event in received(events, "assign") if int(event["queue_offset"]) >= 200]  # type: ignore[call-overload]
    check_exactly(after_seek, want)  # type: ignore[arg-type]
