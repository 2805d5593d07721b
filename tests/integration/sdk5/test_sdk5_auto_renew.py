"""Auto-renew: a push consumer's slow listener keeps its message, however long it takes.

Method: a standalone whose auto-renewed receives start with 2 s of invisibility and whose
proxy renews handles 1.5 s ahead of their deadline, checking every 0.5 s. The listener spends
4 s on the only message. Without renewal the message would be delivered again (attempt 2)
after 2 s; with it, it is delivered exactly once and acked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.sdk5.conftest import FAST_CONF, broker_addr, grpc_endpoint
from tests.support.processes import ServerProcess, create_topic, start_standalone, write_conf
from tests.support.sdk5 import Sdk5

RENEW_CONF = {
    **FAST_CONF,
    "defaultInvisibleTimeMills": 2000,
    "renewAheadTimeMillis": 1500,
    "renewSchedulePeriodMillis": 500,
}


@pytest.fixture
def renewing_standalone(tmp_path: Path) -> Iterator[ServerProcess]:
    conf = write_conf(tmp_path / "broker.conf", RENEW_CONF)
    proc = start_standalone(tmp_path, "-c", str(conf))
    try:
        yield proc
    finally:
        proc.kill()


def test_sdk5_push_consumer_slow_listener_is_renewed_not_redelivered(
    renewing_standalone: ServerProcess, sdk5_python: Path, tmp_path: Path
) -> None:
    topic, group = "Sdk5Renew", "CG_SDK5_RENEW"
    create_topic(broker_addr(renewing_standalone), topic, 1)
    sdk5 = Sdk5(sdk5_python, grpc_endpoint(renewing_standalone), tmp_path / "sdk5-home")
    try:
        sdk5.run("produce", "--topic", topic, "--count", "1")
        consumer = sdk5.start("push", "--topic", topic, "--group", group, "--sleep-s", "4",
                              "--stop-after", "1", "--linger-s", "1.5", "--max-wait-s", "30")  # fmt: skip
        events = consumer.wait_for(lambda ev: any(e["event"] == "done" for e in ev), 40)
    finally:
        sdk5.kill_all()
    received = [e for e in events if e["event"] == "received"]
    assert [(e["seq"], e["attempt"]) for e in received] == [(0, 1)]
