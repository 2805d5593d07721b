"""ACL on the gRPC port: the official RocketMQ 5.x Python SDK, with and without credentials.

One standalone with ``aclEnable=true`` serves remoting and gRPC from the same accounts file.
Its gRPC proxy checks each call's ``authorization`` header and the account's permissions, then
calls the broker with the process's own key. The SDK runs unmodified in its own venv; a refused
producer fails at its first send (the SDK raises on the answer's status) and emits no ``sent``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.acl.conftest import create_topic_signed, start_acl_standalone
from tests.support.processes import ServerProcess
from tests.support.sdk5 import Event, Sdk5, sdk_python

pytestmark = pytest.mark.integration

TOPIC, GROUP = "GrpcAclTopic", "GrpcAclGroup"
UNAUTHORIZED, FORBIDDEN = 40100, 40300
ACCOUNTS = f"""accounts:
  - accessKey: adminuser
    secretKey: adminsecret
    admin: true
  - accessKey: producer1
    secretKey: producersecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [{TOPIC}=PUB]
  - accessKey: consumer1
    secretKey: consumersecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [{TOPIC}=SUB]
    groupPerms: [{GROUP}=SUB]
"""


@pytest.fixture(scope="module")
def acl_grpc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("grpc-acl")
    proc = start_acl_standalone(
        tmp, ACCOUNTS, conf={"grpcBindAddress": "127.0.0.1", "minInvisibleTimeMillsForRecv": 1000}
    )
    try:
        create_topic_signed(proc.addr, TOPIC, "adminuser", "adminsecret", queues=2)
        yield proc
    finally:
        proc.kill()


def sdk(proc: ServerProcess, home: Path, credentials: tuple[str, str] | None) -> Sdk5:
    return Sdk5(sdk_python(), f"127.0.0.1:{proc.extra_ports[1]}", home, credentials)


def of_kind(events: list[Event], kind: str) -> list[Event]:
    return [event for event in events if event["event"] == kind]


def refused_send(client: Sdk5, code: int, reason: str) -> None:
    """A produce that must fail; the SDK logs the answer's status code and message."""
    done = client.run_any("produce", "--topic", TOPIC, "--count", "1", timeout_s=60)
    assert done.returncode != 0
    assert '"event": "sent"' not in done.stdout.decode()
    log = (client.home / "logs" / "rocketmq_python" / "rocketmq_client.log").read_text(errors="replace")
    assert f"{code}, {reason}" in log, log[-2000:]


def test_grpc_acl_sdk5_with_credentials_produces_and_consumes(
    acl_grpc: ServerProcess, tmp_path: Path
) -> None:
    producer = sdk(acl_grpc, tmp_path / "producer", ("producer1", "producersecret"))
    sent = of_kind(producer.run("produce", "--topic", TOPIC, "--count", "3"), "sent")
    assert len(sent) == 3
    consumer = sdk(acl_grpc, tmp_path / "consumer", ("consumer1", "consumersecret"))
    events = consumer.run("simple", "--topic", TOPIC, "--group", GROUP, "--count", "3", "--max-wait-s", "30")
    assert sorted(str(e["message_id"]) for e in of_kind(events, "received")) == sorted(
        str(e["message_id"]) for e in sent
    )
    assert len(of_kind(events, "acked")) == 3


def test_grpc_acl_sdk5_refusals(acl_grpc: ServerProcess, tmp_path: Path) -> None:
    # Not proven who it is: UNAUTHORIZED. Proven, but without PUB on the topic: FORBIDDEN.
    refused_send(sdk(acl_grpc, tmp_path / "anonymous", None), UNAUTHORIZED, "No accessKey is configured")
    refused_send(
        sdk(acl_grpc, tmp_path / "stranger", ("stranger1", "whatever1")),
        UNAUTHORIZED,
        "No acl config for stranger1",
    )
    refused_send(
        sdk(acl_grpc, tmp_path / "wrong", ("producer1", "not-the-secret")),
        UNAUTHORIZED,
        "Check signature failed for accessKey=producer1",
    )
    refused_send(
        sdk(acl_grpc, tmp_path / "consumer", ("consumer1", "consumersecret")),
        FORBIDDEN,
        f"No permission for topic:{TOPIC}",
    )
    # Logged once per address and reason a minute (the settings on the Telemetry stream come first).
    assert f"from 127.0.0.1: No permission for topic:{TOPIC}" in acl_grpc.log_path.read_text()
