"""Access control of gRPC calls: which topics and groups each call touches, and the answer.

With ``aclEnable=true`` the proxy checks every call of a 5.x SDK against the same
``plain_acl.yml`` accounts as the brokers (``security.AclService`` in role ``proxy``): the
``authorization`` header's access key and HMAC signature (``acl.grpc_auth``), the white lists,
then the permission on every resource the call names, as RocketMQ's ACL 1.0 asks of the
matching remoting request:

=====================================  ==========================================================
call                                   needs
=====================================  ==========================================================
QueryRoute                             the topic: PUB or SUB (ANY)
SendMessage                            every message's topic: PUB
EndTransaction, RecallMessage          the topic: PUB
QueryAssignment, ReceiveMessage,       the topic: SUB, the group: SUB
AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue
Heartbeat, NotifyClientTermination     the group (when named): SUB
Telemetry settings                     a producer's topics: PUB; a consumer's group and topics: SUB
=====================================  ==========================================================

A group is checked as its retry topic ``%RETRY%<group>``, as everywhere in ACL 1.0. The
answer to a refused call is in-band, like every proxy error: UNAUTHORIZED (40100) when the
caller is not proven (no key, unknown key, bad signature), FORBIDDEN (40300) when the account
lacks a permission (RocketMQ 5.3's split); the SDKs raise their matching exceptions.

Once a call is allowed, the proxy makes it at the brokers with its own account
(``innerClientAuthenticationCredentials``, or the key a standalone makes at start): the brokers
see the proxy, the proxy answers for its callers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orbitmq.acl.permission import ANY, PUB, SUB
from orbitmq.acl.resources import RETRY_PREFIX, retry_topic
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy.convert import resource_name
from orbitmq.proxy.core import CallMeta
from orbitmq.security import AclService

__all__ = ["GrpcGuard", "call_resources", "settings_resources"]


def _topic(needed: dict[str, int], resource: pb.Resource, permission: int) -> None:
    name = resource_name(resource)
    if name:
        # A %RETRY% topic names a group's retry queue: the group's permission decides, as in a send-back.
        needed[name] = SUB if name.startswith(RETRY_PREFIX) else permission


def _group(needed: dict[str, int], resource: pb.Resource) -> None:
    name = resource_name(resource)
    if name:
        needed[retry_topic(name)] = SUB


def _route(request: Any, needed: dict[str, int]) -> None:
    _topic(needed, request.topic, ANY)


def _send(request: Any, needed: dict[str, int]) -> None:
    for message in request.messages:
        _topic(needed, message.topic, PUB)


def _publish(request: Any, needed: dict[str, int]) -> None:
    _topic(needed, request.topic, PUB)


def _consume(request: Any, needed: dict[str, int]) -> None:
    _topic(needed, request.topic, SUB)
    _group(needed, request.group)


def _receive(request: Any, needed: dict[str, int]) -> None:
    _topic(needed, request.message_queue.topic, SUB)
    _group(needed, request.group)


def _group_only(request: Any, needed: dict[str, int]) -> None:
    if request.HasField("group"):
        _group(needed, request.group)


_RESOURCES: dict[type, Callable[[Any, dict[str, int]], None]] = {
    spb.QueryRouteRequest: _route,
    spb.SendMessageRequest: _send,
    spb.EndTransactionRequest: _publish,
    spb.RecallMessageRequest: _publish,
    spb.QueryAssignmentRequest: _consume,
    spb.ReceiveMessageRequest: _receive,
    spb.AckMessageRequest: _consume,
    spb.ChangeInvisibleDurationRequest: _consume,
    spb.ForwardMessageToDeadLetterQueueRequest: _consume,
    spb.HeartbeatRequest: _group_only,
    spb.NotifyClientTerminationRequest: _group_only,
}


def call_resources(request: Any) -> dict[str, int]:
    """Resource -> needed permission bit of one gRPC request message.

    Raises:
        KeyError: a request type the table does not know (a call added without its rule).
    """
    needed: dict[str, int] = {}
    _RESOURCES[type(request)](request, needed)
    return needed


def settings_resources(settings: pb.Settings) -> dict[str, int]:
    """What a client's Telemetry settings claim: a producer's topics, a consumer's group and topics."""
    needed: dict[str, int] = {}
    if settings.HasField("publishing"):
        for topic in settings.publishing.topics:
            _topic(needed, topic, PUB)
    if settings.HasField("subscription"):
        _group(needed, settings.subscription.group)
        for entry in settings.subscription.subscriptions:
            _topic(needed, entry.topic, SUB)
    return needed


class GrpcGuard:
    """The proxy's check of each call; without ACL (``acl`` None) every call passes."""

    def __init__(self, acl: AclService | None) -> None:
        self.acl = acl

    def refusal(self, rpc: str, meta: CallMeta, needed: dict[str, int]) -> pb.Status | None:
        """None when the call may proceed, else the in-band status to answer it with."""
        if self.acl is None:
            return None
        refused = self.acl.check_grpc(rpc, meta.credentials, meta.peer_host, needed)
        if refused is None:
            return None
        code = pb.UNAUTHORIZED if refused.unauthenticated else pb.FORBIDDEN
        return pb.Status(code=code, message=refused.reason)

    def refuse_request(self, rpc: str, meta: CallMeta, request: Any) -> pb.Status | None:
        """:meth:`refusal` for a request message (its resources from :func:`call_resources`)."""
        if self.acl is None:
            return None
        return self.refusal(rpc, meta, call_resources(request))
