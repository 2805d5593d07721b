"""ACL of gRPC calls without sockets: the authorization header, resources per call, the answers.

The signature vector is the one the 5.x SDKs compute (HMAC-SHA1 over ``x-mq-date-time``,
hex); the same accounts then answer every call the way ``proxy.auth`` documents.
"""

from __future__ import annotations

import hashlib
import hmac

import pytest

from orbitmq.acl.accounts import parse_document
from orbitmq.acl.grpc_auth import GrpcCredentials, grpc_authorization, parse_grpc_authorization
from orbitmq.acl.permission import ANY, PUB, SUB
from orbitmq.acl.validator import AclTable
from orbitmq.errors import ConfigError
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy.auth import call_resources, settings_resources
from orbitmq.proxy.config import load_proxy_config

ACCOUNTS = """
accounts:
  - accessKey: alice123
    secretKey: alicesecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [TopicPub=PUB, TopicSub=SUB]
    groupPerms: [GroupSub=SUB]
  - accessKey: adminuser
    secretKey: adminsecret
    admin: true
  - accessKey: whiteacct
    secretKey: whitesecret
    whiteRemoteAddress: 10.9.9.*
"""
DATE = "20261125T054613Z"
PEER = "10.1.1.1"


@pytest.fixture(scope="module")
def table() -> AclTable:
    return AclTable([("plain_acl.yml", parse_document(ACCOUNTS, "plain_acl.yml"))])


def creds(key: str, secret: str, date: str = DATE) -> GrpcCredentials:
    return parse_grpc_authorization(grpc_authorization(key, secret, date), date)


def test_grpc_auth_signature_is_hex_hmac_sha1_of_the_date() -> None:
    header = grpc_authorization("alice123", "alicesecret", DATE)
    expected = hmac.new(b"alicesecret", DATE.encode(), hashlib.sha1).hexdigest()
    assert header == (
        f"MQv2-HMAC-SHA1 Credential=alice123, SignedHeaders=x-mq-date-time, Signature={expected}"
    )
    parsed = parse_grpc_authorization(header, DATE)
    assert parsed == GrpcCredentials("alice123", expected, DATE)


def test_grpc_auth_python_sdk_empty_credential_is_no_key() -> None:
    # What the Python SDK sends without credentials.
    parsed = parse_grpc_authorization(
        "MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=abc", DATE
    )
    assert parsed.access_key == ""
    assert parse_grpc_authorization(None, None).access_key == ""
    assert parse_grpc_authorization("Bearer xyz", DATE).access_key == ""


@pytest.mark.parametrize(
    ("credentials", "peer", "needed", "expected"),
    [
        (creds("alice123", "alicesecret"), PEER, {"TopicPub": PUB}, None),
        (creds("alice123", "alicesecret"), PEER, {"TopicPub": ANY}, None),
        (creds("alice123", "alicesecret"), PEER, {"TopicSub": PUB}, (False, "No permission for topic:TopicSub")),
        (creds("alice123", "alicesecret"), PEER, {"TopicSub": SUB, "%RETRY%GroupX": SUB},
         (False, "No default permission for group:GroupX")),
        (creds("alice123", "wrongsecret"), PEER, {"TopicPub": PUB},
         (True, "Check signature failed for accessKey=alice123")),
        (creds("stranger1", "whatever"), PEER, {}, (True, "No acl config for stranger1")),
        (GrpcCredentials("", "", DATE), PEER, {}, (True, "No accessKey is configured")),
        (GrpcCredentials("alice123", "", DATE), PEER, {}, (True, "Check signature failed for accessKey=alice123")),
        (creds("adminuser", "adminsecret"), PEER, {"TopicSub": PUB, "%RETRY%GroupX": SUB}, None),
        (creds("whiteacct", "not-its-secret"), "10.9.9.3", {"TopicSub": PUB}, None),
    ],
)  # fmt: skip
def test_grpc_auth_check_answers(
    table: AclTable,
    credentials: GrpcCredentials,
    peer: str,
    needed: dict[str, int],
    expected: tuple[bool, str] | None,
) -> None:
    refusal = table.check_grpc(credentials, peer, needed)
    assert (tuple(refusal) if refusal is not None else None) == expected


def test_grpc_auth_upper_case_hex_signature_is_accepted(table: AclTable) -> None:
    lower = creds("alice123", "alicesecret")
    upper = GrpcCredentials(lower.access_key, lower.signature.upper(), DATE)
    assert table.check_grpc(upper, PEER, {"TopicPub": PUB}) is None


def topic(name: str) -> pb.Resource:
    return pb.Resource(name=name)


def test_grpc_auth_resources_per_call() -> None:
    group, t = pb.Resource(name="G1"), topic("T1")
    assert call_resources(spb.QueryRouteRequest(topic=t)) == {"T1": ANY}
    send = spb.SendMessageRequest(messages=[pb.Message(topic=t), pb.Message(topic=topic("T2"))])
    assert call_resources(send) == {"T1": PUB, "T2": PUB}
    assert call_resources(spb.RecallMessageRequest(topic=t)) == {"T1": PUB}
    assert call_resources(spb.EndTransactionRequest(topic=t)) == {"T1": PUB}
    for request in (
        spb.QueryAssignmentRequest(topic=t, group=group),
        spb.AckMessageRequest(topic=t, group=group),
        spb.ChangeInvisibleDurationRequest(topic=t, group=group),
        spb.ForwardMessageToDeadLetterQueueRequest(topic=t, group=group),
        spb.ReceiveMessageRequest(group=group, message_queue=pb.MessageQueue(topic=t)),
    ):
        assert call_resources(request) == {"T1": SUB, "%RETRY%G1": SUB}, type(request).__name__
    assert call_resources(spb.HeartbeatRequest(group=group)) == {"%RETRY%G1": SUB}
    assert call_resources(spb.HeartbeatRequest()) == {}
    assert call_resources(spb.NotifyClientTerminationRequest()) == {}
    namespaced = pb.Resource(name="T1", resource_namespace="ns")
    assert call_resources(spb.QueryRouteRequest(topic=namespaced)) == {"ns%T1": ANY}


def test_grpc_auth_settings_claim_topics_and_group() -> None:
    producer = pb.Settings(publishing=pb.Publishing(topics=[topic("T1")]))
    assert settings_resources(producer) == {"T1": PUB}
    consumer = pb.Settings(
        subscription=pb.Subscription(
            group=pb.Resource(name="G1"), subscriptions=[pb.SubscriptionEntry(topic=topic("T2"))]
        )
    )
    assert settings_resources(consumer) == {"%RETRY%G1": SUB, "T2": SUB}


def test_grpc_auth_cluster_proxy_config_needs_the_file_and_its_own_account() -> None:
    base = {"namesrvAddr": "127.0.0.1:9876", "aclEnable": "true"}
    with pytest.raises(ConfigError, match="aclEnable=true needs aclFile"):
        load_proxy_config(None, base)
    with pytest.raises(ConfigError, match="needs innerClientAuthenticationCredentials"):
        load_proxy_config(None, {**base, "aclFile": "/etc/orbitmq/plain_acl.yml"})
    inner = '{"accessKey": "proxyuser", "secretKey": "proxysecret"}'
    config = load_proxy_config(
        None, {**base, "aclFile": "/etc/orbitmq/plain_acl.yml", "innerClientAuthenticationCredentials": inner}
    )
    assert config.acl_enable and config.acl_file == "/etc/orbitmq/plain_acl.yml"
    assert "proxysecret" not in repr(config)
