"""A dashboard's settings and the clients it talks to its cluster with (and the chart sampler)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from orbitmq.client import Producer, PullConsumer
from orbitmq.client.admin import TOOLS_CONSUMER_GROUP, AdminClient
from orbitmq.dashboard.data import ClusterData, describe_error
from orbitmq.dashboard.history import History, Point
from orbitmq.dashboard.messages import TRACE_TOPIC_DEFAULT, MessageSearch
from orbitmq.errors import OrbitError

__all__ = ["DashboardConfig", "DashboardState"]

logger = logging.getLogger("orbitmq.dashboard.app")


@dataclass(frozen=True, slots=True)
class DashboardConfig:
    """Settings of one dashboard."""

    # Name servers, "host:port;host:port".
    namesrv_addr: str
    # Seconds between two samples of the TPS and lag charts.
    sample_interval_s: float = 10.0
    # "user:password" asked for every page (HTTP basic); None = no login.
    auth: str | None = None
    # Topic the message page reads traces from.
    trace_topic: str = TRACE_TOPIC_DEFAULT
    # ACL credentials the dashboard's clients sign requests with (brokers with aclEnable=true).
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    # Other name servers ("host:port;host:port" each) the ops page may switch to.
    other_namesrv_addrs: tuple[str, ...] = ()


class DashboardState:
    """The clients a dashboard talks to its cluster with, and its chart samples.

    :meth:`switch` moves every client to another of the configured name servers (the ops
    page); requests already running finish on the old clients.
    """

    def __init__(self, config: DashboardConfig) -> None:
        self.config = config
        self.namesrv_addr = config.namesrv_addr
        self._build(config.namesrv_addr)
        self.history = History()
        self.sample_error = ""

    def _build(self, namesrv_addr: str) -> None:
        config = self.config
        keys: dict[str, Any] = (
            {"access_key": config.access_key, "secret_key": config.secret_key} if config.access_key else {}
        )
        stamp = time.time_ns()
        self.admin = AdminClient(namesrv_addr, instance_name=f"dashboard-{stamp}", **keys)
        self.pull = PullConsumer(
            TOOLS_CONSUMER_GROUP, namesrv_addr, instance_name=f"dashboard-pull-{stamp}", **keys
        )
        self.producer = Producer(
            "DASHBOARD_PRODUCER", namesrv_addr, instance_name=f"dashboard-send-{stamp}", **keys
        )
        self.data = ClusterData(self.admin)
        self.search = MessageSearch(self.admin, self.pull, self.producer, config.trace_topic)

    @property
    def namesrv_choices(self) -> list[str]:
        """The name servers the ops page may switch to: ``--namesrv`` first, then the others."""
        return list(dict.fromkeys((self.config.namesrv_addr, *self.config.other_namesrv_addrs)))

    async def start(self) -> None:
        await self.admin.start()
        await self.pull.start()
        await self.producer.start()

    async def stop(self) -> None:
        await self.producer.shutdown()
        await self.pull.shutdown()
        await self.admin.close()

    async def switch(self, namesrv_addr: str) -> None:
        """Talk to ``namesrv_addr`` (one of :attr:`namesrv_choices`) from now on.

        Raises:
            ValueError: not one of the choices.
        """
        if namesrv_addr not in self.namesrv_choices:
            raise ValueError(f"{namesrv_addr} is not one of the dashboard's name servers")
        old = (self.admin, self.pull, self.producer)
        self._build(namesrv_addr)
        await self.start()
        self.namesrv_addr = namesrv_addr
        self.history = History()
        self.sample_error = ""
        await old[2].shutdown()
        await old[1].shutdown()
        await old[0].close()

    async def sample_forever(self) -> None:
        while True:
            try:
                brokers = await self.data.brokers()
                lag = await self.data.total_lag()
                self.history.add(
                    Point(
                        int(time.time() * 1000),
                        sum(row.produce_tps for row in brokers if row.broker_id == 0),
                        sum(row.consume_tps for row in brokers),
                        lag,
                    )
                )
                self.sample_error = ""
            except OrbitError as exc:
                if not self.sample_error:
                    logger.warning("chart sample failed: %s", exc)
                self.sample_error = describe_error(exc)
            await asyncio.sleep(self.config.sample_interval_s)
