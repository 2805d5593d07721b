"""``orbitmq admin acl ...`` against a standalone with ACL: accounts managed online (codes 50-54).

The admin's own key comes from ORBITMQ_ACCESS_KEY / ORBITMQ_SECRET_KEY; the new account's
secret is read from standard input (``-s -``). No output ever contains a secret.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.cli.admin import main
from orbitmq.client import AdminClient, Message, Producer
from orbitmq.errors import BrokerResponseError
from tests.integration.acl.conftest import accounts_path, start_acl_standalone
from tests.integration.client.test_producer import wait_for_brokers
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.integration

ACCOUNTS = """accounts:
  - accessKey: cliadmin1
    secretKey: cliadminsecret
    admin: true
"""
NEW_SECRET = "fresh-account-secret"


@pytest.fixture
def acl_standalone(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_acl_standalone(tmp_path, ACCOUNTS)
    try:

        async def ready() -> None:
            async with AdminClient(proc.addr) as admin:
                await wait_for_brokers(admin)

        asyncio.run(ready())
        yield proc
    finally:
        proc.kill()


def send_as(namesrv: str, access_key: str, secret_key: str) -> None:
    async def send() -> None:
        async with Producer("PG_CLI_ACL", namesrv, access_key=access_key, secret_key=secret_key) as producer:
            await producer.send(Message("CliAclTopic", b"hello"))

    asyncio.run(send())


def test_acl_admin_cli_manages_accounts_online(
    acl_standalone: ServerProcess, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    namesrv = ["-n", acl_standalone.addr]
    # Without credentials the broker refuses, and says why.
    assert main([*namesrv, "acl", "list"]) == 1
    assert "AclException: No accessKey is configured" in capsys.readouterr().err
    monkeypatch.setenv("ORBITMQ_ACCESS_KEY", "cliadmin1")
    monkeypatch.setenv("ORBITMQ_SECRET_KEY", "cliadminsecret")
    monkeypatch.setattr("sys.stdin", io.StringIO(NEW_SECRET + "\n"))
    assert main([*namesrv, "acl", "update", "producer1", "-s", "-", "--default-topic-perm", "DENY",
                 "--topic-perms", "CliAclTopic=PUB"]) == 0  # fmt: skip
    assert main([*namesrv, "topic", "create", "CliAclTopic", "-q", "2"]) == 0
    send_as(acl_standalone.addr, "producer1", NEW_SECRET)
    assert "producer1" in accounts_path(acl_standalone).read_text()
    assert main([*namesrv, "acl", "list"]) == 0
    assert main([*namesrv, "acl", "version"]) == 0
    assert main([*namesrv, "acl", "white-list", "10.1.2.*"]) == 0
    out = capsys.readouterr().out
    assert "producer1: admin=false" in out and "topicPerms=['CliAclTopic=PUB']" in out
    assert '"counter":1' in out and "global white list ['10.1.2.*']" in out
    assert main([*namesrv, "acl", "update", "producer1", "-s", "short"]) == 1
    assert "longer than 6" in capsys.readouterr().err
    assert main([*namesrv, "acl", "delete", "producer1"]) == 0
    with pytest.raises(BrokerResponseError, match="No acl config for producer1"):
        send_as(acl_standalone.addr, "producer1", NEW_SECRET)
    everything = capsys.readouterr()
    assert NEW_SECRET not in everything.out + everything.err
    assert "cliadminsecret" not in everything.out + everything.err
