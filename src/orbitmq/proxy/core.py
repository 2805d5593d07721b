"""What every part of the gRPC service shares: config, clients, the broker gateway, renewals.

Also the per-call metadata every SDK sends (grpc-v5-protocol §2.1): ``x-mq-client-id`` is
required (CLIENT_ID_REQUIRED without it) and keys everything the proxy keeps about a client;
language and version are informational; the ``authorization`` and ``x-mq-date-time`` headers
are read into :class:`CallMeta` and checked by ``proxy.auth`` when ACL is on.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orbitmq.acl.grpc_auth import AUTHORIZATION, DATE_TIME, GrpcCredentials, parse_grpc_authorization
from orbitmq.broker.pop.renew import RenewTable
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.gateway import BrokerGateway
from orbitmq.proxy.sessions import SessionTable
from orbitmq.transport.splice import spliced_client

__all__ = ["CallMeta", "ProxyCore", "call_meta", "now_ms"]

HALF_OWNERS_MAX = 65_536
"""Transactional messages whose sending client the proxy remembers, to ask it first on a check."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class ProxyCore:
    """The shared parts of one proxy."""

    config: ProxyConfig
    sessions: SessionTable
    gateway: BrokerGateway
    renewals: RenewTable
    clock_ms: Callable[[], int] = now_ms
    half_owners: OrderedDict[str, str] = field(default_factory=OrderedDict)

    def remember_half(self, message_id: str, client_id: str) -> None:
        self.half_owners[message_id] = client_id
        self.half_owners.move_to_end(message_id)
        while len(self.half_owners) > HALF_OWNERS_MAX:
            self.half_owners.popitem(last=False)


@dataclass(frozen=True, slots=True)
class CallMeta:
    """Who is calling."""

    client_id: str
    language: str
    version: str
    peer_host: str
    credentials: GrpcCredentials = field(default_factory=lambda: GrpcCredentials("", "", ""), repr=False)


def call_meta(context: Any) -> CallMeta | None:
    """The caller's metadata; None when ``x-mq-client-id`` is missing."""
    headers = {key.lower(): value for key, value in (context.invocation_metadata() or ())}
    client_id = headers.get("x-mq-client-id", "")
    if not isinstance(client_id, str) or not client_id:
        return None
    return CallMeta(
        client_id=client_id,
        language=str(headers.get("x-mq-language", "")),
        version=str(headers.get("x-mq-client-version", "")),
        peer_host=_peer_host(str(context.peer() or "")),
        credentials=parse_grpc_authorization(
            _text(headers.get(AUTHORIZATION)), _text(headers.get(DATE_TIME))
        ),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _peer_host(peer: str) -> str:
    """``ipv4:1.2.3.4:5678`` / ``ipv6:[::1]:5678`` -> the host part; the client's own when the
    connection comes through the gRPC port's splice (``transport.splice``)."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return rest or peer
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    client = spliced_client(host, int(port)) if port.isdigit() else None
    return client[0] if client is not None else host
