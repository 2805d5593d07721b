"""AclService over real files in tmp_path: load, reload, the guard, the admin edits, the warning.

The watcher's loop only calls :meth:`AclService.reload_if_changed` every second; the tests
call it directly, so they wait for nothing but the service's own settle pause.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from orbitmq.acl.accounts import AccountUpdate
from orbitmq.acl.signature import Credentials
from orbitmq.errors import ConfigError
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.security import ACL_EXCEPTION, AclService, acl_file_set, exposure_warning, warn_if_exposed

ALICE = Credentials("alice123", "alicesecret")
ADMIN = Credentials("adminuser", "adminsecret")
ACCOUNTS = """accounts:
  - accessKey: adminuser
    secretKey: adminsecret
    admin: true
  - accessKey: alice123
    secretKey: alicesecret
    defaultTopicPerm: PUB
"""


def send(credentials: Credentials | None, topic: str = "T1") -> RemotingCommand:
    request = RemotingCommand.request(310, {"a": "PG", "b": topic}, b"body")
    if credentials is not None:
        credentials.sign(request)
    return request


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    # A new mtime even when the test writes twice within the file system's timestamp tick.
    os.utime(path, ns=(path.stat().st_mtime_ns + 1_000_000, path.stat().st_mtime_ns + 1_000_000))


@pytest.fixture
def acl_file(tmp_path: Path) -> Path:
    path = tmp_path / "conf" / "plain_acl.yml"
    write(path, ACCOUNTS)
    return path


def test_acl_service_creates_a_private_empty_file_and_refuses_everything(tmp_path: Path) -> None:
    service = AclService(tmp_path / "conf" / "plain_acl.yml", "broker")
    service.load()
    assert stat.S_IMODE(service.acl_file.stat().st_mode) == 0o600
    assert service.check(send(ALICE), "127.0.0.1") == "No acl config for alice123"


def test_acl_service_bad_file_at_start_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    write(path, "accounts:\n  - accessKey: x\n")
    with pytest.raises(ConfigError, match="longer than 6"):
        AclService(path, "broker").load()


async def test_acl_service_reloads_edits_new_files_and_keeps_accounts_of_a_broken_file(
    acl_file: Path,
) -> None:
    service = AclService(acl_file, "broker")
    service.load()
    assert service.check(send(ALICE), "10.0.0.1") is None
    assert not await service.reload_if_changed()
    write(acl_file, ACCOUNTS.replace("defaultTopicPerm: PUB", "defaultTopicPerm: DENY"))
    assert await service.reload_if_changed()
    assert service.check(send(ALICE), "10.0.0.1") == "No default permission for topic:T1"
    extra = acl_file.parent / "acl" / "team" / "more.yaml"
    write(extra, "accounts:\n  - {accessKey: bob12345, secretKey: bobsecret, defaultTopicPerm: PUB}\n")
    assert await service.reload_if_changed()
    assert acl_file_set(acl_file) == [acl_file, extra]
    assert service.check(send(Credentials("bob12345", "bobsecret")), "10.0.0.1") is None
    write(extra, "accounts: [\n")
    assert await service.reload_if_changed()
    assert service.check(send(Credentials("bob12345", "bobsecret")), "10.0.0.1") is None
    extra.unlink()
    assert await service.reload_if_changed()
    assert (
        service.check(send(Credentials("bob12345", "bobsecret")), "10.0.0.1") == "No acl config for bob12345"
    )


async def test_acl_service_guard_answers_rocketmq_refusal_and_logs_once(
    acl_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = AclService(acl_file, "broker")
    service.load()
    served: list[int] = []

    async def handler(ctx: Any, request: RemotingCommand) -> RemotingCommand:
        served.append(request.code)
        return request.response(ResponseCode.SUCCESS)

    guarded = service.guard({310: handler})[310]
    ctx = SimpleNamespace(peer_host="10.0.0.9")
    with caplog.at_level(logging.WARNING, logger="orbitmq.security.acl_service"):
        for _ in range(5):
            refused = await guarded(ctx, send(None))  # type: ignore[arg-type]
            assert refused is not None and refused.code == ResponseCode.SYSTEM_ERROR
            assert refused.remark == f"{ACL_EXCEPTION}: No accessKey is configured"
    allowed = await guarded(ctx, send(ALICE))  # type: ignore[arg-type]
    assert allowed is not None and allowed.code == ResponseCode.SUCCESS and served == [310]
    refusals = [record for record in caplog.records if "refused request" in record.getMessage()]
    assert len(refusals) == 1 and "10.0.0.9" in refusals[0].getMessage()


async def test_acl_service_admin_edits_rewrite_the_owning_file(acl_file: Path) -> None:
    extra = acl_file.parent / "acl" / "bob.yml"
    write(extra, "accounts:\n  - {accessKey: bob12345, secretKey: bobsecret}\n")
    service = AclService(acl_file, "broker", clock_ms=lambda: 1234)
    service.load()
    await service.update_account(AccountUpdate("bob12345", "bobsecret2", default_topic_perm="PUB"))
    assert "bobsecret2" in extra.read_text() and "bob12345" not in acl_file.read_text()
    assert service.check(send(Credentials("bob12345", "bobsecret2")), "10.0.0.1") is None
    await service.update_account(AccountUpdate("carol123", "carolsecret"))
    assert "carol123" in acl_file.read_text()
    main, every = service.data_versions()
    assert (main.counter, main.timestamp) == (1, 1234) and every[str(extra)].counter == 1
    assert await service.delete_account("bob12345") and not await service.delete_account("bob12345")
    assert (
        service.check(send(Credentials("bob12345", "bobsecret2")), "10.0.0.1") == "No acl config for bob12345"
    )
    await service.update_global_white(["10.0.0.*"], None)
    assert service.check(send(None), "10.0.0.7") is None
    with pytest.raises(ConfigError, match="not one of"):
        await service.update_global_white(["10.0.0.*"], "/etc/passwd")
    view = service.config_view()
    assert view.global_white_addrs == ("10.0.0.*",)
    assert [account.access_key for account in view.accounts] == ["adminuser", "alice123", "carol123"]
    assert "secret" not in repr(view)


def test_acl_service_namesrv_role_checks_registration_only(acl_file: Path) -> None:
    service = AclService(acl_file, "namesrv")
    service.load()
    assert service.check(RemotingCommand.request(105, {"topic": "T"}), "10.0.0.1") is None
    register = RemotingCommand.request(103, {"brokerName": "broker-a"}, b"{}")
    assert service.check(register, "10.0.0.1") == "No accessKey is configured"
    ALICE.sign(register)
    assert "Need admin permission for request code=103" in (service.check(register, "10.0.0.1") or "")
    ADMIN.sign(register)
    assert service.check(register, "10.0.0.1") is None


@pytest.mark.parametrize(
    ("host", "acl", "warns"),
    [("0.0.0.0", False, True), ("", False, True), ("::", False, True), ("192.0.2.10", False, True),
     ("0.0.0.0", True, False), ("127.0.0.1", False, False), ("::1", False, False), ("localhost", False, False)],
)  # fmt: skip
def test_exposure_warning_only_beyond_loopback_without_acl(host: str, acl: bool, warns: bool) -> None:
    text = exposure_warning("broker broker-a", host, 10911, acl)
    assert (text is not None) is warns
    if text is not None:
        assert "anyone who can reach this address can read, write and administer" in text


def test_exposure_warning_is_logged_once_per_call(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("orbitmq.test.exposure")
    with caplog.at_level(logging.WARNING, logger="orbitmq.test.exposure"):
        assert warn_if_exposed(logger, "name server", "0.0.0.0", 9876, acl_enabled=False)
        assert not warn_if_exposed(logger, "name server", "127.0.0.1", 9876, acl_enabled=False)
    assert len(caplog.records) == 1 and "0.0.0.0:9876 without ACL" in caplog.records[0].getMessage()
