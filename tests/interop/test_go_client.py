"""Apache's Go client (rocketmq-client-go/v2) against OrbitMQ: sync, async and batch sends,
a clustered push consumer with a tag selector, and the transactional producer.

Every received message is compared byte for byte with the one sent (tests/interop/messages.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.messages import check_exactly, received
from tests.interop.test_remoting_client import done, sent
from tests.support.interop_go import go_available, run_go
from tests.support.interop_java import Event
from tests.support.processes import ServerProcess

PER_MODE = 1000


@pytest.fixture(autouse=True)
def _needs_go() -> None:
    if go_available():
        pytest.skip("the Go client tests need go on PATH")


def drive_go(tmp_path: Path, server: ServerProcess, *steps: list[str], timeout_s: float = 150) -> list[Event]:
    args: list[str] = []
    for step in steps:
        if args:
            args.append("+")
        args += [*step, "--namesrv", server.addr]
    return run_go(args, tmp_path / "home", timeout_s=timeout_s)


def test_go_producer_modes_reach_a_tag_filtered_push_consumer(server: ServerProcess, tmp_path: Path) -> None:
    topic = "go-modes"
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
        for i, mode in enumerate(("sync", "async", "batch"))
    ]
    wanted = [seq for seq in range(3 * PER_MODE) if seq % 3 != 1]  # TagA || TagC
    events = drive_go(
        tmp_path,
        server,
        *steps,
        [
            "push",
            "--topic",
            topic,
            "--group",
            "go-modes-g",
            "--tag-expr",
            "TagA || TagC",
            "--expect",
            str(len(wanted)),
            "--settle-ms",
            "1000",
        ],
    )
    sends = sent(events)
    assert len(sends) == 3 * PER_MODE and {event["status"] for event in sends} == {0}  # primitive.SendOK
    done(events)
    check_exactly(received(events), wanted, origin="go")


def test_go_transactions_commit_roll_back_and_check_back_orphans(
    server: ServerProcess, tmp_path: Path
) -> None:
    topic = "go-tx"
    count = 1000
    events = drive_go(
        tmp_path,
        server,
        ["transaction", "--topic", topic, "--group", "go-tx-pg", "--count", str(count), "--tags", "cycle"],
        [
            "push",
            "--topic",
            topic,
            "--group",
            "go-tx-g",
            "--expect",
            str(2 * count // 3),
            "--settle-ms",
            "2000",
        ],
    )
    states = {event["seq"]: event["local_state"] for event in sent(events)}
    assert states == {seq: ["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"][seq % 3] for seq in range(count)}
    checked = {event["seq"] for event in events if event.get("event") == "checked"}
    assert checked == {seq for seq in range(count) if seq % 3 == 2}
    done(events)
    check_exactly(received(events), [seq for seq in range(count) if seq % 3 != 1], origin="go")
