"""AclTable decisions, request by request, with RocketMQ's refusal texts (no sockets).

The same matrix runs against a real broker process in tests/integration/acl; here every
branch of the validation order is covered quickly, including the name server's rule.
"""

from __future__ import annotations

import pytest

from orbitmq.acl.accounts import Account, parse_document
from orbitmq.acl.signature import sign_request
from orbitmq.acl.validator import AclTable
from orbitmq.model.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from orbitmq.protocol.bodies import LockBatchRequestBody, encode_heartbeat, encode_lock_batch_request
from orbitmq.protocol.command import RemotingCommand

ACCOUNTS = """
globalWhiteRemoteAddresses: [10.8.8.*]
accounts:
  - accessKey: adminuser
    secretKey: adminsecret
    admin: true
  - accessKey: alice123
    secretKey: alicesecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [TopicPub=PUB, TopicSub=SUB, TopicAll=PUB|SUB, TopicDeny=DENY, RMQ_SYS_TRACE_TOPIC=DENY]
    groupPerms: [GroupSub=SUB]
  - accessKey: lenient1
    secretKey: lenientsecret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: whiteacct
    secretKey: whitesecret
    whiteRemoteAddress: 10.9.9.9
"""
SECRETS = {
    "adminuser": "adminsecret",
    "alice123": "alicesecret",
    "lenient1": "lenientsecret",
    "whiteacct": "whitesecret",
}
PEER = "10.1.1.1"


@pytest.fixture(scope="module")
def table() -> AclTable:
    return AclTable([("plain_acl.yml", parse_document(ACCOUNTS, "plain_acl.yml"))])


def signed(
    code: int,
    ext: dict[str, str],
    body: bytes = b"",
    *,
    key: str | None = "alice123",
    secret: str | None = None,
) -> RemotingCommand:
    request = RemotingCommand.request(code, ext, body)
    if key is not None:
        sign_request(request.ext_fields, body, request.version, key, secret or SECRETS.get(key, "whatever1"))
    return request


