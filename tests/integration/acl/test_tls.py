"""Acceptance 4: TLS on a real standalone, with certificates made in the test (``cryptography``).

``enforcing`` with client certificates required: OrbitMQ's client produces and consumes over
TLS; a plaintext client is disconnected and a TLS client without a certificate refused.
``permissive``: the same port serves a plaintext client and a TLS client. The standalone's
gRPC proxy reaches its enforcing broker over TLS (a 5.x SDK producer goes through it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.client import Message, Producer, PullConsumer
from orbitmq.errors import ConnectionClosedError
from tests.integration.client.test_producer import wait_for_brokers
from tests.support.certs import Pki, make_pki
from tests.support.processes import ServerProcess, start_standalone, write_conf
from tests.support.sdk5 import Sdk5, parse_events, sdk_python

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_standalone(tmp_path: Path, pki: Pki, mode: str, **conf: object) -> ServerProcess:
    values = {
        "bindAddress": "127.0.0.1",
        "tls.server.mode": mode,
        "tls.server.certPath": str(pki.server_cert),
        "tls.server.keyPath": str(pki.server_key),
        **conf,
    }
    config = write_conf(tmp_path / f"{mode}.conf", values)
    return start_standalone(tmp_path, "-c", str(config), name=f"tls-{mode}")


@pytest.fixture
def enforcing(tmp_path: Path, pki: Pki) -> Iterator[ServerProcess]:
    proc = tls_standalone(
        tmp_path,
        pki,
        "enforcing",
        **{"tls.server.need.client.auth": "require", "tls.server.trustCertPath": str(pki.ca)},
    )
    try:
        yield proc
    finally:
        proc.kill()


def client_tls(pki: Pki, certificate: bool = True) -> dict[str, object]:
    options: dict[str, object] = {
        "tls_enable": True,
        "tls_trust_cert_path": str(pki.ca),
        "request_timeout_ms": 3000,
    }
    if certificate:
        options.update(tls_cert_path=str(pki.client_cert), tls_key_path=str(pki.client_key))
    return options


async def round_trip(namesrv: str, topic: str, options: dict[str, object], count: int = 20) -> list[bytes]:
    from orbitmq.client import AdminClient

    async with AdminClient(namesrv, **options) as admin:
        await wait_for_brokers(admin)
        await admin.create_topic(topic, 2)
    bodies = [b"tls message %d" % i for i in range(count)]
    async with Producer("PG_TLS", namesrv, **options) as producer:
        await producer.send_batch([Message(topic, body) for body in bodies])
    got: list[bytes] = []
    consumer = PullConsumer("CG_TLS", namesrv, auto_commit=False, **options)
    await consumer.start()
    try:
        queues = await consumer.fetch_message_queues(topic)
        consumer.assign(queues)
        for mq in queues:
            await consumer.seek_to_begin(mq)
        for _ in range(50):
            got.extend(message.body for message in await consumer.poll(200))
            if len(got) >= count:
                break
    finally:
        await consumer.shutdown()
    return sorted(got)


def test_tls_enforcing_client_produces_and_consumes(enforcing: ServerProcess, pki: Pki) -> None:
    bodies = asyncio.run(round_trip(enforcing.addr, "TlsTopic", client_tls(pki)))
    assert bodies == sorted(b"tls message %d" % i for i in range(20))


@pytest.mark.parametrize("options", ["plaintext", "no client certificate"])
def test_tls_enforcing_refuses_plaintext_and_anonymous_clients(
    enforcing: ServerProcess, pki: Pki, options: str
) -> None:
    client_options = (
        {"request_timeout_ms": 3000} if options == "plaintext" else client_tls(pki, certificate=False)
    )

    async def cluster_info() -> None:
        from orbitmq.client import AdminClient

        async with AdminClient(enforcing.addr, **client_options) as admin:
            await admin.cluster_info()

    # The server hangs up: on the plaintext frame (a bad ClientHello), or after a handshake
    # without the certificate it requires.
    with pytest.raises(ConnectionClosedError):
        asyncio.run(cluster_info())


def test_tls_permissive_serves_plaintext_and_tls_on_one_port(tmp_path: Path, pki: Pki) -> None:
    proc = tls_standalone(tmp_path, pki, "permissive")
    try:
        assert asyncio.run(round_trip(proc.addr, "PlainTopic", {}, count=5)) == sorted(
            b"tls message %d" % i for i in range(5)
        )
        tls_options = client_tls(pki, certificate=False)
        assert len(asyncio.run(round_trip(proc.addr, "SecureTopic", tls_options, count=5))) == 5
    finally:
        proc.kill()


def _create_topic(namesrv: str, topic: str, options: dict[str, object]) -> None:
    from orbitmq.client import AdminClient

    async def create() -> None:
        async with AdminClient(namesrv, **options) as admin:
            await wait_for_brokers(admin)
            await admin.create_topic(topic, 2)

    asyncio.run(create())


def _sdk_sent(sdk: Sdk5, topic: str) -> int:
    """Messages a 5.x SDK producer got acknowledged (2 asked for; 0 when it cannot connect)."""
    done = sdk.run_any("produce", "--topic", topic, "--count", "2", "--request-timeout", "3", timeout_s=90)
    return sum(1 for event in parse_events(done.stdout.decode()) if event["event"] == "sent")


def test_tls_enforcing_grpc_port_serves_5x_clients_over_tls_only(tmp_path: Path, pki: Pki) -> None:
    """The gRPC port speaks TLS in enforcing mode; its proxy reaches the broker over TLS too."""
    proc = tls_standalone(tmp_path, pki, "enforcing")
    try:
        _create_topic(proc.addr, "TlsGrpcTopic", client_tls(pki, certificate=False))
        endpoint = f"127.0.0.1:{proc.extra_ports[1]}"
        assert (
            _sdk_sent(Sdk5(sdk_python(), endpoint, tmp_path / "sdk5-tls", tls_ca=pki.ca), "TlsGrpcTopic") == 2
        )
        assert _sdk_sent(Sdk5(sdk_python(), endpoint, tmp_path / "sdk5-plain"), "TlsGrpcTopic") == 0
        assert "gRPC proxy listening on 127.0.0.1" in proc.log_path.read_text()
        assert "(TLS; name servers" in proc.log_path.read_text()
    finally:
        proc.kill()


def test_tls_enforcing_grpc_port_refuses_a_5x_client_without_the_required_certificate(
    enforcing: ServerProcess, pki: Pki, tmp_path: Path
) -> None:
    """``tls.server.need.client.auth=require`` holds on the gRPC port: an SDK has no certificate."""
    _create_topic(enforcing.addr, "TlsGrpcCertTopic", client_tls(pki))
    sdk = Sdk5(sdk_python(), f"127.0.0.1:{enforcing.extra_ports[1]}", tmp_path / "sdk5", tls_ca=pki.ca)
    assert _sdk_sent(sdk, "TlsGrpcCertTopic") == 0
