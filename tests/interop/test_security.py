"""The Java clients against OrbitMQ with ACL and with TLS on.

- ACL (``aclEnable=true``, plain_acl.yml accounts): the 4.9.x and 5.x remoting clients sign with
  ``AclClientRPCHook`` (rocketmq-acl, and rocketmq-tools' copy in 5.x); the right secret
  produces and consumes, a wrong one is refused with RocketMQ's ACL answer.
- TLS (``tls.server.mode=enforcing``, certificates made by the test): the remoting clients with
  ``useTLS`` (their default ``tls.test.mode.enable=true`` trusts the server's certificate as it
  is), and the gRPC client with its default ``enableSsl(true)`` through the proxy.

One JVM per client line and server: each run produces, consumes, and ends with the refused step.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.conftest import start_interop_standalone
from tests.interop.messages import check_exactly, received
from tests.interop.test_grpc_client import drive_grpc
from tests.interop.test_remoting_client import done, sent
from tests.support.certs import make_pki
from tests.support.interop_java import JavaLine, run_java
from tests.support.processes import ServerProcess, wait_route

ADMIN = ("rocketmq2", "12345678")
USER = ("javauser1", "javasecret1")
ACCOUNTS = f"""accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {USER[0]}
    secretKey: {USER[1]}
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
COUNT = 1000


# Session-scoped: with the module scope, pytest made each again whenever the client line (a
# parametrized session fixture) changed between this module's tests.
@pytest.fixture(scope="session")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("interop-acl")
    accounts = root / "plain_acl.yml"
    accounts.write_text(ACCOUNTS)
    proc = start_interop_standalone(
        root, "acl", aclEnable=True, aclFile=str(accounts), bindAddress="127.0.0.1"
    )
    try:
        wait_route(proc.addr, "TBW102", {"broker-a"})
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="session")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("interop-tls")
    pki = make_pki(root / "pki")
    proc = start_interop_standalone(
        root,
        "tls",
        bindAddress="127.0.0.1",
        **{
            "tls.server.mode": "enforcing",
            "tls.server.certPath": str(pki.server_cert),
            "tls.server.keyPath": str(pki.server_key),
        },
    )
    try:
        yield proc
    finally:
        proc.kill()


def remoting_steps(server: ServerProcess, topic: str, *extra: str) -> list[str]:
    """Produce (in batches of 50, each request signed or encrypted) and consume ``COUNT``
    messages of ``topic`` with ``extra`` options on every step."""
    common = ["--namesrv", server.addr, *extra]
    return [
        *["produce", "--topic", topic, "--mode", "batch", "--count", str(COUNT), "--tags", "cycle", *common],
        "+",
        *["push", "--topic", topic, "--group", f"{topic}-g", "--expect", str(COUNT), *common],
    ]


def test_remoting_acl_client_rpc_hook_signs_and_a_wrong_secret_is_refused(
    remoting: JavaLine, acl_server: ServerProcess, tmp_path: Path
) -> None:
    topic = f"acl-{remoting.profile}"
    signed = ["--access-key", USER[0], "--secret-key", USER[1]]
    wrong = ["--access-key", USER[0], "--secret-key", "not-the-secret"]
    args = [
        *remoting_steps(acl_server, topic, *signed),
        "+",
        *[
            "produce",
            "--topic",
            topic,
            "--start",
            str(COUNT),
            "--count",
            "1",
            "--namesrv",
            acl_server.addr,
            *wrong,
        ],
    ]
    events = run_java(
        remoting, "orbitmq.interop.RemotingDriver", args, tmp_path / "home", timeout_s=150, check=False
    )
    done(events)
    assert len(sent(events)) == COUNT
    check_exactly(received(events), range(COUNT))
    errors = [event for event in events if event.get("event") == "error"]
    assert len(errors) == 1 and errors[0]["step"] == "produce", errors
    # RocketMQ's refusal: SYSTEM_ERROR (1) with the ACL exception (retried by the client, as code 1
    # is, then reported as the cause), as from Apache's broker with ACL 1.0.
    trace = str(errors[0]["trace"])
    assert "CODE: 1 " in trace and "AclException" in trace and "signature" in trace.lower(), trace


def test_remoting_client_speaks_tls_to_an_enforcing_broker(
    remoting: JavaLine, tls_server: ServerProcess, tmp_path: Path
) -> None:
    topic = f"tls-{remoting.profile}"
    events = run_java(
        remoting,
        "orbitmq.interop.RemotingDriver",
        remoting_steps(tls_server, topic, "--tls"),
        tmp_path / "home",
        timeout_s=150,
    )
    done(events)
    assert len(sent(events)) == COUNT
    check_exactly(received(events), range(COUNT))


def test_grpc_client_default_tls_reaches_an_enforcing_proxy(
    grpc_client: JavaLine, tls_server: ServerProcess, tmp_path: Path
) -> None:
    topic = "grpc-tls"
    events = drive_grpc(
        grpc_client,
        tmp_path,
        tls_server,
        ["produce", "--topic", topic, "--count", str(COUNT), "--tls", "--in-flight", "32"],
        ["simple", "--topic", topic, "--group", "grpc-tls-g", "--expect", str(COUNT), "--tls"],
    )
    assert len(sent(events)) == COUNT
    check_exactly(received(events, "simple"), range(COUNT), origin="java-grpc")
