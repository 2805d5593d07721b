"""Acceptance 1: the permission matrix against a real broker process with ``aclEnable=true``.

Every request class (send, batch send, pull, offsets, heartbeat, query, an admin code, an ACL
code, lock/unlock, POP's pop/ack/change-invisible-time, recall) is sent in every credential situation (none, unknown key, wrong secret,
right key without the permission, right key with it, admin, white-listed address) over one
connection, and each answer is compared with RocketMQ's: SYSTEM_ERROR (1) with remark
``org.apache.rocketmq.acl.common.AclException: <reason>`` for a refusal, the handler's own
answer otherwise. All mismatches are reported together.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orbitmq.acl.signature import Credentials
from orbitmq.model.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.bodies import LockBatchRequestBody, encode_heartbeat, encode_lock_batch_request
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    CreateTopicRequestHeader,
    PullMessageRequestHeader,
    QueryMessageRequestHeader,
    SendMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from orbitmq.protocol.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)
from orbitmq.security import ACL_EXCEPTION
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, start_broker

pytestmark = pytest.mark.integration

ACCOUNTS = """accounts:
  - accessKey: adminuser
    secretKey: adminsecret
    admin: true
  - accessKey: alice123
    secretKey: alicesecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [TopicOk=PUB|SUB, TopicNo=DENY]
    groupPerms: [GroupOk=SUB]
  - accessKey: whiteacct
    secretKey: whitesecret
    whiteRemoteAddress: 127.0.0.1
