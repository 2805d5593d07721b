"""A Spring Boot application on rocketmq-spring-boot-starter against OrbitMQ.

tests/interop/java/src/spring/.../SpringDriver.java is what a user writes: ``RocketMQTemplate``
``syncSend`` and ``sendMessageInTransaction`` with a ``@RocketMQTransactionListener``, and a
``@RocketMQMessageListener``. The test starts it with the name server in its properties
(``--rocketmq.name-server``), as an application's ``application.properties`` would give it, and
compares every message the listener gets with the one sent, byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.conftest import _line
from tests.interop.messages import check_exactly, received
from tests.interop.test_remoting_client import done, sent
from tests.support.interop_java import JavaLine, run_java
from tests.support.processes import ServerProcess, create_topic

# 1,000 by syncSend, 1,000 in transactions of which TX_ORPHANS are left to the broker's check-back.
COUNT, TX_COUNT, TX_START, TX_ORPHANS = 1000, 1000, 1000, 10


@pytest.fixture(scope="session")
def spring() -> JavaLine:
    return _line("spring")


def test_spring_boot_template_transactions_and_listener_round_trip(
    spring: JavaLine, server: ServerProcess, tmp_path: Path
) -> None:
    topic = "spring-boot"
    create_topic(f"127.0.0.1:{server.extra_ports[0]}", topic, 4)
    events = run_java(
        spring,
        "orbitmq.interop.SpringDriver",
        [
            f"--rocketmq.name-server={server.addr}",
            "--rocketmq.producer.group=spring-producer",
            "--spring.main.banner-mode=off",
            "--logging.level.root=WARN",
            f"--orbit.topic={topic}",
            "--orbit.group=spring-listener",
            f"--orbit.count={COUNT}",
            f"--orbit.tx-count={TX_COUNT}",
            f"--orbit.tx-orphans={TX_ORPHANS}",
        ],
        tmp_path / "home",
        timeout_s=240,
    )
    done(events)
    sends = sent(events)
    assert len(sends) == COUNT + TX_COUNT and {event["status"] for event in sends} == {"SEND_OK"}
    checked = {event["seq"] for event in events if event.get("event") == "checked"}
    orphans = {
        seq
        for seq in range(TX_START, TX_START + TX_COUNT)
        if seq % 3 == 2 and (seq - TX_START) // 3 < TX_ORPHANS
    }
    assert orphans <= checked, f"not checked back: {sorted(orphans - checked)}"
    assert checked <= orphans, f"checked back though committed: {sorted(checked - orphans)}"
    want = [*range(COUNT), *(seq for seq in range(TX_START, TX_START + TX_COUNT) if seq % 3 != 1)]
    check_exactly(received(events, "listener"), want, origin="java-spring")