def heartbeat(group: str, topic: str) -> bytes:
    consumer = ConsumerData(group_name=group, subscription_data_set=[SubscriptionData(topic=topic)])
    return encode_heartbeat(HeartbeatData(client_id="c1", consumer_data_set=[consumer]))


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (signed(310, {"a": "PG", "b": "TopicPub"}, b"x"), None),
        (signed(310, {"a": "PG", "b": "TopicSub"}, b"x"), "No permission for topic:TopicSub"),
        (
            signed(10, {"topic": "TopicOther", "producerGroup": "PG"}, b"x"),
            "No default permission for topic:TopicOther",
        ),
        (signed(320, {"a": "PG", "b": "TopicDeny"}, b"x"), "No permission for topic:TopicDeny"),
        (signed(320, {"a": "PG", "b": "TopicAll"}, b"batch"), None),
        (signed(310, {"a": "PG", "b": "%RETRY%GroupSub"}, b"x"), None),
        (
            signed(310, {"a": "PG", "b": "%RETRY%GroupOther"}, b"x"),
            "No default permission for group:GroupOther",
        ),
        (signed(11, {"topic": "TopicSub", "consumerGroup": "GroupSub"}), None),
        # LITE_PULL_MESSAGE (RocketMQ 5's lite pull consumer) needs what PULL_MESSAGE needs.
        (signed(361, {"topic": "TopicSub", "consumerGroup": "GroupSub"}), None),
        (signed(361, {"topic": "TopicPub", "consumerGroup": "GroupSub"}), "No permission for topic:TopicPub"),
        (
            signed(361, {"topic": "TopicSub", "consumerGroup": "GroupOther"}),
            "No default permission for group:GroupOther",
        ),
        (signed(11, {"topic": "TopicPub", "consumerGroup": "GroupSub"}), "No permission for topic:TopicPub"),
        (
            signed(11, {"topic": "TopicSub", "consumerGroup": "GroupOther"}),
            "No default permission for group:GroupOther",
        ),
        (
            signed(
                15, {"topic": "TopicSub", "consumerGroup": "GroupSub", "queueId": "0", "commitOffset": "1"}
            ),
            None,
        ),
        (
            signed(15, {"topic": "TopicSub", "consumerGroup": "GroupX", "queueId": "0", "commitOffset": "1"}),
            "No default permission for group:GroupX",
        ),
        (signed(12, {"topic": "TopicDeny"}), "No permission for topic:TopicDeny"),
        (signed(34, {}, heartbeat("GroupSub", "TopicSub")), None),
        (signed(34, {}, heartbeat("GroupSub", "TopicOther")), "No default permission for topic:TopicOther"),
        (signed(34, {}, b"{not json"), "heartbeat body"),
        (signed(36, {"group": "GroupSub", "offset": "1"}), None),
        (
            signed(41, {}, encode_lock_batch_request(LockBatchRequestBody("GroupX", "c1", set()))),
            "No default permission for group:GroupX",
        ),
        (signed(42, {}, encode_lock_batch_request(LockBatchRequestBody("GroupSub", "c1", set()))), None),
        # POP consumers read like pull consumers; a recall is the producer's act.
        (signed(200050, {"topic": "TopicSub", "consumerGroup": "GroupSub", "queueId": "-1"}), None),
        (
            signed(200050, {"topic": "TopicPub", "consumerGroup": "GroupSub", "queueId": "-1"}),
            "No permission for topic:TopicPub",
        ),
        (
            signed(200050, {"topic": "TopicSub", "consumerGroup": "GroupX", "queueId": "-1"}),
            "No default permission for group:GroupX",
        ),
        (signed(200051, {"topic": "TopicSub", "consumerGroup": "GroupSub", "extraInfo": "0 1"}), None),
        (
            signed(200051, {"topic": "TopicDeny", "consumerGroup": "GroupSub", "extraInfo": "0 1"}),
            "No permission for topic:TopicDeny",
        ),
        (
            signed(200053, {"topic": "TopicSub", "consumerGroup": "GroupX", "invisibleTime": "1000"}),
            "No default permission for group:GroupX",
        ),
        (signed(200053, {"topic": "TopicAll", "consumerGroup": "GroupSub", "invisibleTime": "1000"}), None),
        (signed(370, {"topic": "TopicPub", "producerGroup": "PG", "recallHandle": "h"}), None),
        (
            signed(370, {"topic": "TopicSub", "producerGroup": "PG", "recallHandle": "h"}),
            "No permission for topic:TopicSub",
        ),
        (signed(40001, {"topic": "TopicPub", "producerGroup": "PG", "writeId": "w", "batchId": "0"}), None),
        (
            signed(40001, {"topic": "TopicSub", "producerGroup": "PG", "writeId": "w", "batchId": "0"}),
            "No permission for topic:TopicSub",
        ),
        (signed(40002, {"writeId": "w", "batchId": "0"}, b'{"chunks": [0], "remote": {}}'), None),
        (signed(14, {"topic": "TopicDeny", "consumerGroup": "GroupX", "queueId": "0"}), None),
        (
            signed(17, {"topic": "NewTopic"}),
            "Need admin permission for request code=17, but accessKey=alice123 is not",
        ),
        (
            signed(215, {"topic": "TopicPub"}),
            "Need admin permission for request code=215, but accessKey=alice123 is not",
        ),
        (
            signed(50, {"accessKey": "x"}),
            "Need admin permission for request code=50, but accessKey=alice123 is not",
        ),
        (
            signed(53, {"globalWhiteAddrs": "*"}),
            "Need admin permission for request code=53, but accessKey=alice123 is not",
        ),
        (signed(17, {"topic": "NewTopic"}, key="adminuser"), None),
        (signed(11, {"topic": "TopicDeny", "consumerGroup": "GroupX"}, key="adminuser"), None),
        (signed(310, {"a": "PG", "b": "RMQ_SYS_TRACE_TOPIC"}, b"trace"), None),
        (signed(310, {"a": "PG", "b": "TopicPub"}, key=None), "No accessKey is configured"),
        (signed(310, {"a": "PG", "b": "TopicPub"}, key="stranger"), "No acl config for stranger"),
        (
            signed(310, {"a": "PG", "b": "TopicPub"}, secret="wrongsecret"),
            "Check signature failed for accessKey=alice123",
        ),
        (
            signed(17, {"topic": "T"}, key="adminuser", secret="wrongsecret"),
            "Check signature failed for accessKey=adminuser",
        ),
    ],
)
def test_validator_broker_decision(table: AclTable, request_: RemotingCommand, expected: str | None) -> None:
    outcome = table.check_broker(request_, PEER)
    if expected is None:
        assert outcome is None
    else:
        assert outcome is not None and expected in outcome


