"""ali-ons 3.12.0, the pure-JavaScript RocketMQ client, against a live standalone, unchanged.

Method: the pinned client (``tests/support/ali_ons``) produces with tags and keys and
push-consumes from the first offset, as any ali-ons application does; OrbitMQ's admin client
then checks what the broker stored. Under ACL the client signs with ``accessKeyId`` /
``accessKeySecret`` (operations-features §2.9: its own field map, with ``OnsChannel``), and
the broker must accept the right secret and refuse a wrong one and a topic the account may not
publish to, storing nothing for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.client import AdminClient
from tests.integration.acl.conftest import create_topic_signed, start_acl_standalone
from tests.support.ali_ons import missing_tools, run_driver
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.integration

TOPIC = "AliOnsTopic"
DENIED_TOPIC = "AliOnsDenied"
GROUP = "CG_ALI_ONS"
ADMIN = ("aliadmin", "ali-admin-secret")
USER = ("aliuser", "ali-user-secret")
ACCOUNTS = f"""accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {USER[0]}
    secretKey: {USER[1]}
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [{TOPIC}=PUB|SUB, {DENIED_TOPIC}=SUB]
    groupPerms: [{GROUP}=SUB]
"""


@pytest.fixture(autouse=True)
def _node() -> None:
    reason = missing_tools()
    if reason is not None:
        pytest.skip(f"ali-ons needs Node.js: {reason}")


@pytest.fixture
def acl_standalone(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_acl_standalone(tmp_path, ACCOUNTS, name="ali-ons-acl")
    try:
        for topic in (TOPIC, DENIED_TOPIC):
            create_topic_signed(proc.addr, topic, *ADMIN)
        yield proc
    finally:
        proc.kill()


def stored_count(namesrv: str, topic: str, credentials: tuple[str, str] | None = None) -> int:
    """Messages ``topic`` holds on its brokers (the sum of its queues' max offsets)."""

    async def count() -> int:
        keys = {"access_key": credentials[0], "secret_key": credentials[1]} if credentials else {}
        async with AdminClient(namesrv, **keys) as admin:
            return sum(offset.max_offset for offset in (await admin.topic_stats(topic)).values())

    return asyncio.run(count())


def keyed_bodies(namesrv: str, topic: str, key: str) -> list[bytes]:
    async def query() -> list[bytes]:
        async with AdminClient(namesrv) as admin:
            return [message.body for message in await admin.query_messages(topic, key)]

    return asyncio.run(query())


def test_ali_ons_produces_and_push_consumes_every_message(standalone: ServerProcess) -> None:
    create_topic_signed(standalone.addr, TOPIC, "", "")
    sent = run_driver("produce", standalone.addr, TOPIC, "20")
    assert [(event["event"], event["status"]) for event in sent] == [("sent", "SEND_OK")] * 20, sent
    assert stored_count(standalone.addr, TOPIC) == 20
    assert keyed_bodies(standalone.addr, TOPIC, "ali-key-7") == [b"ali-7"]

    events = run_driver("consume", standalone.addr, TOPIC, GROUP, "20", "60000")
    received = [event for event in events if event["event"] == "received"]
    assert not [event for event in events if event["event"] == "timeout"], events
    assert {event["body"] for event in received} == {f"ali-{seq}" for seq in range(20)}
    for event in received:
        assert event["tags"] == "TagA"
        assert event["keys"] == f"ali-key-{str(event['body']).removeprefix('ali-')}"


def test_ali_ons_signs_requests_the_acl_broker_accepts_and_refuses(acl_standalone: ServerProcess) -> None:
    addr = acl_standalone.addr
    sent = run_driver("produce", addr, TOPIC, "10", *USER)
    assert [(event["event"], event["status"]) for event in sent] == [("sent", "SEND_OK")] * 10, sent
    events = run_driver("consume", addr, TOPIC, GROUP, "10", "60000", *USER)
    assert {event["body"] for event in events if event["event"] == "received"} == {
        f"ali-{seq}" for seq in range(10)
    }

    wrong = run_driver("produce", addr, TOPIC, "2", USER[0], "not-the-secret")
    # Its UNREGISTER_CLIENT is refused too ("close_failed"): only the sends are counted.
    assert [event["event"] for event in wrong if event["event"] != "close_failed"] == ["send_failed"] * 2
    denied = run_driver("produce", addr, DENIED_TOPIC, "1", *USER)
    assert [event["event"] for event in denied] == ["send_failed"], denied
    assert stored_count(addr, TOPIC, ADMIN) == 10
    assert stored_count(addr, DENIED_TOPIC, ADMIN) == 0
    log = acl_standalone.log_path.read_text()
    assert f"Check signature failed for accessKey={USER[0]}" in log
    assert f"No permission for topic:{DENIED_TOPIC}" in log
