"""Acceptance 2: the real C++ client (``rocketmq==0.4.4``) under ACL.

With ``set_session_credentials`` it produces and push-consumes through a standalone whose
broker checks every request; with a wrong secret every send is refused; and an edit of the
accounts file while a producer runs takes its permission away within 5 s (and the broker log
names the refusal).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.acl.conftest import accounts_path, create_topic_signed, start_acl_standalone
from tests.integration.conftest import REPO_ROOT, CppClient
from tests.support.cpp_client import body_for
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.integration

TOPIC = "CppAclTopic"
GROUP = "CG_CPP_ACL"
ACCOUNTS = f"""accounts:
  - accessKey: cppadmin1
    secretKey: cppadminsecret
    admin: true
  - accessKey: cppuser1
    secretKey: cppusersecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [{TOPIC}={{perm}}]
    groupPerms: [{GROUP}=SUB]
"""
USER = ["--access-key", "cppuser1", "--secret-key", "cppusersecret"]


@pytest.fixture
def acl_standalone(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_acl_standalone(tmp_path, ACCOUNTS.format(perm="PUB|SUB"))
    try:
        create_topic_signed(proc.addr, TOPIC, "cppadmin1", "cppadminsecret")
        yield proc
    finally:
        proc.kill()


def paced_producer(cpp: CppClient, namesrv: str, out: Path, *args: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "tests.support.cpp_client", "produce", "--namesrv", namesrv,
           "--topic", TOPIC, "--mode", "paced", *args]  # fmt: skip
    with open(out, "wb") as stdout:
        return subprocess.Popen(cmd, env=cpp.env(), cwd=REPO_ROOT, stdout=stdout, stderr=subprocess.DEVNULL)


def events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def test_acl_cpp_client_produces_and_push_consumes_with_credentials(
    acl_standalone: ServerProcess, cpp: CppClient
) -> None:
    consumer = cpp.start_consumer(acl_standalone.addr, TOPIC, GROUP, *USER)
    sent = cpp.produce(acl_standalone.addr, TOPIC, "--count", "12", *USER)
    assert [event["status"] for event in sent] == ["OK"] * 12
    consumer.wait_for(lambda evs: len({e["props"]["seq"] for e in evs if e["event"] == "received"}) >= 12, 60)
    bodies = {bytes.fromhex(str(event["body_hex"])) for event in consumer.received()}
    assert bodies == {body_for(seq, 64) for seq in range(12)}
    consumer.stop()


def test_acl_cpp_client_with_wrong_secret_is_refused(
    acl_standalone: ServerProcess, cpp: CppClient, tmp_path: Path
) -> None:
    out = tmp_path / "wrong-secret.jsonl"
    proc = paced_producer(cpp, acl_standalone.addr, out, "--count", "3", "--interval-ms", "100",
                          "--access-key", "cppuser1", "--secret-key", "not-the-secret")  # fmt: skip
    assert proc.wait(60) == 0
    outcomes = [event["event"] for event in events(out)]
    assert outcomes == ["error"] * 3
    assert "Check signature failed for accessKey=cppuser1" in acl_standalone.log()


def test_acl_cpp_client_loses_permission_within_5_s_of_a_file_edit(
    acl_standalone: ServerProcess, cpp: CppClient, tmp_path: Path
) -> None:
    out = tmp_path / "paced.jsonl"
    proc = paced_producer(cpp, acl_standalone.addr, out, "--count", "60", "--interval-ms", "150", *USER)
    try:
        deadline = time.monotonic() + 30
        while sum(event["event"] == "sent" for event in events(out)) < 3:
            assert time.monotonic() < deadline and proc.poll() is None, events(out)
            time.sleep(0.1)
        accounts_path(acl_standalone).write_text(ACCOUNTS.format(perm="SUB"))
        edited_at = time.time()
        while time.time() < edited_at + 6.5 and proc.poll() is None:
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait(10)
    after = [event for event in events(out) if float(event["t"]) > edited_at]  # type: ignore[arg-type]
    first_error = next(float(e["t"]) for e in after if e["event"] == "error")  # type: ignore[arg-type]
    assert first_error - edited_at <= 5.0
    late_sends = [e for e in after if e["event"] == "sent" and float(e["t"]) > edited_at + 5.0]  # type: ignore[arg-type]
    assert not late_sends, late_sends
    assert f"No permission for topic:{TOPIC}" in acl_standalone.log()
