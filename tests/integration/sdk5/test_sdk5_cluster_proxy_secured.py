"""Cluster mode, secured: ``orbitmq proxy`` with ACL and a TLS-only gRPC port, before a broker
that checks ACL too.

Method: a name server, one broker with ``aclEnable=true``, and the proxy in its own process
with ``aclEnable``, the same accounts file, ``innerClientAuthenticationCredentials`` (the
account it calls the broker with) and ``tls.server.mode=enforcing`` with a certificate made in
the test. The 5.x Python SDK over TLS with an application's key produces and receives; the same
SDK with a wrong secret gets nothing through, and one without TLS cannot talk to the port.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.integration.acl.conftest import create_topic_signed
from tests.support.certs import Pki, make_pki
from tests.support.processes import ServerProcess, free_port, start_broker, start_namesrv, write_conf
from tests.support.sdk5 import Event, Sdk5, parse_events

pytestmark = pytest.mark.integration

TOPIC = "Sdk5Secured"
GROUP = "CG_SDK5_SECURED"
ADMIN = ("proxyadmin", "proxy-admin-secret")
APP = ("sdk5app", "sdk5-app-secret")
ACCOUNTS = f"""accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {APP[0]}
    secretKey: {APP[1]}
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [{TOPIC}=PUB|SUB]
    groupPerms: [{GROUP}=SUB]
"""


def of_kind(events: list[Event], kind: str) -> list[Event]:
    return [event for event in events if event["event"] == kind]


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess, Pki]]:
    """(broker, proxy, pki), with the name server behind them."""
    pki = make_pki(tmp_path / "pki")
    accounts = tmp_path / "plain_acl.yml"
    accounts.write_text(ACCOUNTS)
    started: list[ServerProcess] = []
    try:
        namesrv = start_namesrv(tmp_path)
        started.append(namesrv)
        broker = start_broker(tmp_path, namesrv.addr, aclEnable=True, aclFile=str(accounts))
        started.append(broker)
        create_topic_signed(namesrv.addr, TOPIC, *ADMIN, queues=2)
        port = free_port()
        conf = write_conf(
            tmp_path / "proxy.conf",
            {
                "aclEnable": True,
                "aclFile": str(accounts),
                "innerClientAuthenticationCredentials": orjson.dumps(
                    {"accessKey": ADMIN[0], "secretKey": ADMIN[1]}
                ).decode(),
                "tls.server.mode": "enforcing",
                "tls.server.certPath": str(pki.server_cert),
                "tls.server.keyPath": str(pki.server_key),
                "grpcClientConsumerMinLongPollingTimeoutMillis": 1000,
            },
        )
        args = [sys.executable, "-m", "orbitmq.cli", "proxy", "-c", str(conf), "-n", namesrv.addr,
                "--grpc-port", str(port), "--bind-address", "127.0.0.1"]  # fmt: skip
        proxy = ServerProcess("proxy", args, port, tmp_path / "proxy", tmp_path / "proxy.log").start()
        started.append(proxy)
        yield broker, proxy, pki
    finally:
        for process in reversed(started):
            process.kill()


def test_sdk5_through_a_secured_cluster_proxy_needs_tls_and_a_valid_signature(
    secured: tuple[ServerProcess, ServerProcess, Pki], sdk5_python: Path, tmp_path: Path
) -> None:
    _broker, proxy, pki = secured
    app = Sdk5(sdk5_python, proxy.addr, tmp_path / "sdk5-app", credentials=APP, tls_ca=pki.ca)
    forger = Sdk5(
        sdk5_python, proxy.addr, tmp_path / "sdk5-forger", credentials=(APP[0], "wrong"), tls_ca=pki.ca
    )
    plaintext = Sdk5(sdk5_python, proxy.addr, tmp_path / "sdk5-plain", credentials=APP)
    try:
        assert len(of_kind(app.run("produce", "--topic", TOPIC, "--count", "4"), "sent")) == 4
        events = app.run("simple", "--topic", TOPIC, "--group", GROUP, "--count", "4",
                         "--await-s", "1", "--max-wait-s", "30")  # fmt: skip
        assert sorted(int(str(event["seq"])) for event in of_kind(events, "received")) == [0, 1, 2, 3]
        for refused in (forger, plaintext):
            done = refused.run_any("produce", "--topic", TOPIC, "--count", "1", "--request-timeout", "3")
            assert not of_kind(parse_events(done.stdout.decode()), "sent"), done.stdout
    finally:
        for sdk in (app, forger, plaintext):
            sdk.kill_all()
    log = proxy.log_path.read_text()
    assert "(TLS; name servers" in log
    assert f"Check signature failed for accessKey={APP[0]}" in log
