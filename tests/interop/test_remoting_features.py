"""Apache's remoting Java client against OrbitMQ: delays, retries to the DLQ, transactions,
request-reply, and (5.x) delivery at a given time.

The module's standalone has one-second delay levels and a one-second transaction check-back
(tests/interop/conftest.py), so every wait here is seconds. Each mode moves 1,000 messages,
compared byte for byte (tests/interop/messages.py).
"""

from __future__ import annotations

from pathlib import Path

from tests.interop.messages import check_at_least_once, check_exactly, received
from tests.interop.test_remoting_client import done, drive, sent
from tests.support.interop_java import JavaLine
from tests.support.processes import ServerProcess, create_topic, wait_route

DLQ_SAMPLE = 200
"""Dead letters read back by key: each is a query of its own, so not all 1,000."""


def test_remoting_delay_levels_hold_messages_back(
    remoting: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    """Level 1 is one second on this broker: no message arrives sooner, every one arrives."""
    topic = f"delay-{remoting.profile}"
    count = 1000
    events = drive(
        remoting,
        tmp_path,
        server,
        [
            "produce",
            "--topic",
            topic,
            "--mode",
            "delay",
            "--delay-level",
            "1",
            "--count",
            str(count),
            "--tags",
            "cycle",
        ],
        ["push", "--topic", topic, "--group", f"{topic}-g", "--expect", str(count)],
    )
    done(events)
    by_seq = check_exactly(received(events), range(count))
    for seq, event in by_seq.items():
        # born_ms: the client's clock before the send, so before the broker stored it
        assert int(event["now_ms"]) - int(event["born_ms"]) >= 1000, f"seq {seq} delivered before its delay"  # type: ignore[call-overload]
        assert event["topic"] == topic


def test_remoting5_deliver_time_ms_delivers_at_the_time(
    remoting5: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    """5.x's Message.setDeliverTimeMs (TIMER_DELIVER_MS): held until that time, then delivered."""
    topic = "deliver-remoting5"
    count = 1000
    events = drive(
        remoting5,
        tmp_path,
        server,
        [
            "produce",
            "--topic",
            topic,
            "--mode",
            "deliver",
            "--deliver-after-ms",
            "2000",
            "--count",
            str(count),
            "--tags",
            "cycle",
        ],
        ["push", "--topic", topic, "--group", f"{topic}-g", "--expect", str(count)],
    )
    done(events)
    by_seq = check_exactly(received(events), range(count))
    sent_at = {event["seq"]: int(event["now_ms"]) for event in sent(events)}  # type: ignore[call-overload]
    for seq, event in by_seq.items():
        assert int(event["now_ms"]) - sent_at[seq] >= 1500, f"seq {seq} delivered before its time"  # type: ignore[call-overload]


def test_remoting_reconsume_later_retries_then_dead_letters(
    remoting: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    """RECONSUME_LATER: each message comes back once from %RETRY%, then lands in %DLQ% intact."""
    topic, group = f"retry-{remoting.profile}", f"retry-{remoting.profile}-g"
    count = 1000
    events = drive(
        remoting,
        tmp_path,
        server,
        ["produce", "--topic", topic, "--mode", "sync", "--count", str(count), "--tags", "cycle"],
        [
            "push",
            "--topic",
            topic,
            "--group",
            group,
            "--reconsume-later",
            "--max-reconsume-times",
            "1",
            "--expect",
            str(2 * count),
            "--settle-ms",
            "1500",
        ],
        # The dead letters, by key (one query each, as mqadmin queryMsgByKey): a sample.
        ["querykey", "--topic", f"%DLQ%{group}", "--count", str(DLQ_SAMPLE)],
    )
    done(events)
    deliveries = received(events, "consumer-0")
    check_at_least_once(deliveries, range(count))
    for seq in range(count):
        times = sorted(int(e["reconsume_times"]) for e in deliveries if e["props"]["seq"] == str(seq))  # type: ignore[index, call-overload]
        assert times[:2] == [0, 1], f"seq {seq} deliveries: {times}"
    dead = received(events, "query")
    check_exactly(dead, range(DLQ_SAMPLE))
    for event in dead:
        assert event["topic"] == f"%DLQ%{group}"
        assert event["props"]["RETRY_TOPIC"] == topic  # type: ignore[index]


def test_remoting_transactions_commit_roll_back_and_check_back_orphans(
    remoting: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    """seq % 3: 0 commits, 1 rolls back, 2 commits too; the first ``orphans`` of the last are left
    UNKNOW and committed when the broker checks back."""
    topic = f"tx-{remoting.profile}"
    count, orphans = 1000, 10
    events = drive(
        remoting,
        tmp_path,
        server,
        [
            "transaction",
            "--topic",
            topic,
            "--group",
            f"{topic}-pg",
            "--count",
            str(count),
            "--orphans",
            str(orphans),
            "--tags",
            "cycle",
        ],
        [
            "push",
            "--topic",
            topic,
            "--group",
            f"{topic}-g",
            "--expect",
            str(len([seq for seq in range(count) if seq % 3 != 1])),
            "--settle-ms",
            "2000",
        ],
    )
    orphaned = {seq for seq in range(count) if seq % 3 == 2 and seq // 3 < orphans}
    states = {event["seq"]: event["local_state"] for event in sent(events)}
    assert states == {
        seq: "UNKNOW"
        if seq in orphaned
        else ["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "COMMIT_MESSAGE"][seq % 3]
        for seq in range(count)
    }
    checked = {event["seq"] for event in events if event.get("event") == "checked"}
    assert checked == orphaned, "an orphan was not checked back, or a committed one was"
    done(events)
    check_exactly(received(events), [seq for seq in range(count) if seq % 3 != 1])


def test_remoting_request_reply_round_trips(
    remoting: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    """request() waits for the reply a replier sends with MessageUtil.createReplyMessage.

    The topic exists before the replier starts, as a service's request topic does: a consumer
    of a topic nobody has created yet only finds it at its next rebalance (20 s on 4.9.x),
    after the first request has timed out, against Apache's broker as against OrbitMQ.
    """
    topic = f"request-{remoting.profile}"
    count = 1000
    create_topic(f"127.0.0.1:{server.extra_ports[0]}", topic)
    wait_route(server.addr, topic, {"broker-a"})
    events = drive(
        remoting,
        tmp_path,
        server,
        ["request", "--topic", topic, "--group", f"{topic}-g", "--count", str(count), "--tags", "cycle"],
    )
    replies = [event for event in events if event.get("event") == "reply"]
    assert [(event["seq"], event["body"], event["reply_seq"]) for event in replies] == [
        (seq, f"reply:{seq}", str(seq)) for seq in range(count)
    ]
