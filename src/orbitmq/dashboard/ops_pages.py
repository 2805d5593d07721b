"""The dashboard's operator pages beside rocketmq-dashboard's: a broker's runtime and config,
producer connections, ACL accounts, and switching between the configured name servers."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from orbitmq.client.acl_admin import AclAdminClient
from orbitmq.dashboard.data import describe_error
from orbitmq.dashboard.pages import Pages
from orbitmq.dashboard.params import NotFound, group_name, topic_name
from orbitmq.dashboard.state import DashboardState
from orbitmq.errors import OrbitError
from orbitmq.protocol.acl_commands import AclConfigBody

__all__ = ["ops_routes"]


def ops_routes(state: DashboardState, pages: Pages) -> list[Route]:
    """``/brokers/ADDR``, ``/producers``, ``/acl`` and ``/ops``."""

    async def broker_detail(request: Request) -> Response:
        addr = request.path_params["addr"]
        members = {member.address: member for member in await state.admin.cluster_members()}
        member = members.get(addr)
        if member is None:
            raise NotFound(
                "No such broker", f"No broker registered with the name server listens on {addr[:100]}."
            )
        runtime, config = await asyncio.gather(
            state.admin.broker_runtime_info(addr), state.admin.broker_config(addr)
        )
        return pages.page(
            request,
            "broker.html",
            member=member,
            runtime=sorted(runtime.items()),
            config=sorted(config.items()),
        )

    async def acl(request: Request) -> Response:
        acl_admin = AclAdminClient(state.admin)
        brokers: list[tuple[str, AclConfigBody | None, str]] = []
        for addr in await acl_admin.brokers():
            try:
                config = (await acl_admin.list_config(broker_addr=addr))[addr]
            except OrbitError as exc:
                brokers.append((addr, None, describe_error(exc)))
            else:
                brokers.append((addr, config, ""))
        return pages.page(request, "acl.html", brokers=brokers)

    async def producers(request: Request) -> Response:
        group = request.query_params.get("group", "").strip()
        topic = request.query_params.get("topic", "").strip()
        connections = None
        if group:
            group_name(group)
            if topic:
                topic_name(topic)
            try:
                connections = await state.admin.producer_connection(group, topic or None)
            except OrbitError as exc:
                return pages.page(
                    request,
                    "producers.html",
                    group=group,
                    topic=topic,
                    connections=[],
                    problem=describe_error(exc),
                )
        return pages.page(request, "producers.html", group=group, topic=topic, connections=connections)

    async def ops(request: Request) -> Response:
        return pages.page(request, "ops.html", current=state.namesrv_addr, choices=state.namesrv_choices)

    async def ops_namesrv(request: Request) -> Response:
        form = await request.form()
        wanted = str(form.get("namesrv", ""))
        try:
            await state.switch(wanted)
        except (ValueError, OrbitError) as exc:
            return pages.back("/ops", problem=f"Not switched: {describe_error(exc)}")
        return pages.back("/ops", notice=f"The dashboard now reads the cluster of name server {wanted}.")

    return [
        Route("/brokers/{addr}", broker_detail),
        Route("/producers", producers),
        Route("/acl", acl),
        Route("/ops", ops),
        Route("/ops/namesrv", ops_namesrv, methods=["POST"]),
    ]
