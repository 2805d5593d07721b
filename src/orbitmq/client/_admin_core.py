"""What the admin operation modules need from :class:`~orbitmq.client.admin.AdminClient`.

The admin client's operations are grouped by area in ``_admin_cluster``, ``_admin_groups``
and ``_admin_messages``; each takes the client itself, through this protocol, so the modules
stay small and the client class stays the one public entry point.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol, TypeVar

from orbitmq.client._instance import ClientInstance
from orbitmq.client.config import ClientConfig
from orbitmq.model.route import ClusterInfo, TopicRouteData
from orbitmq.protocol.command import RemotingCommand

__all__ = ["AdminCore", "gather_by"]

_K = TypeVar("_K")
_V = TypeVar("_V")


class AdminCore(Protocol):
    client_config: ClientConfig

    @property
    def _client(self) -> ClientInstance: ...

    async def _master_addrs(self, cluster: str | None) -> list[str]: ...

    async def _broker(self, addr: str, code: int, ext: dict[str, str], what: str) -> RemotingCommand: ...

    async def cluster_info(self) -> ClusterInfo: ...

    async def topic_route(self, topic: str) -> TopicRouteData: ...


async def invoke(
    admin: AdminCore, addr: str, code: int, ext: dict[str, str], body: bytes = b""
) -> RemotingCommand:
    """One request to ``addr``; the response whatever its code."""
    request = RemotingCommand.request(code, ext, body)
    return await admin._client.remoting.invoke(addr, request, admin.client_config.request_timeout_ms)


async def gather_by(keys: Iterable[_K], call: Callable[[_K], Awaitable[_V]]) -> dict[_K, _V]:
    """``{key: await call(key)}`` with every call in flight at once (one round trip for many)."""
    ordered = list(keys)
    values = await asyncio.gather(*(call(key) for key in ordered))
    return dict(zip(ordered, values, strict=True))


async def route_master_addrs(admin: AdminCore, topic: str) -> dict[str, str]:
    """broker name -> master address of every broker hosting ``topic``.

    Raises:
        TopicNotExistError: the name server does not know ``topic``.
    """
    route = await admin.topic_route(topic)
    return {data.broker_name: data.broker_addrs[0] for data in route.broker_datas if 0 in data.broker_addrs}
