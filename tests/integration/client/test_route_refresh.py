"""On-demand route refresh (a consumer that finds its routed master gone) against a real name server."""

from __future__ import annotations

import asyncio

import pytest

from orbitmq.client import Producer
from orbitmq.client._instance import ROUTE_REFRESH_MIN_INTERVAL_S
from tests.integration.client.test_producer import create_topic
from tests.integration.conftest import Cluster

pytestmark = pytest.mark.integration

TOPIC = "RouteSoonTopic"


async def test_client_instance_refresh_route_soon_is_rate_limited_per_topic(cluster: Cluster) -> None:
    await create_topic(cluster.namesrv_addr, TOPIC, 1)
    async with Producer("PG_ROUTE_SOON", cluster.namesrv_addr) as producer:
        instance = producer._instance
        assert instance is not None
        instance.refresh_route_soon(TOPIC)
        fetch = instance._route_fetches.get(TOPIC)
        assert fetch is not None, "the first call asks the name server at once"
        route = await fetch
        assert route is not None and instance.cached_route(TOPIC) is route
        for _ in range(5):
            instance.refresh_route_soon(TOPIC)
            assert TOPIC not in instance._route_fetches, "a second call within the interval asked again"
        instance.refresh_route_soon("OtherTopic")
        assert "OtherTopic" in instance._route_fetches, "the limit is per topic"
        await asyncio.sleep(ROUTE_REFRESH_MIN_INTERVAL_S + 0.1)
        instance.refresh_route_soon(TOPIC)
        assert TOPIC in instance._route_fetches, "after the interval the route is fetched again"
        await asyncio.gather(*instance._route_fetches.values(), return_exceptions=True)