def test_validator_tampered_body_or_field_fails_signature(table: AclTable) -> None:
    request = signed(310, {"a": "PG", "b": "TopicPub"}, b"original")
    request.body = b"tampered"
    assert table.check_broker(request, PEER) == "Check signature failed for accessKey=alice123"
    request = signed(310, {"a": "PG", "b": "TopicPub"}, b"x")
    request.ext_fields["b"] = "TopicAll"
    assert table.check_broker(request, PEER) == "Check signature failed for accessKey=alice123"


def test_validator_white_lists_skip_checks(table: AclTable) -> None:
    unsigned = signed(17, {"topic": "T"}, key=None)
    assert table.check_broker(unsigned, "10.8.8.200") is None
    assert table.check_broker(unsigned, "::ffff:10.8.8.1") is None
    assert table.check_broker(unsigned, "10.8.9.1") == "No accessKey is configured"
    # An account's own white address skips signature and permissions, but the key must be known.
    badly_signed = signed(17, {"topic": "T"}, key="whiteacct", secret="nonsense1")
    assert table.check_broker(badly_signed, "10.9.9.9") is None
    assert table.check_broker(badly_signed, "10.9.9.8") == "Check signature failed for accessKey=whiteacct"


def test_validator_namesrv_checks_only_registration_codes(table: AclTable) -> None:
    route = signed(105, {"topic": "T"}, key=None)
    assert table.check_namesrv(route, PEER) is None
    register = signed(103, {"brokerName": "broker-a"}, b"{}", key=None)
    assert table.check_namesrv(register, PEER) == "No accessKey is configured"
    register = signed(103, {"brokerName": "broker-a"}, b"{}", key="lenient1")
    assert (
        table.check_namesrv(register, PEER)
        == "Need admin permission for request code=103, but accessKey=lenient1 is not"
    )
    for code in (103, 104, 216, 100, 102):
        assert table.check_namesrv(signed(code, {"x": "y"}, key="adminuser"), PEER) is None
    assert table.check_namesrv(signed(104, {"x": "y"}, key=None), "10.8.8.8") is None


def test_validator_first_file_owns_an_access_key() -> None:
    first = parse_document(
        "accounts:\n  - {accessKey: shared12, secretKey: firstsecret, admin: true}\n", "a.yml"
    )
    second = parse_document("accounts:\n  - {accessKey: shared12, secretKey: secondsecret}\n", "b.yml")
    table = AclTable([("a.yml", first), ("b.yml", second)])
    assert table.source_of("shared12") == "a.yml"
    assert any("already defined in a.yml" in warning for warning in table.warnings)
    request = signed(17, {"topic": "T"}, key="shared12", secret="firstsecret")
    assert table.check_broker(request, PEER) is None


def test_validator_unknown_permission_word_is_deny_with_warning() -> None:
    text = "accounts:\n  - {accessKey: typo1234, secretKey: typosecret, defaultTopicPerm: PUBSUB}\n"
    table = AclTable([("f.yml", parse_document(text, "f.yml"))])
    assert any("unknown permission 'PUBSUB'" in warning for warning in table.warnings)
    request = signed(310, {"a": "PG", "b": "T"}, b"x", key="typo1234", secret="typosecret")
    assert table.check_broker(request, PEER) == "No default permission for topic:T"


def test_validator_inner_account_is_admin_but_unlisted() -> None:
    table = AclTable([], inner_accounts=[Account("inner-key-1", "inner-secret", admin=True)])
    register = signed(103, {"brokerName": "b"}, b"{}", key="inner-key-1", secret="inner-secret")
    assert table.check_namesrv(register, PEER) is None
    assert table.source_of("inner-key-1") is None