"""

ADMIN = Credentials("adminuser", "adminsecret")
ALICE = Credentials("alice123", "alicesecret")


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("acl-matrix")
    accounts = root / "plain_acl.yml"
    accounts.write_text(ACCOUNTS)
    proc = start_broker(
        root,
        None,
        aclEnable=True,
        aclFile=str(accounts),
        bindAddress="127.0.0.1",
        recallMessageEnable=True,  # off by default, as in RocketMQ; the matrix checks it is served
    )
    try:
        yield proc
    finally:
        proc.kill()


# -- request classes: (builder for the permitted variant, builder for the forbidden variant,
#    codes the broker answers when it serves the request) -------------------------------------


def send(topic: str) -> RemotingCommand:
    ext = SendMessageRequestHeader("PG", topic, 0, born_timestamp=int(time.time() * 1000)).to_v2_ext()
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"matrix body")


def batch(topic: str) -> RemotingCommand:
    ext = SendMessageRequestHeader("PG", topic, 0, batch=True).to_v2_ext()
    body = encode_batch([(0, b"one", {}), (0, b"two", {})])
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, body)


def pull(group: str) -> RemotingCommand:
    header = PullMessageRequestHeader(group, "TopicOk", 0, 0, max_msg_nums=1, sys_flag=0)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())


def offsets(topic: str) -> RemotingCommand:
    header = UpdateConsumerOffsetRequestHeader("GroupOk", topic, 0, 1)
    return RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())


def heartbeat(group: str) -> RemotingCommand:
    consumer = ConsumerData(group_name=group, subscription_data_set=[SubscriptionData(topic="TopicOk")])
    body = encode_heartbeat(HeartbeatData(client_id="127.0.0.1@matrix", consumer_data_set=[consumer]))
    return RemotingCommand.request(RequestCode.HEART_BEAT, {}, body)


def query(topic: str) -> RemotingCommand:
    header = QueryMessageRequestHeader(topic, "no-such-key", 32, 0, int(time.time() * 1000))
    return RemotingCommand.request(RequestCode.QUERY_MESSAGE, header.to_ext())


def admin_code(_: str) -> RemotingCommand:
    header = CreateTopicRequestHeader(topic="TopicByAdmin", read_queue_nums=2, write_queue_nums=2)
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())


def acl_code(_: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {})


def lock(group: str) -> RemotingCommand:
    body = LockBatchRequestBody(group, "127.0.0.1@matrix", {MessageQueue("TopicOk", "broker-a", 0)})
    return RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, encode_lock_batch_request(body))


def pop(group: str) -> RemotingCommand:
    header = PopMessageRequestHeader(group, "TopicOk", -1, 1, 30_000, 0, int(time.time() * 1000), 0)
    return RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext())


def ack(group: str) -> RemotingCommand:
    header = AckMessageRequestHeader(group, "TopicOk", 0, "no-such-handle", 0)
    return RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext())


def change_invisible(group: str) -> RemotingCommand:
    header = ChangeInvisibleTimeRequestHeader(group, "TopicOk", 0, "no-such-handle", 0, 10_000)
    return RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext())


def recall(topic: str) -> RemotingCommand:
    ext = {"producerGroup": "PG", "topic": topic, "recallHandle": "no-such-handle"}
    return RemotingCommand.request(RequestCode.RECALL_MESSAGE, ext)


Builder = Callable[[str], RemotingCommand]
CLASSES: dict[str, tuple[Builder, str, str, set[int], str]] = {
    # name: (builder, permitted argument, forbidden argument, served codes, refusal for alice).
    # In this order: a pull needs the heartbeat of its group first.
    "send": (send, "TopicOk", "TopicNo", {0}, "No permission for topic:TopicNo"),
    "batch send": (batch, "TopicOk", "TopicNo", {0}, "No permission for topic:TopicNo"),
    "heartbeat": (heartbeat, "GroupOk", "GroupNo", {0}, "No default permission for group:GroupNo"),
    "pull": (pull, "GroupOk", "GroupNo", {0, 19, 20, 21}, "No default permission for group:GroupNo"),
    "offsets": (offsets, "TopicOk", "TopicNo", {0}, "No permission for topic:TopicNo"),
    "query": (query, "TopicOk", "TopicNo", {0, 22}, "No permission for topic:TopicNo"),
    "admin code": (admin_code, "", "", {0}, "Need admin permission for request code=17, but accessKey=alice123 is not"),
    "ACL code": (acl_code, "", "", {0}, "Need admin permission for request code=52, but accessKey=alice123 is not"),
    "lock": (lock, "GroupOk", "GroupNo", {0}, "No default permission for group:GroupNo"),
    "pop": (pop, "GroupOk", "GroupNo", {0, 208}, "No default permission for group:GroupNo"),
    # Served means the handler answered: here it refuses the made-up receipt or recall handle.
    "ack": (ack, "GroupOk", "GroupNo", {13}, "No default permission for group:GroupNo"),
    "change invisible time": (change_invisible, "GroupOk", "GroupNo", {13}, "No default permission for group:GroupNo"),
    "recall": (recall, "TopicOk", "TopicNo", {604}, "No permission for topic:TopicNo"),
}  # fmt: skip
ADMIN_ONLY = {"admin code", "ACL code"}

# situation: (credentials, use the forbidden variant, expected refusal or None; "*" = the class's)
SITUATIONS: dict[str, tuple[Credentials | None, bool, str | None]] = {
    "no credentials": (None, False, "No accessKey is configured"),
    "unknown key": (Credentials("stranger1", "whatever1"), False, "No acl config for stranger1"),
    "wrong secret": (Credentials("alice123", "not-her-secret"), False, "Check signature failed for accessKey=alice123"),
    "right key, no permission": (ALICE, True, "*"),
    "right key, permission": (ALICE, False, None),
    "admin": (ADMIN, True, None),
    "white-listed address": (Credentials("whiteacct", "wrong-secret"), True, None),
}  # fmt: skip


def expected_refusal(situation: str, name: str) -> str | None:
    _, _, refusal = SITUATIONS[situation]
    if situation == "right key, permission" and name in ADMIN_ONLY:
        return CLASSES[name][4]  # alice holds no admin right whatever the variant
    return CLASSES[name][4] if refusal == "*" else refusal


async def ask(client: RemotingClient, addr: str, name: str, situation: str) -> RemotingCommand:
    builder, permitted, forbidden, _, _ = CLASSES[name]
    credentials, use_forbidden, _ = SITUATIONS[situation]
    request = builder(forbidden if use_forbidden else permitted)
    if credentials is not None:
        credentials.sign(request)
    return await client.invoke(addr, request, 10_000)


def test_acl_matrix_answers_as_rocketmq(acl_broker: ServerProcess) -> None:
    async def run() -> list[str]:
        client = RemotingClient()
        mismatches: list[str] = []
        try:
            for situation in SITUATIONS:
                for name, (_, _, _, served, _) in CLASSES.items():
                    response = await ask(client, acl_broker.addr, name, situation)
                    refusal = expected_refusal(situation, name)
                    if refusal is not None:
                        wanted = (ResponseCode.SYSTEM_ERROR, f"{ACL_EXCEPTION}: {refusal}")
                        if (response.code, response.remark) != wanted:
                            mismatches.append(
                                f"{situation} / {name}: got {response.code} {response.remark!r}"
                            )
                    elif response.code not in served or ACL_EXCEPTION in (response.remark or ""):
                        mismatches.append(
                            f"{situation} / {name}: not served: {response.code} {response.remark!r}"
                        )
        finally:
            await client.close()
        return mismatches

    mismatches = asyncio.run(run())
    assert not mismatches, "\n".join(mismatches)


def test_acl_global_white_list_edit_applies_within_5_s(acl_broker: ServerProcess, tmp_path: Path) -> None:
    accounts = acl_broker.workdir.parent / "plain_acl.yml"

    async def unsigned_admin_call() -> RemotingCommand:
        client = RemotingClient()
        try:
            return await client.invoke(acl_broker.addr, admin_code(""), 10_000)
        finally:
            await client.close()

    assert asyncio.run(unsigned_admin_call()).code == ResponseCode.SYSTEM_ERROR
    accounts.write_text("globalWhiteRemoteAddresses: [127.0.0.*]\n" + ACCOUNTS)
    edited = time.monotonic()
    try:
        while (response := asyncio.run(unsigned_admin_call())).code != ResponseCode.SUCCESS:
            assert time.monotonic() - edited < 5.0, f"still refused 5 s after the edit: {response.remark}"
            time.sleep(0.1)
    finally:
        accounts.write_text(ACCOUNTS)
